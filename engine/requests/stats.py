"""What the engine is doing, as the dashboard reads it: ``EngineStats`` and each sequence's
``SequenceStats`` and ``SlotState``."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class SlotState(enum.StrEnum):
    """What a sequence (a slot of the context) holds, as the dashboard shows it."""

    ACTIVE = "active"  # serving a request
    REUSABLE = "reusable"  # a cached prefix, kept for its conversation's next turn
    EMPTY = "empty"  # nothing
    QUARANTINED = "quarantined"  # its KV could not be cleared; never handed out again


@dataclass(frozen=True)
class SequenceStats:
    sequence_id: int
    state: SlotState
    owner: str  # the request's owner (a conversation id); for "reusable", the last one
    cells_used: int
    reusable_tokens: int  # cached prefix: kept for the next turn, or (active) reused by this one


@dataclass(frozen=True)
class EngineStats:
    """What the engine is doing, answered between two batches (``LoadedModel.request_stats``).

    The rates and the batch fill cover the batches that finished in the last two seconds
    (``engine.runtime.serving_stats.RATE_WINDOW``; ``ServingCounters.snapshot`` defines them exactly):
    they read zero two seconds after the engine went idle.
    """

    sequences: tuple[SequenceStats, ...]
    n_ctx: int
    n_ctx_per_sequence: int
    queue_depth: int
    active_requests: int
    prefix_hits: int
    prefix_misses: int
    tokens_reused: int
    decode_tokens_per_second: float  # decode rows (tokens sampled, drafts included) per second, recently
    prefill_tokens_per_second: float  # prompt tokens evaluated per second, recently
    batch_fill: float  # 0..1: mean sequences per recent batch / sequences decoded in parallel
    ticks: int
    completed_requests: int
    scheduler_tick_us: float = 0.0  # mean time in the scheduler (plan, stage, commit) per batch
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    # One KV pool of ``n_ctx`` cells the sequences share (each up to ``n_ctx_per_sequence``),
    # and the cached prefixes dropped to make room in it since load.
    shared_pool: bool = False
    evicted_prefixes: int = 0
    # The draft model speculating ("" without one), or why it was let go at warm-up.
    drafting_with: str = ""
    draft_note: str = ""

    @property
    def cells_used(self) -> int:
        return sum(s.cells_used for s in self.sequences)
