"""One tick's batch for an executor: plan it (``engine.scheduler``), stage it, one
``llama_decode``, apply it; an image's own evaluation before it; and, after a failed batch,
finding whose work failed it without failing the others.

Executor thread only. The executor keeps the requests; this step reads them and gives back
the logit rows the batch left to sample. ``in_decode`` (the request ids of the running token
batch) is read by other threads, for a cancel to abort the batch rather than wait for it.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from engine.base.errors import EngineError, ImageRejected
from engine.multimodal import ImageEvalFailed
from engine.native.abort import DecodeAbort
from engine.native.batch import NativeBatch
from engine.requests.events import DecodeFailed
from engine.runtime.active_request import ActiveRequest
from engine.runtime.native_model import NativeModel
from engine.runtime.serving_stats import BatchRecord, ServingCounters
from engine.runtime.speculator import Speculator
from engine.scheduler import BatchCommit, BatchPlanner, BatchWork, SequenceProgress, StagedWork, WorkKind

log = logging.getLogger("hearth.executor")

ABORTED = 2  # llama_decode's return when its abort callback said stop


@dataclass(frozen=True)
class StepHooks:
    """What the step asks of its executor."""

    decode: Callable[[NativeBatch], int]  # one llama_decode (tests slow it down or fail it)
    fail: Callable[[ActiveRequest, EngineError], None]  # end a request with an error
    publish_prefill: Callable[..., None]  # (active, now, force=False): a Prefill event when due


class BatchStep:
    """Runs an executor's batches, one a tick."""

    def __init__(self, counters: ServingCounters, abort: DecodeAbort, hooks: StepHooks) -> None:
        self._counters = counters
        self._abort = abort
        self._hooks = hooks
        self._planner = BatchPlanner()
        # Sequences of a batch llama_decode failed: each runs alone until it passes or fails.
        self._suspects: collections.deque[int] = collections.deque()
        self.in_decode: frozenset[int] = frozenset()

    def run(
        self,
        native: NativeModel,
        active: Mapping[int, ActiveRequest],
        speculator: Speculator,
        n_batch: int,
        capacity: int | None = None,
    ) -> dict[int, range] | None:
        """Run one batch of ``active``'s work; the logit rows it left to sample, by sequence,
        or None when no token batch ran (nothing to do, an image only, aborted, failed).
        ``capacity``: rows the token batch may have (a shared pool's free cells), n_batch
        where None."""
        t0 = time.perf_counter()
        candidates = [c for a in active.values() if (c := a.progress.candidate()) is not None]
        while self._suspects and self._suspects[0] not in active:
            self._suspects.popleft()
        if self._suspects:  # after a failed batch: one suspect alone until each has passed
            alone = self._suspects.popleft()
            candidates = [c for c in candidates if c.sequence_id == alone]
        if not candidates:
            return None
        plan = self._planner.plan(candidates, n_batch if capacity is None else capacity, native.n_outputs)
        progress = {seq: a.progress for seq, a in active.items()}
        if plan.media is not None:
            # Its own step, before the token batch: an image evaluation leaves no logits
            # behind, so it must not run between a decode and the sampling of its rows.
            self._evaluate_media(native, active, plan.media, progress, n_batch)
        if not plan.work:
            return None
        commit = BatchCommit.stage(plan.work, progress)
        t1 = time.perf_counter()
        assert native.batch is not None
        batch = native.batch
        batch.clear()
        for entry in commit.entries:
            batch.add_run(entry.sequence_id, entry.position, entry.tokens, entry.logit_rows)
        self.in_decode = frozenset(active[e.sequence_id].handle.request_id for e in commit.entries)
        rc = self._hooks.decode(batch)
        self.in_decode = frozenset()
        aborted = self._abort.requested
        self._abort.clear()
        t2 = time.perf_counter()
        if rc == ABORTED and aborted:
            # Stopped for a cancel: the batch is undone and run again next tick without
            # the cancelled request (read from the inbox first); nobody failed.
            self._counters.ticks += 1
            commit.discard()
            for entry in commit.entries:
                native.forget(entry.sequence_id, entry.position)
            speculator.forget_failed_batch()
            return None
        if rc != 0:
            self._counters.ticks += 1
            commit.discard()
            self._decode_failed(native, active, speculator, rc, commit.entries)
            return None
        logit_rows = commit.apply(progress)
        for entry in commit.entries:
            state = active[entry.sequence_id].speculation
            if entry.kind is WorkKind.DECODE and entry.n_rows > 1 and state is not None:
                state.in_flight = entry.tokens[1:]
        now = time.perf_counter()
        sequences = len({entry.sequence_id for entry in commit.entries})
        self._counters.batch_ran(
            BatchRecord(t0, now, plan.decode_rows, plan.prefill_rows, sequences), (t1 - t0) + (now - t2)
        )
        for entry in commit.entries:
            if entry.kind is WorkKind.PREFILL:
                self._hooks.publish_prefill(active[entry.sequence_id], now)
        return logit_rows

    def _evaluate_media(
        self,
        native: NativeModel,
        active: Mapping[int, ActiveRequest],
        work: BatchWork,
        progress: dict[int, SequenceProgress],
        n_batch: int,
    ) -> None:
        assert native.projector is not None
        request = active[work.sequence_id]
        self._abort.clear()  # a cancel read just after the last batch must not fail this image
        commit = BatchCommit.stage_media(work, progress)
        entry = commit.entries[0]
        assert entry.media is not None
        try:
            new_n_past = native.projector.eval_media(
                native.ctx, entry.media.identity, entry.position, entry.sequence_id, n_batch
            )
        except (ImageEvalFailed, ImageRejected) as exc:
            commit.discard()
            # Part of the image may be in the KV cache: drop it with the request.
            native.forget(entry.sequence_id, entry.position)
            self._hooks.fail(request, exc)
            return
        if new_n_past != entry.position + entry.media.native_positions:
            log.warning(
                "image advanced %d positions, expected %d",
                new_n_past - entry.position,
                entry.media.native_positions,
            )
        commit.apply(progress)
        self._counters.media_ran()
        self._hooks.publish_prefill(request, time.perf_counter(), force=True)

    def _decode_failed(
        self,
        native: NativeModel,
        active: Mapping[int, ActiveRequest],
        speculator: Speculator,
        rc: int,
        entries: tuple[StagedWork, ...],
    ) -> None:
        """Undo the batch, then find whose work failed it without failing the others.

        Each sequence's cells from this batch are removed (its progress never moved), so
        the KV cache is as before the batch and every cached prefix survives. A batch of
        one fails that request; a batch of several is retried one sequence per tick, and
        only a sequence that fails alone is failed.
        """
        log.warning("llama_decode returned %d for %d sequence(s)", rc, len(entries))
        for entry in entries:
            native.forget(entry.sequence_id, entry.position)
        speculator.forget_failed_batch()
        if len(entries) > 1:
            self._suspects.extend(e.sequence_id for e in entries if e.sequence_id not in self._suspects)
            return
        request = active.get(entries[0].sequence_id)
        if request is not None:
            error = DecodeFailed(f"The model failed to evaluate this request (llama_decode returned {rc}).")
            self._hooks.fail(request, error)
