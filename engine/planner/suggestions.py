"""Single changes to a request that give its plan what it lacks, each verified by planning again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from engine.base.units import plural
from engine.machine.hardware import HardwareSnapshot
from engine.planner.load_plan import (
    CONTEXT_STEP,
    MIN_CONTEXT,
    DeviceMemory,
    InvalidLoadRequest,
    KvCacheType,
    LoadPlan,
    LoadRequest,
    Suggestion,
)
from engine.planner.memory_estimate import non_causal_image_tokens
from engine.planner.placement import Layout
from engine.planner.validation import Settings


def suggest(
    request: LoadRequest,
    hardware: HardwareSnapshot,
    settings: Settings,
    layout: Layout,
    memory: tuple[DeviceMemory, ...],
    want: Callable[[LoadPlan], bool],
    replan: Callable[[LoadRequest], LoadPlan],
) -> tuple[Suggestion, ...]:
    """Single changes that give the plan what it lacks (``want``: fit, headroom, or a full
    offload), each verified by planning it again (``replan``, without suggestions); the
    smallest change of each kind."""

    def ok(req: LoadRequest) -> bool:
        try:
            plan = replan(req)
        except InvalidLoadRequest:
            return False
        return want(plan)

    def largest(values: list[int], make: Callable[[int], LoadRequest]) -> int | None:
        """The largest value (ascending list) whose request fits, assuming monotonicity."""
        if not values or not ok(make(values[0])):
            return None
        lo, hi = 0, len(values)  # values[lo] fits; values[hi:] unknown or failing
        while lo < hi - 1:
            mid = (lo + hi) // 2
            if ok(make(values[mid])):
                lo = mid
            else:
                hi = mid
        return values[lo]

    out: list[Suggestion] = []

    def ctx_req(c: int) -> LoadRequest:
        return replace(request, context_per_conversation=c)

    contexts = list(range(MIN_CONTEXT, settings.context, CONTEXT_STEP))
    if settings.pool is not None:
        # A shared pool's memory is its cells: fewer of them, the longest conversation kept.
        def pool_req(c: int) -> LoadRequest:
            return replace(request, kv_pool=c)

        if (c := largest(list(range(MIN_CONTEXT, settings.pool, CONTEXT_STEP)), pool_req)) is not None:
            out.append(Suggestion(f"Memory for conversations {c:,} tokens", pool_req(c)))
    elif (c := largest(contexts, ctx_req)) is not None:
        out.append(Suggestion(f"Context {c:,} tokens per conversation", ctx_req(c)))

    def par_req(n: int) -> LoadRequest:
        return replace(request, parallel=n)

    if (n := largest(list(range(1, request.parallel)), par_req)) is not None:
        out.append(Suggestion(plural(n, "parallel conversation"), par_req(n)))

    smaller_kv = {
        KvCacheType.F16: (KvCacheType.Q8_0, KvCacheType.Q4_0),
        KvCacheType.Q8_0: (KvCacheType.Q4_0,),
        KvCacheType.Q4_0: (),
    }[request.kv_type]
    for kv in smaller_kv:  # the least lossy one that fits
        candidate = replace(request, kv_type=kv)
        if ok(candidate):
            out.append(Suggestion(f"{kv.value} KV cache (smaller, slightly less exact)", candidate))
            break

    image_tokens = non_causal_image_tokens(request.projector)
    ubatches = [u for u in (32, 64, 128, 256) if u < settings.n_ubatch and u >= image_tokens]

    def ub_req(u: int) -> LoadRequest:
        return replace(request, n_ubatch=u)

    if (u := largest(ubatches, ub_req)) is not None:
        out.append(
            Suggestion(f"Micro-batch of {u} tokens (smaller compute buffer, slower prompts)", ub_req(u))
        )

    if request.gpu_layers is not None and hardware.has_usable_gpu:
        if any(m.deficit for m in memory[1:]):

            def gl_req(n: int) -> LoadRequest:
                return replace(request, gpu_layers=n)

            if (n := largest(list(range(0, layout.params.n_gpu_layers)), gl_req)) is not None:
                out.append(Suggestion(f"{n} GPU layers", gl_req(n)))
        elif ok(replace(request, gpu_layers=None)):
            out.append(Suggestion("GPU layers: as many as fit", replace(request, gpu_layers=None)))

    if not out:
        # Nothing single works: the two levers that shrink the biggest buffers together.
        for u in reversed(ubatches):
            if (
                c := largest(contexts, lambda c, u=u: replace(ub_req(u), context_per_conversation=c))
            ) is not None:
                out.append(
                    Suggestion(
                        f"Micro-batch of {u} tokens and context {c:,} tokens per conversation",
                        replace(ub_req(u), context_per_conversation=c),
                    )
                )
                break

    if request.draft is not None and ok(replace(request, draft=None)):
        out.append(Suggestion("Load without the draft model", replace(request, draft=None)))
    if request.projector is not None and ok(replace(request, projector=None)):
        out.append(Suggestion("Load without the projector (no images)", replace(request, projector=None)))
    return tuple(out)
