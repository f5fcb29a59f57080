"""``plan_load``: the request validated, layers placed, the verdict, reasons and suggestions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from engine.base.units import format_bytes
from engine.catalog import ModelInfo
from engine.machine.hardware import HardwareSnapshot
from engine.planner.load_plan import (
    TIGHT_MARGIN,
    DeviceMemory,
    InvalidLoadRequest,
    LlamaParams,
    LoadPhase,
    LoadPlan,
    LoadRequest,
    Suggestion,
    Verdict,
    output_rows,
)
from engine.planner.model_shape import model_shape
from engine.planner.placement import (
    auto_gpu_layers,
    device_key,
    device_memory,
    is_worker,
    lay_out,
    offload_devices,
    split_summary,
)
from engine.planner.reasons import memory_reasons, placement_reasons, resource_label
from engine.planner.suggestions import suggest
from engine.planner.validation import validate_request


def plan_load(info: ModelInfo, hardware: HardwareSnapshot, request: LoadRequest) -> LoadPlan:
    """Predict memory per device, choose llama.cpp parameters, and say whether it fits.

    Raises InvalidLoadRequest for settings llama.cpp would reject.
    """
    return _plan(info, hardware, request, with_suggestions=True)


def _plan(
    info: ModelInfo, hardware: HardwareSnapshot, request: LoadRequest, with_suggestions: bool
) -> LoadPlan:
    if info.is_projector:
        raise InvalidLoadRequest(f"{info.display_name} is a vision projector, not a language model")
    shape = model_shape(info)
    settings = validate_request(info, shape, request, hardware)
    planned_for = hardware  # suggestions are planned again from the snapshot as given
    devices: tuple[str, ...] = ()
    split: tuple[float, ...] = ()
    if hardware.remote_devices:
        # RPC workers' devices are offload devices like GPUs, ahead of the local ones.
        offload = offload_devices(hardware)
        hardware = replace(hardware, gpus=offload, gpu_offload_supported=True)
        local_index = iter(range(len(offload)))
        devices = tuple(device_key(g, 0 if is_worker(g) else next(local_index)) for g in offload)
        if request.tensor_split is not None:
            if len(request.tensor_split) != len(offload) or any(x < 0 for x in request.tensor_split):
                raise InvalidLoadRequest(
                    f"The split needs one share (0 or more) per device: {len(offload)} "
                    f"({', '.join(g.name for g in offload)})."
                )
            if sum(request.tensor_split) <= 0:
                raise InvalidLoadRequest("The split gives no device any layers.")
            split = tuple(float(x) for x in request.tensor_split)
        else:
            # llama.cpp's default weighs by free memory too, but asks each device itself at
            # load time: passing the planned shares makes it place exactly what was planned.
            split = tuple(round(g.vram_free / (1024 * 1024), 3) for g in offload)
    draft_shape = model_shape(request.draft) if request.draft is not None else None
    if draft_shape is not None and request.kv_type.is_quantized:
        block = request.kv_type.block_size
        if draft_shape.key_length % block or draft_shape.value_length % block:
            raise InvalidLoadRequest(
                f"A {request.kv_type.value} KV cache needs head sizes divisible by {block}; "
                f"the draft model's are {draft_shape.key_length}/{draft_shape.value_length}: use f16"
            )
    reasons = list(settings.reasons)

    quantized_v = request.kv_type.is_quantized
    n_outputs_max, n_outputs_per_seq = output_rows(settings.parallel, request.draft_rows, settings.n_batch)
    base = LlamaParams(
        n_gpu_layers=0,
        n_ctx=settings.n_ctx,
        n_seq_max=settings.parallel,
        n_batch=settings.n_batch,
        n_ubatch=settings.n_ubatch,
        # Without a pool each conversation gets exactly its own context.
        kv_unified=settings.pool is not None,
        longest_conversation=settings.context if settings.pool is not None else 0,
        type_k=request.kv_type,
        type_v=request.kv_type,
        flash_attn=quantized_v,  # a quantized V cache requires it; otherwise llama.cpp decides
        swa_full=True,  # full-size SWA caches keep cached prefixes reusable
        n_threads=settings.threads,
        n_threads_batch=settings.threads,
        n_outputs_max=n_outputs_max,
        n_outputs_max_per_seq=n_outputs_per_seq,
        devices=devices,
        tensor_split=split,
    )
    if quantized_v:
        reasons.append(f"Flash attention on: a {request.kv_type.value} V cache requires it.")

    use_gpu = hardware.has_usable_gpu
    all_layers = shape.n_gpu_layers_all
    if not use_gpu:
        n_gpu_layers = 0
        if hardware.offload_note:
            reasons.append(hardware.offload_note)
        elif request.gpu_layers:
            reasons.append(f"No usable GPU ({hardware.gpu_status}): everything runs on the CPU.")
    elif request.gpu_layers is not None:
        n_gpu_layers = min(request.gpu_layers, all_layers)
    else:
        n_gpu_layers = auto_gpu_layers(shape, base, hardware, request, draft_shape)

    layout = lay_out(shape, base, n_gpu_layers, hardware, use_gpu, request, draft_shape, place_extras=True)
    memory = device_memory(layout, hardware, use_gpu)

    judged = memory_verdict(memory, hardware)
    verdict, limiting, deficit = judged.verdict, judged.limiting_resource, judged.deficit
    # Partial: a usable GPU holds only some layers (asking for none is a CPU load).
    if verdict is Verdict.FITS and use_gpu and n_gpu_layers < all_layers and request.gpu_layers != 0:
        verdict = Verdict.PARTIAL_OFFLOAD
    if judged.tight_reason is not None:
        reasons.append(judged.tight_reason)

    machines, network_bytes = 1, 0
    if devices:
        where, network_bytes = split_summary(shape, layout.params, hardware.gpus)
        # This machine always counts: the token embeddings and the sampling stay here.
        machines = 1 + sum(1 for _, n in where[1:] if n)
        if machines > 1:
            layers = ", ".join(f"{n} on {m}" for m, n in where)
            reasons.append(
                f"Split across {machines} machines, layers {layers}: "
                f"about {format_bytes(network_bytes)} cross the network per token."
            )
    reasons += placement_reasons(shape, layout.params, use_gpu, request, hardware)
    reasons += memory_reasons(info, shape, layout, memory, request, hardware.simd)

    suggestions: tuple[Suggestion, ...] = ()
    if with_suggestions and verdict is not Verdict.FITS:
        want: Callable[[LoadPlan], bool] = {
            Verdict.DOES_NOT_FIT: lambda p: p.fits,
            Verdict.TIGHT: lambda p: p.verdict in (Verdict.FITS, Verdict.PARTIAL_OFFLOAD),  # headroom
            Verdict.PARTIAL_OFFLOAD: lambda p: p.verdict is Verdict.FITS,
        }[verdict]
        if verdict is not Verdict.PARTIAL_OFFLOAD or request.gpu_layers is None:
            suggestions = suggest(
                request,
                hardware,
                settings,
                layout,
                memory,
                want,
                replan=lambda req: _plan(info, planned_for, req, with_suggestions=False),
            )
        if verdict is Verdict.DOES_NOT_FIT and not suggestions:
            reasons.append("No single change makes it fit on this machine.")

    phases = [LoadPhase.VALIDATE]
    if any(d.startswith("rpc:") for d in devices) and layout.params.n_gpu_layers > 0:
        phases.append(LoadPhase.WORKERS)
    phases += [LoadPhase.WEIGHTS, LoadPhase.CONTEXT]
    if request.projector is not None:
        phases.append(LoadPhase.PROJECTOR)
    if request.draft is not None:
        phases.append(LoadPhase.DRAFT)
    phases += [LoadPhase.WARMUP, LoadPhase.READY]

    return LoadPlan(
        model=info,
        request=request,
        params=layout.params,
        memory=memory,
        verdict=verdict,
        limiting_resource=limiting,
        deficit=deficit,
        reasons=tuple(reasons),
        suggestions=suggestions,
        phases=tuple(phases),
        machines=machines,
        network_bytes_per_token=network_bytes,
        may_swap=hardware.swap_total > 0,
    )


@dataclass(frozen=True)
class MemoryVerdict:
    """What the memory per device says alone: DOES_NOT_FIT, TIGHT or FITS (placement decides
    whether a fitting plan is a partial offload)."""

    verdict: Verdict
    limiting_resource: str | None  # "RAM", "VRAM on …", "memory on worker …"; None when it fits
    deficit: int  # bytes missing on the limiting resource
    tight_reason: str | None  # the line a tight plan gives


def memory_verdict(memory: tuple[DeviceMemory, ...], hardware: HardwareSnapshot) -> MemoryVerdict:
    """The planner's one fit rule: a device whose predicted bytes exceed what it has free,
    less its reserve, does not fit (the worst one is named); RAM (``memory[0]``) within
    TIGHT_MARGIN of that is tight. Every plan is judged by it: a model's, an embedder's."""
    short = [m for m in memory if m.deficit > 0]
    if short:
        worst = max(short, key=lambda m: m.deficit)
        return MemoryVerdict(Verdict.DOES_NOT_FIT, resource_label(worst.device), worst.deficit, None)
    # Only RAM swaps; VRAM keeps its own reserve, and auto offload fills it on purpose.
    ram = memory[0]
    if ram.total > (1 - TIGHT_MARGIN) * ram.usable:
        return MemoryVerdict(Verdict.TIGHT, None, 0, tight_reason(ram, hardware.swap_total > 0))
    return MemoryVerdict(Verdict.FITS, None, 0, None)


def tight_reason(ram: DeviceMemory, may_swap: bool) -> str:
    """Why a plan is tight, in the free-RAM figure every other line of the plan uses
    (``available``): what it leaves free once loaded; "may swap" only with swap space."""
    said = (
        f"once loaded it leaves only {format_bytes(max(0, ram.available - ram.total))} of the "
        f"{format_bytes(ram.available)} of RAM free"
    )
    if may_swap:
        return f"Tight: {said}; the system may swap."
    return (
        f"{said[0].upper()}{said[1:]}, and this machine has no swap: a program that needs more "
        "may be stopped for want of memory."
    )
