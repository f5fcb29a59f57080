"""The scheduler's numbers (docs/scheduler-rules.md), from Hearth's one source of defaults."""

from __future__ import annotations

from engine.base.defaults import DEFAULT_N_BATCH, DEFAULT_N_UBATCH, DEFAULT_QUEUE_CAPACITY

DEFAULT_PREFILL_QUANTUM = 512
DEFAULT_COMMAND_QUEUE = DEFAULT_QUEUE_CAPACITY  # the name the scheduler's rules use
SIMILARITY_THRESHOLD = 0.1

__all__ = [
    "DEFAULT_COMMAND_QUEUE",
    "DEFAULT_N_BATCH",
    "DEFAULT_N_UBATCH",
    "DEFAULT_PREFILL_QUANTUM",
    "SIMILARITY_THRESHOLD",
]
