"""The executor QThread: owns every native llama.cpp handle of one loaded model.

It loads the model (``engine.runtime.loader``), then runs the serving loop, one tick at a
time: drain commands → admit waiting requests into sequences (reusing cached prefixes) →
sample the rows the last batch left → emit text → plan a batch (``engine.scheduler``) →
stage → one ``llama_decode`` → apply. Other threads only enqueue commands
(``engine.runtime.commands``); results leave as events on each request's handle.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

from PySide6.QtCore import QThread, Signal

from engine.base.errors import Cancelled, EngineError, LoadFailed
from engine.catalog import model_identity
from engine.chat import TextStream
from engine.chat.traits import ChatTraits
from engine.machine.cpu_load import (
    CpuReading,
    contention,
    logical_cpus,
    physical_cores,
    read_cpu,
    share_between,
)
from engine.native.abort import DecodeAbort
from engine.native.backend import require_backend
from engine.native.batch import NativeBatch
from engine.native.llama_log import LogLevel, ReportedMemory, capture_llama_logs, parse_buffer_sizes
from engine.requests.completion import Completion, StopReason, Timings, Usage
from engine.requests.events import Completed, DecodeFailed, Failed, Queued
from engine.requests.handle import RequestHandle
from engine.requests.request import ChatRequest
from engine.requests.stats import EngineStats
from engine.runtime.active_request import ActiveRequest
from engine.runtime.batch_step import BatchStep, StepHooks
from engine.runtime.commands import Cancel, Inbox, Measure, Observe, Submit, Unload, Waiting
from engine.runtime.loader import LoadHooks, ModelLoader, load_error
from engine.runtime.native_model import NativeModel
from engine.runtime.serving_stats import ActiveSlot, ServingCounters
from engine.runtime.shared_cells import SharedCells
from engine.runtime.speculator import Speculator
from engine.runtime.surface import ExecutorState, LoadOrder, ReadyWait
from engine.scheduler import (
    ZERO_BOUNDARY,
    PromptLayout,
    SequencePool,
    SequenceProgress,
)

log = logging.getLogger("hearth.executor")

IDLE_WAIT = 0.5  # seconds a blocked executor waits for a command before re-checking


class Executor(QThread, ReadyWait):
    """One per loaded model, in this process (an ``ExecutorLike``). Construct, connect signals,
    ``start()``."""

    phase_started = Signal(object)  # LoadPhase
    phase_progress = Signal(object, float)  # LoadPhase, 0..1
    phase_finished = Signal(object, float)  # LoadPhase, seconds
    ready = Signal()
    load_failed = Signal(object)  # EngineError
    unloaded = Signal()
    # Never emitted here: a model with RPC workers runs in a child process, whose parent
    # (engine.model_process.process) emits it; declared to be ExecutorLike (SIGNALS).
    worker_lost = Signal(object)
    lost_worker = False  # likewise: only a model in a child process loses a worker

    def __init__(self, order: LoadOrder) -> None:
        super().__init__()
        self.plan = plan = order.plan
        self.setObjectName(f"hearth-executor-{plan.model.path.stem}")
        self.model_identity = model_identity(plan.model)  # stamped on every Completion's tokens
        self.force = order.force
        self.queue_capacity = order.queue_capacity
        self.speculation = order.resolved_speculation()
        self.state = ExecutorState.LOADING
        self.load_error: EngineError | None = None
        self.reported_memory: ReportedMemory | None = None  # what llama.cpp said it allocated
        self.chat_traits: ChatTraits | None = None  # set once loaded
        self._inbox = Inbox()
        self._cancel_load = threading.Event()
        self._ready_event = threading.Event()
        # Executor thread only, from here on.
        self._native: NativeModel | None = None
        self._speculator = Speculator(self.speculation, None, None)
        self._pool: SequencePool | None = None
        self._cells: SharedCells | None = None  # with a shared KV pool: its admission and room
        self._waiting: collections.deque[Waiting] = collections.deque()
        self._active: dict[int, ActiveRequest] = {}  # by sequence id
        self._logit_rows: dict[int, range] = {}  # rows the last batch left to sample, by sequence
        self._counters = ServingCounters()
        # The CPU clocks when each request was admitted (by sequence): at its end, what other
        # programs used meanwhile goes in its Completion (``Completion.cpu``).
        self._cpu_at_admit: dict[int, CpuReading] = {}
        self._cores, self._cpus = physical_cores(), logical_cpus()
        # Stop aborts the batch computing a cancelled request rather than wait for it (the
        # step knows the request ids in the running token batch; ``cancel`` reads them).
        self._abort = DecodeAbort()
        hooks = StepHooks(lambda batch: self._decode(batch), self._fail, self._publish_prefill)
        self._step = BatchStep(self._counters, self._abort, hooks)
        self.n_ctx = self.n_ctx_seq = self.n_batch = self.n_seq = 0

    @property
    def has_vision(self) -> bool:
        return self._native is not None and self._native.has_vision

    # ------------------------------------------------------------------ any thread

    def cancel_load(self) -> None:
        self._cancel_load.set()

    def submit(
        self, request: ChatRequest, connect: Callable[[RequestHandle], None] | None = None
    ) -> RequestHandle:
        """Queue a request; raises Overloaded when the queue is full, never blocks.

        ``connect(handle)`` runs before the executor can see the request: connect the
        handle's signals there, or a fast request may finish before anyone listens.
        """
        request.validate()
        if self.state in (ExecutorState.FAILED, ExecutorState.UNLOADED):
            raise LoadFailed("No model is loaded.")
        self._inbox.reserve(self.queue_capacity + max(self.n_seq, self.plan.params.n_seq_max))
        handle = RequestHandle(request, canceller=self.cancel)
        if connect is not None:
            try:
                connect(handle)
            except BaseException:
                self._inbox.release()
                raise
        self._inbox.put(Submit(request, handle))
        return handle

    def cancel(self, request_id: int) -> None:
        self._inbox.put(Cancel(request_id))
        if request_id in self._step.in_decode:
            self._abort.request()

    def request_stats(self) -> Future:
        future: Future = Future()
        self._inbox.put(Observe(future))
        return future

    def stats(self, timeout: float = 5.0) -> EngineStats:
        """Observed through the command queue: answered between two batches."""
        return self.request_stats().result(timeout)

    def measure(self, request: ChatRequest) -> Future:
        """A future ``PromptSize`` for ``request``, answered between two batches; the
        request is rendered and tokenized as it would be sent, and not run."""
        future: Future = Future()
        self._inbox.put(Measure(request, future))
        return future

    def request_unload(self) -> None:
        self._cancel_load.set()
        self._inbox.put(Unload())
        if self._step.in_decode:
            self._abort.request()

    # ------------------------------------------------------------------ executor thread

    def run(self) -> None:
        native_log: list = []
        try:
            require_backend()
            with capture_llama_logs(LogLevel.INFO, this_thread_only=True) as native_log:
                self._load()
            self.reported_memory = parse_buffer_sizes(native_log)
        except BaseException as exc:
            error = load_error(exc, native_log)
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

    def _load(self) -> None:
        hooks = LoadHooks(
            started=self.phase_started.emit,
            progress=self.phase_progress.emit,
            finished=self.phase_finished.emit,
            cancelled=self._cancel_load.is_set,
        )
        loader = ModelLoader(
            self.plan, self.speculation, hooks, model_identity=self.model_identity, force=self.force
        )
        native = self._native = loader.load()
        self.n_ctx, self.n_seq, self.n_batch = native.n_ctx, native.n_seq, native.n_batch
        self.n_ctx_seq = native.n_ctx_seq
        self.chat_traits = native.traits
        self._pool = SequencePool(native.n_seq)
        self._cells = SharedCells(native, self._pool) if native.shared_pool else None
        self._speculator = Speculator(self.speculation, native.draft, native.draft_costs)
        self._abort.install(native.ll, native.ctx)

    def _free_native(self) -> None:
        for active in self._active.values():
            if active.sampler is not None:
                active.sampler.free()
                active.sampler = None
        self._abort.uninstall()
        if self._native is not None:
            self._native.free()
            self._native = None

    # -- the loop ------------------------------------------------------------------

    def _serve(self) -> None:
        while True:
            if not self._drain_commands(block=not (self._active or self._waiting)):
                return
            self._reap_cancelled()
            self._admit()
            self._sample_ready()
            self._emit_text(time.perf_counter())
            self._run_batch()

    def _drain_commands(self, block: bool) -> bool:
        """Apply every queued command; False once unloading was asked for."""
        while (command := self._inbox.get(IDLE_WAIT if block else 0)) is not None:
            block = False
            # Every command put here was made by this executor's own methods: a Submit has
            # its handle, an Observe or Measure its future (a child process's come tokened).
            if isinstance(command, Submit):
                assert command.handle is not None
                self._waiting.append(Waiting(command.handle, time.perf_counter()))
                command.handle._publish(Queued(len(self._waiting)))
            elif isinstance(command, Cancel):
                for item in (*self._waiting, *self._active.values()):
                    if item.handle.request_id == command.request_id:
                        item.cancelled = True
            elif isinstance(command, Observe):
                assert command.future is not None
                if command.future.set_running_or_notify_cancel():
                    command.future.set_result(self._stats())
            elif isinstance(command, Measure):
                assert command.future is not None
                if command.future.set_running_or_notify_cancel():
                    self._measure(command.request, command.future)
            elif isinstance(command, Unload):
                return False
        return True

    def _reap_cancelled(self) -> None:
        for waiting in [w for w in self._waiting if w.cancelled]:
            self._waiting.remove(waiting)
            self._end_waiting(waiting, None)
        for active in [a for a in self._active.values() if a.cancelled]:
            self._finish(active, StopReason.CANCELLED)

    def _admit(self) -> None:
        native, pool = self._native, self._pool
        assert native is not None and native.prompts is not None and pool is not None
        assert native.samplers is not None
        while self._waiting and pool.available:
            waiting = self._waiting.popleft()
            request = waiting.handle.request
            try:
                layout, stops, media = native.prompts.prepare(request, self.n_ctx_seq)
            except EngineError as exc:
                self._end_waiting(waiting, exc)
                continue
            if self._cells is not None and not self._cells.admits(self._active, layout.end.native_position):
                native.prompts.release(media)
                self._waiting.appendleft(waiting)  # waits, first in line, for cells to free
                return
            try:
                sampler = native.samplers.sampler(request.sampling)
            except EngineError as exc:
                native.prompts.release(media)
                self._end_waiting(waiting, exc)
                continue
            try:
                sampler.observe_text(request.assistant_prefix)
            except EngineError as exc:
                sampler.free()
                native.prompts.release(media)
                self._end_waiting(waiting, exc)
                continue
            acquisition = pool.acquire_matching(layout) if request.cache else pool.acquire_lru()
            assert acquisition is not None
            seq = acquisition.sequence_id
            if not native.forget(seq, acquisition.truncate_from):
                # Recurrent/hybrid memory cannot drop a tail: start this sequence over.
                acquisition = acquisition.with_cached(ZERO_BOUNDARY)
                if not native.forget(seq):
                    pool.quarantine(seq)
                    sampler.free()
                    native.prompts.release(media)
                    self._end_waiting(waiting, DecodeFailed("A cache slot could not be cleared; try again."))
                    continue
            cached = acquisition.cached
            self._counters.admitted(cached.logical_tokens)
            now = time.perf_counter()
            active = ActiveRequest(
                handle=waiting.handle,
                progress=SequenceProgress.admit(seq, layout, cached),
                sampler=sampler,
                stream=TextStream(stops),
                prompt_tokens=layout.logical_tokens,
                cached_tokens=cached.logical_tokens,
                t_submit=waiting.t_submit,
                t_admit=now,
                t_last_flush=now,
                media=media,
                speculation=self._speculator.admit(request, layout),
            )
            self._active[seq] = active
            self._cpu_at_admit[seq] = read_cpu()
            self._publish_prefill(active, now, force=True)

    def _sample_ready(self) -> None:
        if not self._logit_rows:
            return
        native = self._native
        assert native is not None
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
            state = active.speculation
            sampler = active.sampler
            assert sampler is not None
            try:
                if state is not None and state.in_flight:

                    def sample(row: int, _rows: range = logit_rows, _sample: Any = sampler.sample) -> int:
                        return _sample(_rows[row])

                    tokens, rejected = self._speculator.verify(state, sample)
                    if rejected:
                        native.forget(seq, active.progress.discard_rejected(rejected))
                else:
                    # The common case, once per token: no closure, one native call.
                    tokens = (sampler.sample(logit_rows[-1]),)
            except EngineError as exc:  # a grammar with no way on: this request ends
                self._fail(active, exc)
                continue
            stop = active.take_tokens(
                tokens, native.is_end, native.piece, self.n_ctx_seq, sampler.take_logprobs()
            )
            if stop is None:
                pending[seq] = (active, tokens)
            else:
                self._finish(active, stop)
        if pending:
            drafts = self._speculator.propose(pending, self.n_ctx_seq)
            for seq, (active, emitted) in pending.items():
                proposed = drafts.get(seq, ())
                if proposed and active.sampler is not None and active.sampler.grammar is not None:
                    proposed = active.sampler.cut_drafts(proposed)
                active.progress.push(emitted[-1], proposed)

    def _emit_text(self, now: float) -> None:
        for active in self._active.values():
            if (delta := active.text_due(now)) is not None:
                active.handle._publish(delta)

    def _run_batch(self) -> None:
        assert self._native is not None
        capacity, outgrown = self._cells.make_room(self._active, self.n_batch) if self._cells else (None, [])
        for active, error in outgrown:
            self._fail(active, error)
        rows = self._step.run(self._native, self._active, self._speculator, self.n_batch, capacity)
        if rows is not None:
            self._logit_rows = rows

    def _decode(self, batch: NativeBatch) -> int:
        assert self._native is not None
        return self._native.decode(batch)

    # -- ending requests -----------------------------------------------------------

    def _finish(self, active: ActiveRequest, reason: StopReason) -> None:
        tail = active.stream.finish()
        if tail.text and reason is not StopReason.STOP_STRING:
            active.pending_text.append(tail.text)
        now = time.perf_counter()
        if (delta := active.text_due(now, force=True)) is not None:
            active.handle._publish(delta)
        keep = active.progress.reusable_prefix() if active.request.cache else None
        admitted = self._cpu_at_admit.get(active.sequence_id)
        self._end_active(active, keep)
        self._counters.finished(active.sequence_id, active.owner)
        completion = active.completion(reason, now, self.model_identity)
        if admitted is not None:
            share = share_between(admitted, read_cpu(), self._cpus)
            cpu = contention(share, self._cores, self.plan.params.n_threads)
            completion = replace(completion, cpu=cpu) if cpu is not None else completion
        active.handle._publish(Completed(completion))

    def _fail(self, active: ActiveRequest, error: EngineError) -> None:
        self._end_active(active, None)
        active.handle._publish(Failed(error))

    def _end_active(self, active: ActiveRequest, keep: PromptLayout | None) -> None:
        """Give the request's sequence back to the pool, keeping ``keep`` cached; with
        nothing to keep its cells are freed now, not at the sequence's next use."""
        assert self._pool is not None and self._native is not None
        seq = active.sequence_id
        if keep is None:
            self._native.forget(seq)
        self._pool.release(seq, keep)
        del self._active[seq]
        self._cpu_at_admit.pop(seq, None)
        self._logit_rows.pop(seq, None)
        if active.sampler is not None:
            active.sampler.free()
            active.sampler = None
        if self._native.prompts is not None:
            self._native.prompts.release(active.media)
        self._inbox.release()

    def _end_waiting(self, waiting: Waiting, error: EngineError | None) -> None:
        """A request that never got a sequence: cancelled (error None) or refused."""
        self._inbox.release()
        if error is not None:
            waiting.handle._publish(Failed(error))
            return
        timings = Timings(time.perf_counter() - waiting.t_submit, 0.0, 0.0, 0.0, 0.0, 0.0)
        waiting.handle._publish(Completed(Completion("", StopReason.CANCELLED, Usage(0, 0, 0), timings)))

    def _fail_everything(self, error: EngineError) -> None:
        for active in list(self._active.values()):
            self._fail(active, error)
        while self._waiting:
            self._end_waiting(self._waiting.popleft(), error)
        for command in self._inbox.drain():
            if isinstance(command, Submit) and command.handle is not None:
                self._inbox.release()
                command.handle._publish(Failed(error))
            elif (
                isinstance(command, (Observe, Measure))
                and command.future is not None
                and command.future.set_running_or_notify_cancel()
            ):
                command.future.set_exception(error)

    def _measure(self, request: ChatRequest, future: Future) -> None:
        native = self._native
        try:
            if native is None or native.prompts is None:
                raise LoadFailed("No model is loaded.")
            future.set_result(native.prompts.measure(request, self.n_ctx_seq))
        except EngineError as exc:
            future.set_exception(exc)

    # -- events and stats ------------------------------------------------------------

    def _publish_prefill(self, active: ActiveRequest, now: float, force: bool = False) -> None:
        if (event := active.prefill_due(now, force)) is not None:
            active.handle._publish(event)

    def _stats(self) -> EngineStats:
        native, cells, speculator = self._native, self._cells, self._speculator
        slots = {seq: ActiveSlot(a.owner, a.cached_tokens) for seq, a in self._active.items()}
        draft = native.draft if native is not None else None
        return self._counters.snapshot(
            self._pool if native is not None and native.mem else None,
            slots,
            native.cells if native is not None else (lambda _seq: 0),
            now=time.perf_counter(), n_ctx=self.n_ctx, n_ctx_per_sequence=self.n_ctx_seq, n_seq=self.n_seq,
            queue_depth=len(self._waiting), drafted=speculator.drafted, accepted=speculator.accepted,
            shared_pool=cells is not None, evicted=cells.evicted if cells is not None else 0,
            drafting_with=draft.path.name if draft is not None else "",
            draft_note=native.draft_note if native is not None else "",
        )  # fmt: skip
