"""The executor QThread: owns every native llama.cpp handle of one loaded model.

It loads the model phase by phase, then runs the serving loop: drain commands, admit
waiting requests into sequences (reusing cached prefixes), sample sequences whose logits
are ready, plan a batch (engine.scheduler), one ``llama_decode``, commit. Other threads
only enqueue commands; results leave as events on each request's handle.
"""

from __future__ import annotations

import collections
import enum
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QThread, Signal

from engine.active_request import ActiveRequest
from engine.catalog import inspect_model, model_identity
from engine.chat import (
    ChatTemplate,
    TextStream,
    token_to_piece,
)
from engine.defaults import DEFAULT_QUEUE_CAPACITY
from engine.draft_model import DraftModel, DraftRequest, check_draft_compatible
from engine.errors import Cancelled, DoesNotFit, EngineError, ImageRejected, LoadFailed
from engine.llama_log import (
    LogLevel,
    ReportedMemory,
    capture_llama_logs,
    most_specific_error,
    parse_buffer_sizes,
)
from engine.model_check import require_loadable
from engine.multimodal import (
    ImageEvalFailed,
    ProjectorRuntime,
    TokenizedPrompt,
    check_fits,
)
from engine.native import release_freed_memory, require_backend
from engine.native_batch import NativeBatch
from engine.native_context import context_params
from engine.planner import LoadPhase, LoadPlan, cells_per_sequence
from engine.prompt_builder import PromptBuilder
from engine.requests import (
    ChatRequest,
    Completed,
    Completion,
    DecodeFailed,
    EngineStats,
    Failed,
    Prefill,
    PromptTooLong,
    Queued,
    RequestHandle,
    SequenceStats,
    SlotState,
    Started,
    StopReason,
    TextDelta,
    Timings,
    Usage,
)
from engine.sampling import build_chain, free_chain
from engine.scheduler import (
    ZERO_BOUNDARY,
    BatchCommit,
    BatchPlanner,
    PromptLayout,
    SequencePool,
    SequenceProgress,
    SequenceState,
    StagedWork,
    TextSegment,
    WorkKind,
)
from engine.speculative import (
    DraftCostModel,
    LookupIndex,
    SpeculationConfig,
    SpeculationMode,
    draft_limit,
    next_draft_cap,
    relax_acceptance,
    update_acceptance,
    verify_rows,
)

log = logging.getLogger("hearth.executor")

DELTA_INTERVAL = 1.0 / 30.0  # at most ~30 text updates a second per request
PREFILL_EVENT_INTERVAL = 0.1
IDLE_WAIT = 0.5  # seconds a blocked executor waits for a command before re-checking
RATE_WINDOW = 3.0  # seconds of history behind "recent tokens/s"


class ExecutorState(enum.Enum):
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"
    UNLOADED = "unloaded"


# -- commands (other threads -> executor) -------------------------------------------


@dataclass(frozen=True)
class _Submit:
    handle: RequestHandle


@dataclass(frozen=True)
class _Cancel:
    request_id: int


@dataclass(frozen=True)
class _Observe:
    future: Future


@dataclass(frozen=True)
class _Unload:
    pass


# -- per-request state (executor thread only) ------------------------------------------


@dataclass(eq=False)
class _Waiting:
    handle: RequestHandle
    t_submit: float
    cancelled: bool = False


