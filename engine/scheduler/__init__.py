"""Scheduling policy: prompt layouts, the sequence pool, the batch planner, batch commits.

One noun per module: ``layouts``, ``pool``, ``batch_planner``, ``progress``, ``commit``
(and ``limits``, its numbers); everything public is importable from here.

Pure and deterministic: plain data in, plain data out, no llama_cpp, no Qt, no numpy.
The executor owns every native call; this module only decides *what* to run. The
behaviour follows ``docs/scheduler-rules.md``; where Hearth deliberately differs
from the reference engine the docstring says so and why.

How the executor is expected to drive it, one tick::

    acq = pool.acquire_matching(layout)              # admission (the executor's FIFO)
    seq_rm(acq.sequence_id, acq.truncate_from, -1)   # drop KV past the reusable prefix
    progress[acq.sequence_id] = SequenceProgress.admit(acq.sequence_id, layout, acq.cached)

    plan = planner.plan([c for p in progress.values() if (c := p.candidate())], n_batch)
    commit = BatchCommit.stage(plan.work, progress)  # rows for llama_batch
    if llama_decode(...) == 0: logits = commit.apply(progress)   # seq id -> logit rows
    else: commit.discard()
    if plan.media: eval the image, then BatchCommit.stage_media(plan.media, progress).apply(...)
    for each seq with logit rows: sample, then progress[seq].push(token, drafts) or finish
    pool.release(seq, progress[seq].reusable_prefix())
"""

from __future__ import annotations

from engine.scheduler.batch_planner import BatchPlan, BatchPlanner, BatchWork, Candidate, WorkKind
from engine.scheduler.commit import BatchCommit, BatchRow, CommitState, StagedWork, StaleCommit
from engine.scheduler.layouts import (
    ZERO_BOUNDARY,
    MediaItem,
    MediaSegment,
    MediaSnap,
    PrefillItem,
    PromptBoundary,
    PromptLayout,
    PromptSegment,
    SplitsMedia,
    TextRun,
    TextSegment,
    common_token_prefix,
)
from engine.scheduler.limits import (
    DEFAULT_COMMAND_QUEUE,
    DEFAULT_N_BATCH,
    DEFAULT_N_UBATCH,
    DEFAULT_PREFILL_QUANTUM,
    SIMILARITY_THRESHOLD,
)
from engine.scheduler.pool import (
    Acquisition,
    Checkpoint,
    PoolCounts,
    ReusablePrefix,
    SequenceInfo,
    SequencePool,
    SequenceState,
)
from engine.scheduler.progress import SequencePhase, SequenceProgress

__all__ = [
    "DEFAULT_COMMAND_QUEUE",
    "DEFAULT_N_BATCH",
    "DEFAULT_N_UBATCH",
    "DEFAULT_PREFILL_QUANTUM",
    "SIMILARITY_THRESHOLD",
    "ZERO_BOUNDARY",
    "Acquisition",
    "BatchCommit",
    "BatchPlan",
    "BatchPlanner",
    "BatchRow",
    "BatchWork",
    "Candidate",
    "Checkpoint",
    "CommitState",
    "MediaItem",
    "MediaSegment",
    "MediaSnap",
    "PoolCounts",
    "PrefillItem",
    "PromptBoundary",
    "PromptLayout",
    "PromptSegment",
    "ReusablePrefix",
    "SequenceInfo",
    "SequencePhase",
    "SequencePool",
    "SequenceProgress",
    "SequenceState",
    "SplitsMedia",
    "StagedWork",
    "StaleCommit",
    "TextRun",
    "TextSegment",
    "WorkKind",
    "common_token_prefix",
]
