"""Loading one model, phase by phase, into a ``NativeModel`` (executor thread only).

The phases are the plan's (``LoadPlan.phases``); each reports start, progress and end
through ``LoadHooks`` (the executor emits them as Qt signals) and checks for cancellation
first. A failed or cancelled load frees what it had built before the error leaves.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.base.errors import Cancelled, DoesNotFit, EngineError, LoadFailed, WorkerUnavailable
from engine.catalog import inspect_model
from engine.chat import ChatTemplate
from engine.chat.traits import chat_traits
from engine.multimodal import ProjectorRuntime
from engine.native.batch import NativeBatch
from engine.native.context_params import context_params
from engine.native.llama_log import LogLine, most_specific_error
from engine.native.model_check import require_loadable
from engine.planner import LoadPhase, LoadPlan, cells_per_sequence
from engine.runtime.native_model import NativeModel
from engine.runtime.prompt_builder import PromptBuilder
from engine.runtime.token_sampler import SamplerHost
from engine.speculation.draft_model import DraftModel, check_draft_compatible
from engine.speculation.policy import (
    BEST_DRAFT_ACCEPTANCE,
    DraftCostModel,
    SpeculationConfig,
    SpeculationMode,
    draft_dropped_note,
)

log = logging.getLogger("hearth.executor")


@dataclass(frozen=True)
class LoadHooks:
    """How a load reports itself, and how it learns it was cancelled."""

    started: Callable[[LoadPhase], None]
    progress: Callable[[LoadPhase, float], None]
    finished: Callable[[LoadPhase, float], None]
    cancelled: Callable[[], bool]


class ModelLoader:
    """Runs a plan's load phases; ``load()`` returns the model ready to serve."""

    def __init__(
        self,
        plan: LoadPlan,
        speculation: SpeculationConfig,
        hooks: LoadHooks,
        *,
        model_identity: str,
        force: bool = False,
    ) -> None:
        import llama_cpp

        self.plan = plan
        self.speculation = speculation
        self.hooks = hooks
        self.model_identity = model_identity
        self.force = force
        self.native = NativeModel(llama_cpp)

    def load(self) -> NativeModel:
        steps: dict[LoadPhase, Callable[[], None]] = {
            LoadPhase.VALIDATE: self._validate,
            LoadPhase.WORKERS: self._connect_workers,
            LoadPhase.WEIGHTS: self._load_weights,
            LoadPhase.CONTEXT: self._create_context,
            LoadPhase.PROJECTOR: self._load_projector,
            LoadPhase.DRAFT: self._load_draft,
            LoadPhase.WARMUP: self._warm_up,
            LoadPhase.READY: self._ready_to_serve,
        }
        try:
            for phase in self.plan.phases:
                self._phase(phase, steps[phase])
        except BaseException:
            self.native.free()
            raise
        return self.native

    def _phase(self, phase: LoadPhase, work: Callable[[], None]) -> None:
        self._check_cancelled()
        start = time.perf_counter()
        self.hooks.started(phase)
        self.hooks.progress(phase, 0.0)
        work()
        self.hooks.progress(phase, 1.0)
        self.hooks.finished(phase, time.perf_counter() - start)

    def _check_cancelled(self) -> None:
        if self.hooks.cancelled():
            raise Cancelled("Loading was cancelled.")

    def _progress(self, phase: LoadPhase) -> Callable[[float], bool]:
        """A progress callback for native code: reports, and answers False to stop."""

        def report(fraction: float) -> bool:
            self.hooks.progress(phase, float(fraction))
            return not self.hooks.cancelled()

        return report

    # -- phases -------------------------------------------------------------------

    def _validate(self) -> None:
        plan = self.plan
        info = inspect_model(plan.model.path)
        if info.file_size != plan.model.file_size:
            raise LoadFailed(f"{plan.model.path.name} changed since it was planned; plan again.")
        draft_model = self.speculation.mode is SpeculationMode.DRAFT_MODEL
        reserved = plan.params.n_outputs_max_per_seq - 1 if plan.params.n_outputs_max else None
        if self.speculation.enabled and reserved is not None and self.speculation.max_draft > reserved:
            # Draft rows are logit rows llama.cpp must reserve; the plan counted their memory.
            raise LoadFailed(
                f"Plan again with speculation (max_draft={self.speculation.max_draft}): "
                f"the plan reserved {reserved} draft rows per conversation."
            )
        if draft_model:
            if plan.request.draft is None:
                raise LoadFailed("Plan again with the draft model: its memory was not counted.")
            # Refuse an incompatible draft before anything native is loaded.
            check_draft_compatible(info, plan.request.draft, info.path, plan.request.draft.path)
        if not plan.fits and not self.force:
            raise DoesNotFit(plan.reasons[0] if plan.reasons else "The model does not fit this machine.")
        # A file llama.cpp has not opened before is opened in a child first (once per header).
        require_loadable(info)
        if draft_model and plan.request.draft is not None:
            require_loadable(plan.request.draft)

    def _connect_workers(self) -> None:
        """Register each worker the plan uses with llama.cpp, after a child process reached
        it: ggml-rpc aborts the process on a worker it cannot connect to (engine/rpc)."""
        from engine.rpc import guard, parse_address, probe_worker
        from engine.rpc.native_rpc import add_server

        guard.install()
        endpoints = self.plan.workers
        for i, endpoint in enumerate(endpoints):
            self._check_cancelled()
            info = probe_worker(parse_address(endpoint))
            if not info.online:
                raise WorkerUnavailable(f"The worker at {endpoint} is offline: {info.reason}.")
            planned = [k for k in self.plan.params.devices if k.startswith(f"rpc:{endpoint}#")]
            if len(info.devices) < len(planned):
                raise WorkerUnavailable(f"The worker at {endpoint} now offers fewer devices than planned.")
            add_server(endpoint)
            self.hooks.progress(LoadPhase.WORKERS, (i + 1) / max(1, len(endpoints)))

    def _offload_devices(self) -> list[int] | None:
        """The ggml devices the plan offloads to, or None for llama.cpp's own choice (every
        local GPU). A worker's devices are not in ggml's device list (native_rpc.add_server),
        so a split plan names all of its devices."""
        keys = self.plan.params.devices
        if not keys:
            return None
        from engine.rpc.native_rpc import local_devices, registered

        workers = registered()
        local_gpus = [d.handle for d in local_devices() if d.is_local_gpu]
        handles = []
        for key in keys:
            if key.startswith("rpc:"):
                endpoint, _, index = key[4:].rpartition("#")
                handles.append(workers[endpoint][int(index)])
            else:
                handles.append(local_gpus[int(key.partition(":")[2])])
        return handles

    def _load_weights(self) -> None:
        import ctypes

        native, ll = self.native, self.native.ll
        params = ll.llama_model_default_params()
        params.n_gpu_layers = self.plan.params.n_gpu_layers
        devices = self._offload_devices()
        if devices is not None:
            # NULL-terminated ggml_backend_dev_t[]; the arrays stay referenced by the model
            # (llama.cpp copies the devices but reads tensor_split during the load).
            native.devices_array = (ctypes.c_void_p * (len(devices) + 1))(*devices, None)
            params.devices = ctypes.cast(native.devices_array, ctypes.c_void_p).value
            split = self.plan.params.tensor_split
            if split and len(split) == len(devices):
                native.split_array = (ctypes.c_float * int(ll.llama_max_devices()))(*split)
                params.tensor_split = native.split_array
        report = self._progress(LoadPhase.WEIGHTS)
        native.progress_callback = ll.llama_progress_callback(lambda fraction, _user: report(fraction))
        params.progress_callback = native.progress_callback
        model = ll.llama_model_load_from_file(str(self.plan.model.path).encode(), params)
        if not model:
            self._check_cancelled()
            raise LoadFailed(
                f"llama.cpp could not load {self.plan.model.path.name} (unsupported or damaged file, "
                "or not enough memory)."
            )
        native.model = model
        native.vocab = ll.llama_model_get_vocab(model)
        native.n_vocab = int(ll.llama_vocab_n_tokens(native.vocab))
        native.template = ChatTemplate.from_model(model)
        native.traits = chat_traits(native.template)
        native.visible = native.find_visible()

    def _create_context(self) -> None:
        native, ll = self.native, self.native.ll
        p = self.plan.params
        ctx = ll.llama_init_from_model(native.model, context_params(ll, p))
        if not ctx:
            raise LoadFailed(
                "llama.cpp could not create the context: not enough memory for "
                f"{p.n_ctx} tokens of KV cache — try a smaller context."
            )
        native.ctx = ctx
        native.mem = ll.llama_get_memory(ctx)
        native.n_ctx = ll.llama_n_ctx(ctx)
        native.n_seq = ll.llama_n_seq_max(ctx)
        native.n_batch = min(ll.llama_n_batch(ctx), p.n_batch)
        native.n_ctx_seq = min(cells_per_sequence(native.n_ctx, native.n_seq, p.kv_unified), p.n_ctx_seq)
        native.shared_pool = p.shared_pool
        native.n_outputs = p.outputs_max
        native.batch = NativeBatch(native.n_batch, native.n_outputs)

    def _load_projector(self) -> None:
        projector = self.plan.request.projector
        if projector is None:
            return
        self.native.projector = ProjectorRuntime.load(
            projector.path,
            self.native.model,
            self.plan.params.n_threads,
            self.plan.params.projector_use_gpu,
            self._progress(LoadPhase.PROJECTOR),
            model_info=self.plan.model,
        )

    def _load_draft(self) -> None:
        spec = self.speculation
        if spec.mode is not SpeculationMode.DRAFT_MODEL or spec.draft_path is None:
            return
        self.native.draft = DraftModel.load(
            spec.draft_path,
            self.plan.params,
            target=self.plan.model,
            progress=self._progress(LoadPhase.DRAFT),
            p_min=spec.p_min,
        )

    def _warm_up(self) -> None:
        native, ll = self.native, self.native.ll
        bos = ll.llama_vocab_bos(native.vocab)
        token = bos if bos >= 0 else 0
        rc = self._timed_decode(token, 1)[0]
        if rc != 0:
            raise LoadFailed(f"The model loaded but could not evaluate a token (llama_decode returned {rc}).")
        if self.speculation.enabled and self.speculation.adaptive:
            native.draft_costs = costs = self._measure_draft_costs(token)
            spec = self.speculation
            pays = costs.pays_at(BEST_DRAFT_ACCEPTANCE, spec.max_draft, spec.min_draft)
            if native.draft is not None and not pays:
                # Never slower with a draft than without: here it could not pay, so it
                # neither prefills nor holds its memory.
                native.draft_note = draft_dropped_note(native.draft.path.name, costs)
                native.draft.free()
                native.draft = None

    def _timed_decode(self, token: int, rows: int) -> tuple[int, float]:
        """Decode ``rows`` copies of ``token`` on sequence 0 and clear the cache after."""
        native, ll = self.native, self.native.ll
        batch = native.batch
        assert batch is not None
        batch.clear()
        batch.add_run(0, 0, [token] * rows, range(rows))
        start = time.perf_counter()
        rc = native.decode(batch)
        ll.llama_synchronize(native.ctx)
        seconds = time.perf_counter() - start
        ll.llama_memory_clear(native.mem, True)
        return rc, seconds

    def _measure_draft_costs(self, token: int) -> DraftCostModel:
        """Time decodes of 1..max_draft+1 rows on this machine: whether a draft pays
        depends on what an extra row of logits costs here."""
        spec, native = self.speculation, self.native
        top = min(spec.max_draft + 1, native.n_outputs, native.n_ctx_seq)
        timings: dict[int, float] = {}
        for rows in sorted({1, 2, 3, 5, 9, top} - {r for r in (2, 3, 5, 9) if r > top}):
            best = float("inf")
            for _ in range(3):
                rc, seconds = self._timed_decode(token, rows)
                best = min(best, seconds)
                if rc != 0:
                    break
            timings[rows] = best
        draft_cost = 0.0
        if spec.mode is SpeculationMode.DRAFT_MODEL and native.draft is not None:
            # Timed, not guessed from parameter counts: a small model's vocabulary-wide
            # output layer weighs more than its share of parameters (Qwen2.5-Coder 0.5B
            # decodes at 0.54x the 1.5B's cost on 2 cores, 0.32x by parameters).
            draft_cost = native.draft.decode_seconds() / timings[1]
        return DraftCostModel.measured(timings, spec.max_draft, draft_cost)

    def _ready_to_serve(self) -> None:
        native = self.native
        assert native.template is not None
        native.prompts = PromptBuilder(
            vocab=native.vocab,
            template=native.template,
            n_vocab=native.n_vocab,
            model_identity=self.model_identity,
            n_batch=native.n_batch,
            n_ubatch=self.plan.params.n_ubatch,
            projector=native.projector,
            has_vision=native.has_vision,
        )
        native.samplers = SamplerHost(
            native.ll, native.ctx, native.vocab, native.n_vocab, native.piece, native.tokenize_text
        )


def load_error(exc: BaseException, native_log: Sequence[LogLine]) -> EngineError:
    """What a failed load tells the user: a LoadFailed names llama.cpp's own cause when its
    log has one (every native line stays in the log); anything unexpected is logged."""
    if not isinstance(exc, EngineError):
        log.exception("unexpected load failure", exc_info=exc)
        return LoadFailed(f"Loading failed: {exc}")
    if isinstance(exc, LoadFailed):
        cause = most_specific_error(native_log)
        if cause:
            headline = exc.message.split(" (")[0].rstrip(".")  # the cause replaces our guess
            return LoadFailed(f"{headline}: {cause}")
    return exc
