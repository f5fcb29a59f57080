"""One sequence's progress through its prompt and reply."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from engine.scheduler.batch_planner import Candidate, WorkKind
from engine.scheduler.layouts import (
    ZERO_BOUNDARY,
    MediaItem,
    MediaSegment,
    PrefillItem,
    PromptBoundary,
    PromptLayout,
    TextRun,
)


class SequencePhase(enum.Enum):
    PREFILL = "prefill"  # prompt text next
    MEDIA = "media"  # a media span next
    SAMPLE = "sample"  # logits are waiting: sample (or finish) before more batch work
    DECODE = "decode"  # a sampled token (and maybe drafts) waits to be decoded


@dataclass(slots=True, eq=False)
class SequenceProgress:
    """Scheduler-side state of one active request, advanced only by ``BatchCommit.apply``.

    ``cursor`` is how much of the prompt is in KV; ``generated`` the tokens decoded
    after it (also in KV). ``pending``/``drafts`` are sampled but not yet decoded.
    """

    sequence_id: int
    prompt: PromptLayout
    cursor: PromptBoundary
    cached: PromptBoundary = ZERO_BOUNDARY
    generated: list[int] = field(default_factory=list)
    pending: int | None = None
    drafts: tuple[int, ...] = ()

    @classmethod
    def admit(cls, sequence_id: int, prompt: PromptLayout, cached: PromptBoundary) -> SequenceProgress:
        if not prompt.logical_tokens:
            raise ValueError("an empty prompt produces no logits to sample from")
        if cached.logical_tokens >= prompt.logical_tokens or cached != prompt.boundary_at(
            cached.logical_tokens
        ):
            raise ValueError(f"{cached} is not a reusable boundary of a {prompt.logical_tokens}-token prompt")
        return cls(sequence_id, prompt, cached, cached)

    @property
    def n_past(self) -> int:
        """The native position of the next row."""
        return self.cursor.native_position + len(self.generated)

    @property
    def prompt_done(self) -> bool:
        return self.cursor.logical_tokens == self.prompt.logical_tokens

    @property
    def phase(self) -> SequencePhase:
        if not self.prompt_done:
            index, _ = self.prompt.locate(self.cursor.logical_tokens)
            if isinstance(self.prompt.segments[index], MediaSegment):
                return SequencePhase.MEDIA
            return SequencePhase.PREFILL
        return SequencePhase.SAMPLE if self.pending is None else SequencePhase.DECODE

    def next_item(self) -> PrefillItem | None:
        """The current text run (from the cursor) or media span; None once the prompt is in."""
        if self.prompt_done:
            return None
        index, offset = self.prompt.locate(self.cursor.logical_tokens)
        segment = self.prompt.segments[index]
        if isinstance(segment, MediaSegment):
            return MediaItem(self.cursor, segment)
        return TextRun(self.cursor, segment.tokens[offset:] if offset else segment.tokens)

    def candidate(self) -> Candidate | None:
        """This sequence's work for the planner, or None while it waits to be sampled."""
        if self.pending is not None:  # only set once the prompt is in (see push)
            return Candidate(self.sequence_id, WorkKind.DECODE, 1, len(self.drafts))
        if self.cursor.logical_tokens == self.prompt.logical_tokens:
            return None
        index, offset = self.prompt.locate(self.cursor.logical_tokens)
        segment = self.prompt.segments[index]
        if isinstance(segment, MediaSegment):
            return Candidate(self.sequence_id, WorkKind.MEDIA, segment.logical_tokens)
        return Candidate(self.sequence_id, WorkKind.PREFILL, len(segment.tokens) - offset)

    def push(self, token: int, drafts: Iterable[int] = ()) -> None:
        """Queue a sampled token (and speculative drafts after it) for the next batch."""
        if self.pending is not None or self.cursor.logical_tokens != self.prompt.logical_tokens:
            raise ValueError(f"sequence {self.sequence_id} is in {self.phase.value}, not sample")
        self.pending = token
        self.drafts = tuple(drafts)

    def discard_rejected(self, count: int) -> int:
        """Forget the last ``count`` decoded tokens (rejected drafts).

        Returns the native position from which the executor removes KV (target and draft).
        """
        if self.phase is not SequencePhase.SAMPLE:
            raise ValueError(f"sequence {self.sequence_id} is in {self.phase.value}, not sample")
        if not 0 <= count <= len(self.generated):
            raise ValueError(f"cannot discard {count} of {len(self.generated)} generated tokens")
        if count:
            del self.generated[-count:]
        return self.n_past

    def reusable_prefix(self) -> PromptLayout:
        """What this sequence's KV holds: the prompt so far plus the decoded reply.

        Recording the reply too (not just the prompt, as the reference does) lets the
        next turn of a conversation reuse it instead of prefilling it again.
        """
        return self.prompt.truncate(self.cursor).extend(self.generated)
