"""Prompt layouts: text and media segments, boundaries inside them, common prefixes."""

from __future__ import annotations

import enum
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias


@dataclass(frozen=True, slots=True, order=True)
class PromptBoundary:
    """A point in a prompt, in both coordinates.

    ``logical_tokens`` counts prompt tokens/embeddings; ``native_position`` is the KV
    position. They differ only after media on M-RoPE models, where an image of N
    embeddings may advance fewer positions.
    """

    logical_tokens: int
    native_position: int


ZERO_BOUNDARY = PromptBoundary(0, 0)


@dataclass(frozen=True, slots=True)
class TextSegment:
    """Token ids; each advances one logical token and one native position."""

    tokens: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.tokens, tuple):
            object.__setattr__(self, "tokens", tuple(self.tokens))

    @property
    def logical_tokens(self) -> int:
        return len(self.tokens)

    @property
    def native_positions(self) -> int:
        return len(self.tokens)


@dataclass(frozen=True, slots=True)
class MediaSegment:
    """An image (or other media chunk), atomic for caching and evaluation.

    ``identity`` is derived from the decoded pixels (e.g. ``"image/png:WxH:" +
    sha256(rgb)``) so the same picture matches across requests.
    """

    identity: str
    logical_tokens: int
    native_positions: int

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("media identity must not be empty")
        if self.logical_tokens < 1 or self.native_positions < 1:
            raise ValueError(
                f"media must span at least one token and position, got "
                f"{self.logical_tokens} tokens / {self.native_positions} positions"
            )


PromptSegment: TypeAlias = TextSegment | MediaSegment


class MediaSnap(enum.Enum):
    """What a boundary that falls strictly inside a media span becomes."""

    REJECT = "reject"  # truncation: a KV prefix cannot hold half an image
    START = "start"  # admission: step back so the whole image is evaluated again
    END = "end"  # checkpoints: a state saved mid-image is only usable after it


class SplitsMedia(ValueError):
    """A boundary would fall inside a media span."""


@dataclass(frozen=True, slots=True)
class TextRun:
    """Prefill work: consecutive text tokens starting at ``start``."""

    start: PromptBoundary
    tokens: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MediaItem:
    """Prefill work: one media span starting at ``start``, evaluated as its own step."""

    start: PromptBoundary
    segment: MediaSegment


PrefillItem: TypeAlias = TextRun | MediaItem


