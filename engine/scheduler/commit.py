"""Batch commits: a planned batch staged as rows, then applied or discarded."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from engine.scheduler.batch_planner import BatchWork, WorkKind
from engine.scheduler.layouts import MediaItem, MediaSegment, PromptBoundary, TextRun
from engine.scheduler.progress import SequenceProgress


class CommitState(enum.Enum):
    STAGED = "staged"
    APPLIED = "applied"
    DISCARDED = "discarded"


class StaleCommit(RuntimeError):
    """A commit no longer matches the progress it was staged from."""


@dataclass(frozen=True, slots=True)
class StagedWork:
    """One sequence's rows in a batch: ``tokens`` at ``position``, ``position + 1``, …

    ``first_row`` is the batch row of the first token; ``logit_rows`` the batch rows
    that must output logits (a decode's every row; a prefill's last row when it ends the
    prompt; ``range(-1, 0)`` for a media step that ends the prompt, i.e. the last
    logits of that evaluation). MEDIA entries have no tokens and no batch rows.
    """

    sequence_id: int
    kind: WorkKind
    first_row: int
    position: int
    tokens: tuple[int, ...]
    logit_rows: range
    completes_prompt: bool
    media: MediaSegment | None = None

    @property
    def n_rows(self) -> int:
        return len(self.tokens)


@dataclass(frozen=True, slots=True)
class BatchRow:
    token: int
    position: int
    sequence_id: int
    logits: bool


class BatchCommit:
    """The effects of one batch (or media step), staged before the native call.

    Nothing changes until ``apply`` after a successful decode; on failure ``discard``
    leaves every sequence where it was, so the executor can retry or fail the requests.
    """

    __slots__ = ("_state", "entries", "n_rows")

    def __init__(self, entries: tuple[StagedWork, ...]) -> None:
        self.entries = entries
        self.n_rows = sum(entry.n_rows for entry in entries)
        self._state = CommitState.STAGED

    @classmethod
    def stage(cls, work: Iterable[BatchWork], progress: Mapping[int, SequenceProgress]) -> BatchCommit:
        """Stage the token batch of a plan (DECODE and PREFILL items)."""
        entries: list[StagedWork] = []
        row = 0
        for item in work:
            state = progress[item.sequence_id]
            if item.n_tokens < 1:
                raise ValueError(f"empty work for sequence {item.sequence_id}")
            if item.kind is WorkKind.DECODE:
                if state.pending is None or item.n_tokens > 1 + len(state.drafts):
                    raise ValueError(f"sequence {item.sequence_id} has no {item.n_tokens} decode rows")
                tokens = (state.pending, *state.drafts[: item.n_tokens - 1])
                logits = range(row, row + len(tokens))
                completes = False
            elif item.kind is WorkKind.PREFILL:
                run = state.next_item()
                if not isinstance(run, TextRun) or item.n_tokens > len(run.tokens):
                    raise ValueError(f"sequence {item.sequence_id} has no {item.n_tokens} prompt tokens next")
                tokens = run.tokens[: item.n_tokens]
                completes = run.start.logical_tokens + item.n_tokens == state.prompt.logical_tokens
                last = row + item.n_tokens - 1
                logits = range(last, last + 1) if completes else range(0)
            else:
                raise ValueError("media is evaluated on its own: use BatchCommit.stage_media")
            entries.append(
                StagedWork(item.sequence_id, item.kind, row, state.n_past, tokens, logits, completes)
            )
            row += len(tokens)
        return cls(tuple(entries))

    @classmethod
    def stage_media(cls, work: BatchWork, progress: Mapping[int, SequenceProgress]) -> BatchCommit:
        """Stage one media step (evaluated by the executor at ``position`` into its sequence)."""
        state = progress[work.sequence_id]
        item = state.next_item()
        if work.kind is not WorkKind.MEDIA or not isinstance(item, MediaItem):
            raise ValueError(f"sequence {work.sequence_id} has no media next")
        completes = item.start.logical_tokens + item.segment.logical_tokens == state.prompt.logical_tokens
        entry = StagedWork(
            work.sequence_id,
            WorkKind.MEDIA,
            0,
            state.n_past,
            (),
            range(-1, 0) if completes else range(0),
            completes,
            item.segment,
        )
        return cls((entry,))

    @property
    def state(self) -> CommitState:
        return self._state

    def rows(self) -> Iterator[BatchRow]:
        """Row by row, for filling a llama_batch (the executor may copy per entry instead)."""
        for entry in self.entries:
            for offset, token in enumerate(entry.tokens):
                row = entry.first_row + offset
                yield BatchRow(token, entry.position + offset, entry.sequence_id, row in entry.logit_rows)

    def apply(self, progress: Mapping[int, SequenceProgress]) -> dict[int, range]:
        """Advance every sequence in the batch; returns sequence id -> rows to sample from."""
        if self._state is not CommitState.STAGED:
            raise StaleCommit(f"commit already {self._state.value}")
        # Check everything first so a stale commit changes nothing. A cheap guard against
        # applying out of order (same n_past and same pending state as when staged), not
        # a proof: the executor stages and applies one commit at a time.
        for entry in self.entries:
            state = progress.get(entry.sequence_id)
            if (
                state is None
                or state.n_past != entry.position
                or (state.pending is not None) is not (entry.kind is WorkKind.DECODE)
            ):
                raise StaleCommit(f"sequence {entry.sequence_id} moved since this batch was staged")
        logits: dict[int, range] = {}
        for entry in self.entries:
            state = progress[entry.sequence_id]
            cursor = state.cursor
            if entry.kind is WorkKind.PREFILL:
                state.cursor = PromptBoundary(
                    cursor.logical_tokens + entry.n_rows, cursor.native_position + entry.n_rows
                )
            elif entry.kind is WorkKind.MEDIA:
                assert entry.media is not None
                state.cursor = PromptBoundary(
                    cursor.logical_tokens + entry.media.logical_tokens,
                    cursor.native_position + entry.media.native_positions,
                )
            else:
                state.generated.extend(entry.tokens)
                state.pending = None
                state.drafts = ()
            if entry.logit_rows:
                logits[entry.sequence_id] = entry.logit_rows
        self._state = CommitState.APPLIED
        return logits

    def discard(self) -> None:
        if self._state is CommitState.APPLIED:
            raise StaleCommit("commit already applied")
        self._state = CommitState.DISCARDED
