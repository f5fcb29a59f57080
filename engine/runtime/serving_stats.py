"""What an executor counts while it serves, and the ``EngineStats`` snapshot built from it.

Counters are updated on the executor thread as requests are admitted and batches run;
``snapshot`` is answered there too, between two batches, so it needs no lock.

The recent rates and the batch fill describe the batches that *finished* in the last
``RATE_WINDOW`` seconds before the snapshot, so they fall to zero that long after the
last batch, instead of holding the last busy value while the engine sits idle.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from engine.requests.stats import EngineStats, SequenceStats, SlotState
from engine.scheduler import SequencePool, SequenceState

RATE_WINDOW = 2.0  # seconds of batches behind the recent tokens/s and the batch fill


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """One ``llama_decode`` that succeeded, as the recent rates count it."""

    started: float  # when the executor began planning it (perf_counter seconds)
    finished: float  # when its results were committed
    decode_rows: int  # one per generating sequence, plus its drafted tokens under speculation
    prefill_rows: int  # prompt tokens evaluated
    sequences: int  # sequences with at least one row in it


@dataclass(frozen=True)
class ActiveSlot:
    """What the stats need of a sequence serving a request."""

    owner: str
    reused_tokens: int  # what this request took from the cache


@dataclass
class ServingCounters:
    hits: int = 0
    misses: int = 0
    reused: int = 0
    ticks: int = 0
    completed: int = 0
    scheduler_seconds: float = 0.0
    # The batches that finished in the last RATE_WINDOW seconds, oldest first, and their
    # sums: a snapshot costs the same whether a thousand batches ran or one.
    recent: collections.deque[BatchRecord] = field(default_factory=collections.deque)
    recent_decode: int = 0
    recent_prefill: int = 0
    recent_sequences: int = 0
    last_owner: dict[int, str] = field(default_factory=dict)  # who last used each sequence

    def admitted(self, cached_tokens: int) -> None:
        if cached_tokens:
            self.hits += 1
            self.reused += cached_tokens
        else:
            self.misses += 1

    def batch_ran(self, batch: BatchRecord, scheduler_seconds: float) -> None:
        self.ticks += 1
        self.scheduler_seconds += scheduler_seconds
        self.recent.append(batch)
        self.recent_decode += batch.decode_rows
        self.recent_prefill += batch.prefill_rows
        self.recent_sequences += batch.sequences
        self._forget_before(batch.finished - RATE_WINDOW)

    def _forget_before(self, cutoff: float) -> None:
        recent = self.recent
        while recent and recent[0].finished <= cutoff:
            old = recent.popleft()
            self.recent_decode -= old.decode_rows
            self.recent_prefill -= old.prefill_rows
            self.recent_sequences -= old.sequences

    def media_ran(self) -> None:
        self.ticks += 1

    def finished(self, sequence_id: int, owner: str) -> None:
        self.completed += 1
        self.last_owner[sequence_id] = owner

    def snapshot(
        self,
        pool: SequencePool | None,
        active: Mapping[int, ActiveSlot],
        cells: Callable[[int], int],
        *,
        now: float,
        n_ctx: int,
        n_ctx_per_sequence: int,
        n_seq: int,
        queue_depth: int,
        drafted: int,
        accepted: int,
        shared_pool: bool = False,
        evicted: int = 0,
        drafting_with: str = "",
        draft_note: str = "",
    ) -> EngineStats:
        """Every sequence's state and cells (``cells(seq)`` asks llama.cpp), and the rates
        at ``now`` (the clock ``BatchRecord`` times come from).

        Over the batches that finished in the last ``RATE_WINDOW`` seconds:

        - decode (prefill) tokens/s: their decode (prefill) rows divided by the time from
          the start of the oldest of them to ``now``. A stretch of work that began less than
          a window ago is measured over its own length, not diluted by the idle time
          before it; after the last batch the rates fall steadily and reach zero one
          window later.
        - batch fill: the mean number of sequences per batch divided by ``n_seq``, the
          sequences the context decodes in parallel (llama-server's busy slots per decode,
          as a share): two replies streaming on a four-sequence context read 0.5, however
          few of the batch's token rows (``n_batch``) a decode step uses.
        """
        sequences: list[SequenceStats] = []
        for info in pool.snapshot() if pool is not None else ():
            seq = info.sequence_id
            reused = info.reusable_tokens
            slot = active.get(seq)
            if slot is not None:
                state, owner, reused = SlotState.ACTIVE, slot.owner, slot.reused_tokens
            elif info.state is SequenceState.QUARANTINED:
                state, owner = SlotState.QUARANTINED, ""
            elif info.reusable_tokens:
                # Whose conversation the cached prefix is: its next turn will reuse it.
                state, owner = SlotState.REUSABLE, self.last_owner.get(seq, "")
            else:
                state, owner = SlotState.EMPTY, ""
            sequences.append(SequenceStats(seq, state, owner, cells(seq), reused))
        self._forget_before(now - RATE_WINDOW)
        recent = self.recent
        span = now - recent[0].started if recent else 0.0
        decode = self.recent_decode / span if span > 0 else 0.0
        prefill = self.recent_prefill / span if span > 0 else 0.0
        fill = self.recent_sequences / (len(recent) * n_seq) if recent and n_seq else 0.0
        return EngineStats(
            sequences=tuple(sequences),
            n_ctx=n_ctx,
            n_ctx_per_sequence=n_ctx_per_sequence,
            queue_depth=queue_depth,
            active_requests=len(active),
            prefix_hits=self.hits,
            prefix_misses=self.misses,
            tokens_reused=self.reused,
            decode_tokens_per_second=decode,
            prefill_tokens_per_second=prefill,
            batch_fill=fill,
            ticks=self.ticks,
            completed_requests=self.completed,
            scheduler_tick_us=1e6 * self.scheduler_seconds / self.ticks if self.ticks else 0.0,
            drafted_tokens=drafted,
            accepted_tokens=accepted,
            shared_pool=shared_pool,
            evicted_prefixes=evicted,
            drafting_with=drafting_with,
            draft_note=draft_note,
        )