@dataclass(frozen=True, slots=True)
class PromptLayout:
    """A prompt as text and media segments.

    Normalised on construction (empty text dropped, adjacent text merged) so that two
    layouts of the same content are equal and ``common_prefix`` can walk segments in
    lockstep.
    """

    segments: tuple[PromptSegment, ...] = ()
    # Totals are plain attributes rather than properties: the executor reads them for
    # every sequence on every tick.
    logical_tokens: int = field(init=False, repr=False, compare=False)
    native_positions: int = field(init=False, repr=False, compare=False)
    # Cumulative segment ends, for O(log n) boundary lookups.
    _ends_logical: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _ends_native: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        segments = _normalise(self.segments)
        object.__setattr__(self, "segments", segments)
        ends_logical: list[int] = []
        ends_native: list[int] = []
        logical = native = 0
        for segment in segments:
            logical += segment.logical_tokens
            native += segment.native_positions
            ends_logical.append(logical)
            ends_native.append(native)
        object.__setattr__(self, "_ends_logical", tuple(ends_logical))
        object.__setattr__(self, "_ends_native", tuple(ends_native))
        object.__setattr__(self, "logical_tokens", logical)
        object.__setattr__(self, "native_positions", native)

    @classmethod
    def from_tokens(cls, tokens: Iterable[int]) -> PromptLayout:
        return cls((TextSegment(tuple(tokens)),))

    @property
    def end(self) -> PromptBoundary:
        return PromptBoundary(self.logical_tokens, self.native_positions)

    @property
    def media_count(self) -> int:
        return sum(1 for segment in self.segments if isinstance(segment, MediaSegment))

    def common_prefix(self, other: PromptLayout) -> PromptBoundary:
        """The longest shared prefix; it never ends inside a media span."""
        logical = native = 0
        for mine, theirs in zip(self.segments, other.segments, strict=False):
            if isinstance(mine, TextSegment) and isinstance(theirs, TextSegment):
                same = common_token_prefix(mine.tokens, theirs.tokens)
                logical += same
                native += same
                # Normalisation means the next segment of either side is media or the
                # end, so a text run that is not equal in full ends the prefix.
                if same != len(mine.tokens) or same != len(theirs.tokens):
                    break
            elif mine == theirs:  # media: same identity and both sizes
                logical += mine.logical_tokens
                native += mine.native_positions
            else:
                break
        return PromptBoundary(logical, native)

    def is_boundary(self, n_logical: int) -> bool:
        """True when a cache boundary may sit after ``n_logical`` tokens."""
        if not 0 <= n_logical <= self.logical_tokens:
            return False
        index, offset = self.locate(n_logical)
        return offset == 0 or isinstance(self.segments[index], TextSegment)

    def boundary_at(self, n_logical: int, snap: MediaSnap = MediaSnap.REJECT) -> PromptBoundary:
        """The boundary after ``n_logical`` tokens; ``snap`` says what happens inside media."""
        if not 0 <= n_logical <= self.logical_tokens:
            raise ValueError(f"boundary {n_logical} outside a prompt of {self.logical_tokens} tokens")
        if n_logical == self.logical_tokens:
            return self.end
        index, offset = self.locate(n_logical)
        start_logical, start_native = self._segment_start(index)
        if offset == 0:
            return PromptBoundary(start_logical, start_native)
        segment = self.segments[index]
        if isinstance(segment, TextSegment):
            return PromptBoundary(n_logical, start_native + offset)
        if snap is MediaSnap.START:
            return PromptBoundary(start_logical, start_native)
        if snap is MediaSnap.END:
            return PromptBoundary(self._ends_logical[index], self._ends_native[index])
        raise SplitsMedia(
            f"a boundary at token {n_logical} would split media {segment.identity!r} "
            f"(tokens {start_logical}..{self._ends_logical[index]})"
        )

    def truncate(self, boundary: PromptBoundary) -> PromptLayout:
        """The layout up to ``boundary``, which must be a valid boundary of this layout."""
        if boundary != self.boundary_at(boundary.logical_tokens):
            raise ValueError(f"{boundary} is not a boundary of this layout")
        if boundary.logical_tokens == self.logical_tokens:
            return self
        index, offset = self.locate(boundary.logical_tokens)
        head = self.segments[:index]
        if offset:
            segment = self.segments[index]
            assert isinstance(segment, TextSegment)  # boundary_at rejected media
            head = (*head, TextSegment(segment.tokens[:offset]))
        return PromptLayout(head)

    def prefix(self, n_logical: int) -> PromptLayout:
        """The first ``n_logical`` tokens; raises ``SplitsMedia`` inside media."""
        return self.truncate(self.boundary_at(n_logical))

    def extend(self, tokens: Iterable[int]) -> PromptLayout:
        """This layout followed by text tokens (prompt + generated reply)."""
        tokens = tuple(tokens)
        if not tokens:
            return self
        return PromptLayout((*self.segments, TextSegment(tokens)))

    def concat(self, other: PromptLayout) -> PromptLayout:
        return PromptLayout((*self.segments, *other.segments)) if other.segments else self

    def remaining_after(self, boundary: PromptBoundary) -> tuple[PrefillItem, ...]:
        """The prefill work left after ``boundary``: text runs and media items in order."""
        if boundary != self.boundary_at(boundary.logical_tokens):
            raise ValueError(f"{boundary} is not a boundary of this layout")
        if boundary.logical_tokens == self.logical_tokens:
            return ()
        index, offset = self.locate(boundary.logical_tokens)
        items: list[PrefillItem] = []
        start = boundary
        for position in range(index, len(self.segments)):
            segment = self.segments[position]
            if isinstance(segment, TextSegment):
                items.append(TextRun(start, segment.tokens[offset:] if offset else segment.tokens))
            else:
                items.append(MediaItem(start, segment))
            offset = 0
            start = PromptBoundary(self._ends_logical[position], self._ends_native[position])
        return tuple(items)

    def locate(self, n_logical: int) -> tuple[int, int]:
        """(segment index, offset into it) of the token at ``n_logical`` (< total)."""
        index = bisect_right(self._ends_logical, n_logical)
        return index, n_logical - (self._ends_logical[index - 1] if index else 0)

    def _segment_start(self, index: int) -> tuple[int, int]:
        if index == 0:
            return 0, 0
        return self._ends_logical[index - 1], self._ends_native[index - 1]


def _normalise(segments: Iterable[PromptSegment]) -> tuple[PromptSegment, ...]:
    segments = tuple(segments)
    tidy = True
    previous_text = False
    for segment in segments:
        if isinstance(segment, TextSegment):
            if not segment.tokens or previous_text:
                tidy = False
                break
            previous_text = True
        elif isinstance(segment, MediaSegment):
            previous_text = False
        else:
            raise TypeError(f"not a prompt segment: {segment!r}")
    if tidy:
        return segments
    result: list[PromptSegment] = []
    pending: list[int] = []
    for segment in segments:
        if isinstance(segment, TextSegment):
            pending.extend(segment.tokens)
            continue
        if not isinstance(segment, MediaSegment):
            raise TypeError(f"not a prompt segment: {segment!r}")
        if pending:
            result.append(TextSegment(tuple(pending)))
            pending = []
        result.append(segment)
    if pending:
        result.append(TextSegment(tuple(pending)))
    return tuple(result)


def common_token_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share.

    Slices are compared in C: the usual all-equal case is one comparison, and a difference
    is found by halving (log n slice comparisons), never by a Python loop over tokens.
    """
    n = min(len(a), len(b))
    x, y = a[:n], b[:n]
    if type(x) is not type(y):  # a list never equals a tuple: compare like with like
        y = type(x)(y)  # type: ignore[call-arg]
    if x == y:
        return n
    low, high = 0, n  # x[:low] == y[:low] and x[:high] != y[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if x[low:middle] == y[low:middle]:
            low = middle
        else:
            high = middle
    return low
