"""What an executor counts while it serves, and the ``EngineStats`` snapshot built from it.

Counters are updated on the executor thread as requests are admitted and batches run;
``snapshot`` is answered there too, between two batches, so it needs no lock.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from engine.requests import EngineStats, SequenceStats, SlotState
from engine.scheduler import SequencePool, SequenceState

RATE_WINDOW = 3.0  # seconds of history behind "recent tokens/s"


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
    last_fill: float = 0.0
    scheduler_seconds: float = 0.0
    # (time, decode rows, prefill rows) of the batches in the last RATE_WINDOW seconds
    rates: collections.deque[tuple[float, int, int]] = field(default_factory=collections.deque)
    last_owner: dict[int, str] = field(default_factory=dict)  # who last used each sequence

    def admitted(self, cached_tokens: int) -> None:
        if cached_tokens:
            self.hits += 1
            self.reused += cached_tokens
        else:
            self.misses += 1

    def batch_ran(
        self, now: float, decode_rows: int, prefill_rows: int, fill: float, scheduler_seconds: float
    ) -> None:
        self.ticks += 1
        self.scheduler_seconds += scheduler_seconds
        self.last_fill = fill
        self.rates.append((now, decode_rows, prefill_rows))
        while self.rates and now - self.rates[0][0] > RATE_WINDOW:
            self.rates.popleft()

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
        n_ctx: int,
        n_ctx_per_sequence: int,
        queue_depth: int,
        drafted: int,
        accepted: int,
    ) -> EngineStats:
        """Every sequence's state and cells (``cells(seq)`` asks llama.cpp), and the rates."""
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
        span = (self.rates[-1][0] - self.rates[0][0]) if len(self.rates) > 1 else 0.0
        decode = sum(r[1] for r in self.rates) / span if span > 0 else 0.0
        prefill = sum(r[2] for r in self.rates) / span if span > 0 else 0.0
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
            batch_fill=self.last_fill,
            ticks=self.ticks,
            completed_requests=self.completed,
            scheduler_tick_us=1e6 * self.scheduler_seconds / self.ticks if self.ticks else 0.0,
            drafted_tokens=drafted,
            accepted_tokens=accepted,
        )