class Executor(QThread):
    """One per loaded model. Construct, connect signals, ``start()``."""

    phase_started = Signal(object)  # LoadPhase
    phase_progress = Signal(object, float)  # LoadPhase, 0..1
    phase_finished = Signal(object, float)  # LoadPhase, seconds
    ready = Signal()
    load_failed = Signal(object)  # EngineError
    unloaded = Signal()

    def __init__(
        self,
        plan: LoadPlan,
        *,
        force: bool = False,
        queue_capacity: int = DEFAULT_QUEUE_CAPACITY,
        speculation: SpeculationConfig | None = None,
    ) -> None:
        super().__init__()
        self.setObjectName(f"hearth-executor-{plan.model.path.stem}")
        self.plan = plan
        self.model_identity = model_identity(plan.model)  # stamped on every Completion's tokens
        self.force = force
        self.queue_capacity = queue_capacity
        self.state = ExecutorState.LOADING
        self.load_error: EngineError | None = None
        self.reported_memory: ReportedMemory | None = None  # what llama.cpp said it allocated
        self._commands: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._outstanding = 0
        self._outstanding_lock = threading.Lock()
        self._cancel_load = threading.Event()
        self._ready_event = threading.Event()
        # Native handles and serving state: touched by the executor thread only.
        self._model: Any = None
        self._ctx: Any = None
        self._mem: Any = None
        self._vocab: Any = None
        self._batch: NativeBatch | None = None
        self._progress_cb: Any = None
        self._template: ChatTemplate | None = None
        self._projector: ProjectorRuntime | None = None
        self.has_vision = False
        self._draft: DraftModel | None = None
        if speculation is None and plan.request.draft is not None:
            speculation = SpeculationConfig(SpeculationMode.DRAFT_MODEL, draft_path=plan.request.draft.path)
        self.speculation = speculation or SpeculationConfig()
        self._drafted = 0
        self._accepted = 0
        self._cost_model: DraftCostModel | None = None
        self._last_owner: dict[int, str] = {}  # who last used each sequence (stats)
        self._waiting: collections.deque[_Waiting] = collections.deque()
        self._active: dict[int, ActiveRequest] = {}  # by sequence id
        self._logit_rows: dict[int, range] = {}
        self._pool: SequencePool | None = None
        self._planner = BatchPlanner()
        self._prompts: PromptBuilder | None = None  # once the model is loaded
        # Sequences of a batch llama_decode failed: each runs alone until it passes or fails.
        self._suspects: collections.deque[int] = collections.deque()
        self.n_ctx = 0
        self.n_ctx_seq = 0
        self.n_batch = 0
        self.n_seq = 0
        # Counters for stats().
        self._hits = 0
        self._misses = 0
        self._reused = 0
        self._ticks = 0
        self._completed = 0
        self._rates: collections.deque[tuple[float, int, int]] = collections.deque()
        self._last_fill = 0.0
        self._scheduler_seconds = 0.0

    # ------------------------------------------------------------------ any thread

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until loaded; raise the load error if loading failed."""
        if not self._ready_event.wait(timeout):
            raise TimeoutError("the model did not finish loading in time")
        if self.load_error is not None:
            raise self.load_error

    def cancel_load(self) -> None:
        self._cancel_load.set()

    def submit(
        self, request: ChatRequest, connect: Callable[[RequestHandle], None] | None = None
    ) -> RequestHandle:
        """Queue a request; raises Overloaded when the queue is full, never blocks.

        ``connect(handle)`` runs before the executor can see the request: connect the
        handle's signals there, or a fast request may finish before anyone listens.
        """
        from engine.errors import Overloaded

        request.validate()
        if self.state in (ExecutorState.FAILED, ExecutorState.UNLOADED):
            raise LoadFailed("No model is loaded.")
        with self._outstanding_lock:
            limit = self.queue_capacity + max(self.n_seq, self.plan.params.n_seq_max)
            if self._outstanding >= limit:
                raise Overloaded(f"Hearth is busy: {self._outstanding} requests are already waiting.")
            self._outstanding += 1
        handle = RequestHandle(request, canceller=self.cancel)
        if connect is not None:
            try:
                connect(handle)
            except BaseException:
                self._release_slot()
                raise
        self._commands.put(_Submit(handle))
        return handle

    def cancel(self, request_id: int) -> None:
        self._commands.put(_Cancel(request_id))

    def request_stats(self) -> Future:
        future: Future = Future()
        self._commands.put(_Observe(future))
        return future

    def stats(self, timeout: float = 5.0) -> EngineStats:
        """Observed through the command queue: answered between two batches."""
        return self.request_stats().result(timeout)

    def request_unload(self) -> None:
        self._cancel_load.set()
        self._commands.put(_Unload())

    # ------------------------------------------------------------------ executor thread

    def run(self) -> None:
        native_log: list = []
        try:
            require_backend()
            with capture_llama_logs(LogLevel.INFO, this_thread_only=True) as native_log:
                self._load()
            self.reported_memory = parse_buffer_sizes(native_log)
        except BaseException as exc:
            error = exc if isinstance(exc, EngineError) else LoadFailed(f"Loading failed: {exc}")
            if not isinstance(exc, EngineError):
                log.exception("unexpected load failure")
            elif isinstance(exc, LoadFailed):
                # The cause, in llama.cpp's words; every native line stays in the log.
                cause = most_specific_error(native_log)
                if cause:
                    headline = exc.message.split(" (")[0].rstrip(".")  # the cause replaces our guess
                    error = LoadFailed(f"{headline}: {cause}")
            self._free_native()
            self.load_error = error
            self.state = ExecutorState.FAILED
            self._ready_event.set()
            self.load_failed.emit(error)
            self._fail_everything(error)
            return
        self.state = ExecutorState.READY
        self._ready_event.set()
        self.ready.emit()
        try:
            self._serve()
        except BaseException:
            log.exception("executor loop crashed")
            self._fail_everything(DecodeFailed("The engine stopped after an internal error."))
        finally:
            self._fail_everything(Cancelled("The model was unloaded."))
            self._free_native()
            self.state = ExecutorState.UNLOADED
            self.unloaded.emit()

    # -- loading ------------------------------------------------------------------

    def _phase(self, phase: LoadPhase, work: Callable[[], None]) -> None:
        if self._cancel_load.is_set():
            raise Cancelled("Loading was cancelled.")
        start = time.perf_counter()
        self.phase_started.emit(phase)
        self.phase_progress.emit(phase, 0.0)
        work()
        self.phase_progress.emit(phase, 1.0)
        self.phase_finished.emit(phase, time.perf_counter() - start)

    def _load(self) -> None:
        steps: dict[LoadPhase, Callable[[], None]] = {
            LoadPhase.VALIDATE: self._validate,
            LoadPhase.WEIGHTS: self._load_weights,
            LoadPhase.CONTEXT: self._create_context,
            LoadPhase.PROJECTOR: self._load_projector,
            LoadPhase.DRAFT: self._load_draft,
            LoadPhase.WARMUP: self._warm_up,
            LoadPhase.READY: self._ready_to_serve,
        }
        for phase in self.plan.phases:
            self._phase(phase, steps[phase])

    def _ready_to_serve(self) -> None:
        assert self._template is not None
        self._prompts = PromptBuilder(
            vocab=self._vocab,
            template=self._template,
            n_vocab=self._n_vocab,
            model_identity=self.model_identity,
            n_batch=self.n_batch,
            n_ubatch=self.plan.params.n_ubatch,
            projector=self._projector,
            has_vision=self.has_vision,
        )

    def _validate(self) -> None:
        plan = self.plan
        info = inspect_model(plan.model.path)
        if info.file_size != plan.model.file_size:
            raise LoadFailed(f"{plan.model.path.name} changed since it was planned; plan again.")
        spec = self.speculation
        if spec.mode is SpeculationMode.DRAFT_MODEL:
            if plan.request.draft is None:
                raise LoadFailed("Plan again with the draft model: its memory was not counted.")
            # Refuse an incompatible draft before anything native is loaded.
            check_draft_compatible(info, plan.request.draft, info.path, plan.request.draft.path)
        if not plan.fits and not self.force:
            raise DoesNotFit(plan.reasons[0] if plan.reasons else "The model does not fit this machine.")
        # A file llama.cpp has not opened before is opened in a child first (once per header).
        require_loadable(info)
        if spec.mode is SpeculationMode.DRAFT_MODEL and plan.request.draft is not None:
            require_loadable(plan.request.draft)

    def _load_weights(self) -> None:
        import llama_cpp as ll

        params = ll.llama_model_default_params()
        params.n_gpu_layers = self.plan.params.n_gpu_layers

        def on_progress(progress: float, _user: Any) -> bool:
            self.phase_progress.emit(LoadPhase.WEIGHTS, float(progress))
            return not self._cancel_load.is_set()

        # ctypes callbacks must stay referenced while llama.cpp may call them.
        self._progress_cb = ll.llama_progress_callback(on_progress)
        params.progress_callback = self._progress_cb
        model = ll.llama_model_load_from_file(str(self.plan.model.path).encode(), params)
        if not model:
            if self._cancel_load.is_set():
                raise Cancelled("Loading was cancelled.")
            raise LoadFailed(
                f"llama.cpp could not load {self.plan.model.path.name} (unsupported or damaged file, "
                "or not enough memory)."
            )
        self._model = model
        self._vocab = ll.llama_model_get_vocab(model)
        self._n_vocab = int(ll.llama_vocab_n_tokens(self._vocab))
        self._template = ChatTemplate.from_model(model)

    def _create_context(self) -> None:
        import llama_cpp as ll

        p = self.plan.params
        ctx = ll.llama_init_from_model(self._model, context_params(ll, p))
        if not ctx:
            raise LoadFailed(
                "llama.cpp could not create the context: not enough memory for "
                f"{p.n_ctx} tokens of KV cache — try a smaller context."
            )
        self._ctx = ctx
        self._mem = ll.llama_get_memory(ctx)
        self.n_ctx = ll.llama_n_ctx(ctx)
        self.n_seq = ll.llama_n_seq_max(ctx)
        self.n_batch = min(ll.llama_n_batch(ctx), p.n_batch)
        self.n_ctx_seq = cells_per_sequence(self.n_ctx, self.n_seq, p.kv_unified)
        self._batch = NativeBatch(self.n_batch)
        self._pool = SequencePool(self.n_seq)

    def _load_projector(self) -> None:
        projector = self.plan.request.projector
        if projector is None:
            return

        def on_progress(fraction: float) -> bool:
            self.phase_progress.emit(LoadPhase.PROJECTOR, float(fraction))
            return not self._cancel_load.is_set()

        self._projector = ProjectorRuntime.load(
            projector.path,
            self._model,
            self.plan.params.n_threads,
            self.plan.params.projector_use_gpu,
            on_progress,
            model_info=self.plan.model,
        )
        self.has_vision = self._projector.supports_vision

    def _load_draft(self) -> None:
        spec = self.speculation
        if spec.mode is not SpeculationMode.DRAFT_MODEL or spec.draft_path is None:
            return

        def on_progress(fraction: float) -> bool:
            self.phase_progress.emit(LoadPhase.DRAFT, float(fraction))
            return not self._cancel_load.is_set()

        self._draft = DraftModel.load(
            spec.draft_path, self.plan.params, target=self.plan.model, progress=on_progress, p_min=spec.p_min
        )

    def _warm_up(self) -> None:
        import llama_cpp as ll

        assert self._batch is not None
        bos = ll.llama_vocab_bos(self._vocab)
        token = bos if bos >= 0 else 0
        self._batch.clear()
        self._batch.add_run(0, 0, [token], range(0, 1))
        rc = ll.llama_decode(self._ctx, self._batch.native())
        ll.llama_synchronize(self._ctx)
        ll.llama_memory_clear(self._mem, True)
        if rc != 0:
            raise LoadFailed(f"The model loaded but could not evaluate a token (llama_decode returned {rc}).")
        if self.speculation.enabled and self.speculation.adaptive:
            self._cost_model = self._measure_draft_costs(token)

    def _measure_draft_costs(self, token: int) -> DraftCostModel:
        """Time decodes of 1..max_draft+1 rows on this machine: whether a draft pays
        depends on what an extra row of logits costs here."""
        import llama_cpp as ll

        assert self._batch is not None
        spec = self.speculation
        top = min(spec.max_draft + 1, self.n_batch, self.n_ctx_seq)
        timings: dict[int, float] = {}
        for rows in sorted({1, 2, 3, 5, 9, top} - {r for r in (2, 3, 5, 9) if r > top}):
            best = float("inf")
            for _ in range(3):
                self._batch.clear()
                self._batch.add_run(0, 0, [token] * rows, range(rows))
                start = time.perf_counter()
                rc = ll.llama_decode(self._ctx, self._batch.native())
                ll.llama_synchronize(self._ctx)
                best = min(best, time.perf_counter() - start)
                ll.llama_memory_clear(self._mem, True)
                if rc != 0:
                    break
            timings[rows] = best
        draft = self.plan.request.draft
        draft_cost = 0.0
        if spec.mode is SpeculationMode.DRAFT_MODEL and draft is not None and self.plan.model.parameter_count:
            draft_cost = draft.parameter_count / self.plan.model.parameter_count
        return DraftCostModel.measured(timings, spec.max_draft, draft_cost)

    def _free_native(self) -> None:
        import llama_cpp as ll

        for active in self._active.values():
            free_chain(active.chain)
            active.chain = None
        if self._projector is not None:
            self._projector.free()
            self._projector = None
            self.has_vision = False
        if self._draft is not None:
            self._draft.free()
            self._draft = None
        if self._ctx:
            ll.llama_free(self._ctx)
        if self._model:
            ll.llama_model_free(self._model)
        self._ctx = self._model = self._mem = self._vocab = None
        self._prompts = None
        self._batch = None
        self._progress_cb = None
        release_freed_memory()

    # -- serving -------------------------------------------------------------------

    def _serve(self) -> None:
        while True:
            busy = bool(self._active or self._waiting)
            if not self._drain_commands(block=not busy):
                return
            self._reap_cancelled()
            self._admit()
            self._sample_ready()
            self._flush_due(time.perf_counter())
            self._run_batch()

    def _drain_commands(self, block: bool) -> bool:
        """Apply every queued command; False once unloading was asked for."""
        while True:
            try:
                command = self._commands.get(timeout=IDLE_WAIT) if block else self._commands.get_nowait()
            except queue.Empty:
                return True
            block = False
            if isinstance(command, _Submit):
                self._waiting.append(_Waiting(command.handle, time.perf_counter()))
                command.handle._publish(Queued(len(self._waiting)))
            elif isinstance(command, _Cancel):
                self._mark_cancelled(command.request_id)
            elif isinstance(command, _Observe):
                if command.future.set_running_or_notify_cancel():
                    command.future.set_result(self._compute_stats())
            elif isinstance(command, _Unload):
                return False

    def _mark_cancelled(self, request_id: int) -> None:
        for waiting in self._waiting:
            if waiting.handle.request_id == request_id:
                waiting.cancelled = True
        for active in self._active.values():
            if active.handle.request_id == request_id:
                active.cancelled = True

    def _reap_cancelled(self) -> None:
        if any(w.cancelled for w in self._waiting):
            keep: collections.deque[_Waiting] = collections.deque()
            for waiting in self._waiting:
                if waiting.cancelled:
                    self._end_waiting(waiting, None)
                else:
                    keep.append(waiting)
            self._waiting = keep
        for active in [a for a in self._active.values() if a.cancelled]:
            self._finish(active, StopReason.CANCELLED)

    def _end_waiting(self, waiting: _Waiting, error: EngineError | None) -> None:
        """A request that never got a sequence: cancelled (error None) or refused."""
        self._release_slot()
        if error is not None:
            waiting.handle._publish(Failed(error))
            return
        now = time.perf_counter()
        usage = Usage(0, 0, 0)
        timings = Timings(now - waiting.t_submit, 0.0, 0.0, 0.0, 0.0, 0.0)
        waiting.handle._publish(Completed(Completion("", StopReason.CANCELLED, usage, timings)))

    def _release_slot(self) -> None:
        with self._outstanding_lock:
            self._outstanding -= 1

    # -- admission -----------------------------------------------------------------

    def _admit(self) -> None:
        import llama_cpp as ll

        assert self._pool is not None
        while self._waiting and self._pool.available:
            waiting = self._waiting.popleft()
            request = waiting.handle.request
            media: tuple[TokenizedPrompt, ...] = ()
            try:
                try:
                    assert self._prompts is not None
                    layout, stops, media = self._prompts.build(request)
                except EngineError:
                    raise
                except Exception as exc:  # a bug must cost one request, not the engine
                    log.exception("could not prepare request %d", request.request_id)
                    raise EngineError(f"This request could not be prepared: {exc}") from exc
                if layout.native_positions > self.n_ctx_seq:
                    if layout.media_count:
                        check_fits(layout, self.n_ctx_seq)
                    raise PromptTooLong(
                        f"The prompt is {layout.logical_tokens:,} tokens; this model was loaded with "
                        f"{self.n_ctx_seq:,} per conversation."
                    )
            except EngineError as exc:
                self._release_media(media)
                self._end_waiting(waiting, exc)
                continue
            acquisition = self._pool.acquire_matching(layout) if request.cache else self._pool.acquire_lru()
            assert acquisition is not None
            seq = acquisition.sequence_id
            if not ll.llama_memory_seq_rm(self._mem, seq, acquisition.truncate_from, -1):
                # Recurrent/hybrid memory cannot drop a tail: start this sequence over.
                acquisition = acquisition.with_cached(ZERO_BOUNDARY)
                if not ll.llama_memory_seq_rm(self._mem, seq, -1, -1):
                    self._pool.quarantine(seq)
                    self._release_media(media)
                    self._end_waiting(waiting, DecodeFailed("A cache slot could not be cleared; try again."))
                    continue
            cached = acquisition.cached
            if cached.logical_tokens:
                self._hits += 1
                self._reused += cached.logical_tokens
            else:
                self._misses += 1
            now = time.perf_counter()
            prompt_ids = (
                None if layout.media_count else tuple(layout.segments[0].tokens) if layout.segments else ()
            )
            spec = self.speculation
            speculate = spec.enabled if request.speculate is None else (request.speculate and spec.enabled)
            lookup = None
            if speculate and spec.mode is SpeculationMode.PROMPT_LOOKUP:
                lookup = LookupIndex(spec.ngram_min, spec.ngram_max, _text_tokens(layout))
            elif speculate and (self._draft is None or prompt_ids is None):
                speculate = False  # a draft model cannot follow image prompts
            active = ActiveRequest(
                handle=waiting.handle,
                progress=SequenceProgress.admit(seq, layout, cached),
                chain=build_chain(self._vocab, request.sampling),
                stream=TextStream(stops),
                prompt_tokens=layout.logical_tokens,
                cached_tokens=cached.logical_tokens,
                t_submit=waiting.t_submit,
                t_admit=now,
                t_last_flush=now,
                media=media,
                prompt_ids=prompt_ids,
                speculate=speculate,
                lookup=lookup,
            )
            self._active[seq] = active
            self._publish_prefill(active, now, force=True)

    def _release_media(self, media: tuple[TokenizedPrompt, ...]) -> None:
        if self._prompts is not None:
            self._prompts.release(media)

    # -- sampling ------------------------------------------------------------------

    def _sample_ready(self) -> None:
        import llama_cpp as ll

        if not self._logit_rows:
            return
        rows, self._logit_rows = self._logit_rows, {}
        now = time.perf_counter()
        pending: dict[int, tuple[ActiveRequest, tuple[int, ...]]] = {}
        for seq, logit_rows in rows.items():
            active = self._active.get(seq)
            if active is None or active.cancelled:
                continue
            if not active.tokens and not active.t_prefill_done:
                active.t_prefill_done = now
                self._publish_prefill(active, now, force=True)
            drafts, active.in_flight = active.in_flight, ()
            if drafts:

                def sample(row: int, _rows: range = logit_rows, _chain: Any = active.chain) -> int:
                    return int(ll.llama_sampler_sample(_chain, self._ctx, _rows[row]))

                run = verify_rows(drafts, sample)
                tokens = run.tokens
                rejected = run.rejected(len(drafts))
                if rejected:
                    position = active.progress.discard_rejected(rejected)
                    ll.llama_memory_seq_rm(self._mem, seq, position, -1)
                active.drafted += len(drafts)
                active.accepted += run.accepted
                active.accept_p = update_acceptance(active.accept_p, len(drafts), run.accepted)
                active.draft_cap = next_draft_cap(
                    active.draft_cap, len(drafts), run.accepted, self.speculation.max_draft
                )
                self._drafted += len(drafts)
                self._accepted += run.accepted
            else:
                # The common case, once per token: no closure, one native call.
                tokens = (int(ll.llama_sampler_sample(active.chain, self._ctx, logit_rows[-1])),)
            if self._emit_tokens(active, tokens):
                pending[seq] = (active, tokens)
        if pending:
            self._push_with_drafts(pending)

    def _emit_tokens(self, active: ActiveRequest, tokens: tuple[int, ...]) -> bool:
        """Emit sampled tokens in order, ending the request at the first stop condition
        (so an accepted run never emits past the end). True while it goes on."""
        import llama_cpp as ll

        for token in tokens:
            if not active.tokens and not active.t_first_token:
                active.t_first_token = time.perf_counter()
                active.handle._publish(Started())
            if ll.llama_vocab_is_eog(self._vocab, token) and not active.request.ignore_eos:
                self._finish(active, StopReason.STOP_TOKEN)
                return False
            active.tokens.append(token)
            chunk = active.stream.push(token_to_piece(self._vocab, token, False))
            if chunk.text:
                active.pending_text.append(chunk.text)
            if chunk.stopped:
                self._finish(active, StopReason.STOP_STRING)
                return False
            if len(active.tokens) >= active.request.max_tokens:
                self._finish(active, StopReason.LENGTH)
                return False
        if active.progress.n_past >= self.n_ctx_seq:
            self._finish(active, StopReason.CONTEXT_FULL)
            return False
        return True

    def _push_with_drafts(self, pending: dict[int, tuple[ActiveRequest, tuple[int, ...]]]) -> None:
        """Queue each sequence's next token, with drafts after it when it speculates."""
        spec = self.speculation
        wanted: dict[int, DraftRequest] = {}
        drafts: dict[int, tuple[int, ...]] = {}
        for seq, (active, emitted) in pending.items():
            token = emitted[-1]
            if active.lookup is not None:
                active.lookup.extend(emitted)
            limit = 0
            if active.speculate:
                tokens_left = active.request.max_tokens - len(active.tokens)
                limit = draft_limit(spec.max_draft, active.progress.n_past, self.n_ctx_seq, tokens_left)
            if limit > 0 and self._cost_model is not None:
                limit = self._cost_model.choose(active.accept_p, min(limit, active.draft_cap), spec.min_draft)
                if limit == 0:
                    active.accept_p = relax_acceptance(active.accept_p)
            if limit <= 0:
                continue
            if active.lookup is not None:
                drafts[seq] = active.lookup.propose(limit, spec.min_draft)
            elif self._draft is not None and active.prompt_ids is not None:
                history = [*active.prompt_ids, *active.progress.generated]
                wanted[seq] = DraftRequest(history, token, limit)
        if wanted:
            assert self._draft is not None
            drafts.update(self._draft.propose(wanted, spec.min_draft))
        for seq, (active, emitted) in pending.items():
            active.progress.push(emitted[-1], drafts.get(seq, ()))

    def _flush_due(self, now: float) -> None:
        for active in self._active.values():
            if active.pending_text and now - active.t_last_flush >= DELTA_INTERVAL:
                self._flush(active, now)

    def _flush(self, active: ActiveRequest, now: float) -> None:
        text = "".join(active.pending_text)
        active.pending_text.clear()
        active.t_last_flush = now
        if text:
            active.text.append(text)
            active.handle._publish(TextDelta(text))

    def _finish(self, active: ActiveRequest, reason: StopReason) -> None:
        assert self._pool is not None
        tail = active.stream.finish()
        if tail.text and reason is not StopReason.STOP_STRING:
            active.pending_text.append(tail.text)
        now = time.perf_counter()
        self._flush(active, now)
        progress = active.progress
        keep = progress.reusable_prefix() if active.request.cache else None
        self._release_sequence(progress.sequence_id, keep)
        self._last_owner[progress.sequence_id] = self._owner(active)
        del self._active[progress.sequence_id]
        self._logit_rows.pop(progress.sequence_id, None)
        free_chain(active.chain)
        active.chain = None
        self._release_media(active.media)
        self._release_slot()
        self._completed += 1
        completion = active.completion(reason, now, self.model_identity)
        active.handle._publish(Completed(completion))

    def _release_sequence(self, seq: int, prefix: PromptLayout | None) -> None:
        """Back to the pool; with nothing to reuse, its KV cells are freed now rather than
        at its next use (a cache=False reply would otherwise keep them, "empty" in stats)."""
        import llama_cpp as ll

        assert self._pool is not None
        if prefix is None:
            ll.llama_memory_seq_rm(self._mem, seq, -1, -1)
        self._pool.release(seq, prefix)

    def _fail(self, active: ActiveRequest, error: EngineError) -> None:
        assert self._pool is not None
        self._release_sequence(active.sequence_id, None)
        del self._active[active.sequence_id]
        self._logit_rows.pop(active.sequence_id, None)
        free_chain(active.chain)
        active.chain = None
        self._release_media(active.media)
        self._release_slot()
        active.handle._publish(Failed(error))

    def _fail_everything(self, error: EngineError) -> None:
        for active in list(self._active.values()):
            self._fail(active, error)
        while self._waiting:
            self._end_waiting(self._waiting.popleft(), error)
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                break
            if isinstance(command, _Submit):
                self._release_slot()
                command.handle._publish(Failed(error))
            elif isinstance(command, _Observe) and command.future.set_running_or_notify_cancel():
                command.future.set_exception(error)

    # -- batches -------------------------------------------------------------------

    def _run_batch(self) -> None:
        t0 = time.perf_counter()
        candidates = [c for a in self._active.values() if (c := a.progress.candidate()) is not None]
        while self._suspects and self._suspects[0] not in self._active:
            self._suspects.popleft()
        if self._suspects:  # after a failed batch: one suspect alone until each has passed
            alone = self._suspects.popleft()
            candidates = [c for c in candidates if c.sequence_id == alone]
        if not candidates:
            return
        plan = self._planner.plan(candidates, self.n_batch)
        progress = {seq: a.progress for seq, a in self._active.items()}
        if plan.media is not None:
            # Its own step, before the token batch: an image evaluation leaves no logits
            # behind, so it must not run between a decode and the sampling of its rows.
            self._evaluate_media(plan.media, progress)
        if not plan.work:
            return
        commit = BatchCommit.stage(plan.work, progress)
        t1 = time.perf_counter()
        batch = self._batch
        assert batch is not None
        batch.clear()
        for entry in commit.entries:
            batch.add_run(entry.sequence_id, entry.position, entry.tokens, entry.logit_rows)
        rc = self._decode(batch)
        t2 = time.perf_counter()
        self._ticks += 1
        if rc != 0:
            commit.discard()
            self._decode_failed(rc, commit.entries)
            return
        self._logit_rows = commit.apply(progress)
        for entry in commit.entries:
            if entry.kind is WorkKind.DECODE and entry.n_rows > 1:
                self._active[entry.sequence_id].in_flight = entry.tokens[1:]
        now = time.perf_counter()
        self._scheduler_seconds += (t1 - t0) + (now - t2)
        self._last_fill = commit.n_rows / self.n_batch
        self._rates.append((now, plan.decode_rows, plan.prefill_rows))
        while self._rates and now - self._rates[0][0] > RATE_WINDOW:
            self._rates.popleft()
        for entry in commit.entries:
            if entry.kind is WorkKind.PREFILL:
                self._publish_prefill(self._active[entry.sequence_id], now)

    def _evaluate_media(self, work: Any, progress: dict[int, SequenceProgress]) -> None:
        import llama_cpp as ll

        active = self._active[work.sequence_id]
        commit = BatchCommit.stage_media(work, progress)
        entry = commit.entries[0]
        assert entry.media is not None and self._projector is not None
        try:
            new_n_past = self._projector.eval_media(
                self._ctx, entry.media.identity, entry.position, entry.sequence_id, self.n_batch
            )
        except (ImageEvalFailed, ImageRejected) as exc:
            commit.discard()
            # Part of the image may be in the KV cache: drop it with the request.
            ll.llama_memory_seq_rm(self._mem, entry.sequence_id, entry.position, -1)
            self._fail(active, exc)
            return
        if new_n_past != entry.position + entry.media.native_positions:
            log.warning(
                "image advanced %d positions, expected %d",
                new_n_past - entry.position,
                entry.media.native_positions,
            )
        commit.apply(progress)
        self._ticks += 1
        self._publish_prefill(active, time.perf_counter(), force=True)

    def _decode(self, batch: NativeBatch) -> int:
        import llama_cpp as ll

        return int(ll.llama_decode(self._ctx, batch.native()))

    def _decode_failed(self, rc: int, entries: tuple[StagedWork, ...]) -> None:
        """Undo the batch, then find whose work failed it without failing the others.

        Each sequence's cells from this batch are removed (its progress never moved), so
        the KV cache is as before the batch and every cached prefix survives. A batch of
        one fails that request; a batch of several is retried one sequence per tick, and
        only a sequence that fails alone is failed.
        """
        import llama_cpp as ll

        log.warning("llama_decode returned %d for %d sequence(s)", rc, len(entries))
        for entry in entries:
            ll.llama_memory_seq_rm(self._mem, entry.sequence_id, entry.position, -1)
        if self._draft is not None:
            self._draft.clear()
        if len(entries) > 1:
            self._suspects.extend(e.sequence_id for e in entries if e.sequence_id not in self._suspects)
            return
        seq = entries[0].sequence_id
        active = self._active.get(seq)
        if active is not None:
            self._fail(
                active,
                DecodeFailed(f"The model failed to evaluate this request (llama_decode returned {rc})."),
            )

    # -- events and stats ------------------------------------------------------------

    def _publish_prefill(self, active: ActiveRequest, now: float, force: bool = False) -> None:
        progress = active.progress
        done = progress.cursor.logical_tokens
        total = progress.prompt.logical_tokens
        if not force and done < total and now - active.t_last_prefill_event < PREFILL_EVENT_INTERVAL:
            return
        active.t_last_prefill_event = now
        images_total = progress.prompt.media_count
        images_done = progress.prompt.truncate(progress.cursor).media_count if images_total else 0
        active.handle._publish(Prefill(done, total, active.cached_tokens, images_done, images_total))

    @staticmethod
    def _owner(active: ActiveRequest) -> str:
        return active.request.owner or f"request {active.handle.request_id}"

    def _compute_stats(self) -> EngineStats:
        import llama_cpp as ll

        sequences: list[SequenceStats] = []
        if self._pool is not None and self._mem:
            for info in self._pool.snapshot():
                seq = info.sequence_id
                cells = int(ll.llama_memory_seq_pos_max(self._mem, seq)) + 1
                active = self._active.get(seq)
                reused = info.reusable_tokens
                if active is not None:
                    state, owner = SlotState.ACTIVE, self._owner(active)
                    reused = active.cached_tokens  # what this request took from the cache
                elif info.state is SequenceState.QUARANTINED:
                    state, owner = SlotState.QUARANTINED, ""
                elif info.reusable_tokens:
                    # Whose conversation the cached prefix is: its next turn will reuse it.
                    state, owner = SlotState.REUSABLE, self._last_owner.get(seq, "")
                else:
                    state, owner = SlotState.EMPTY, ""
                sequences.append(SequenceStats(seq, state, owner, max(cells, 0), reused))
        span = (self._rates[-1][0] - self._rates[0][0]) if len(self._rates) > 1 else 0.0
        decode = sum(r[1] for r in self._rates) / span if span > 0 else 0.0
        prefill = sum(r[2] for r in self._rates) / span if span > 0 else 0.0
        return EngineStats(
            sequences=tuple(sequences),
            n_ctx=self.n_ctx,
            n_ctx_per_sequence=self.n_ctx_seq,
            queue_depth=len(self._waiting),
            active_requests=len(self._active),
            prefix_hits=self._hits,
            prefix_misses=self._misses,
            tokens_reused=self._reused,
            decode_tokens_per_second=decode,
            prefill_tokens_per_second=prefill,
            batch_fill=self._last_fill,
            ticks=self._ticks,
            completed_requests=self._completed,
            scheduler_tick_us=1e6 * self._scheduler_seconds / self._ticks if self._ticks else 0.0,
            drafted_tokens=self._drafted,
            accepted_tokens=self._accepted,
        )


def _text_tokens(layout: PromptLayout) -> list[int]:
    return [t for segment in layout.segments if isinstance(segment, TextSegment) for t in segment.tokens]
