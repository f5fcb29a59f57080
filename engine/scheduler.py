"""Scheduling policy: prompt layouts, the sequence pool, the batch planner, batch commits.

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

import enum
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeAlias

from engine.defaults import DEFAULT_N_BATCH, DEFAULT_QUEUE_CAPACITY

DEFAULT_N_UBATCH = 512
DEFAULT_PREFILL_QUANTUM = 512
DEFAULT_COMMAND_QUEUE = DEFAULT_QUEUE_CAPACITY  # the name the scheduler's rules use
SIMILARITY_THRESHOLD = 0.1


# --------------------------------------------------------------------------- layouts


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


# ---------------------------------------------------------------------- sequence pool


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A saved sequence state (recurrent/hybrid memory) valid at ``boundary``.

    ``state`` is opaque to the scheduler (the executor's bytes or handle).
    """

    boundary: PromptBoundary
    state: object = field(compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ReusablePrefix:
    """What an available sequence's KV still holds, for a later request to reuse."""

    layout: PromptLayout
    checkpoints: tuple[Checkpoint, ...] = ()

    def __post_init__(self) -> None:
        for checkpoint in self.checkpoints:
            boundary = checkpoint.boundary
            n = boundary.logical_tokens
            if not self.layout.is_boundary(n) or boundary != self.layout.boundary_at(n):
                raise ValueError(f"checkpoint at {boundary} is not a boundary of the prefix")

    def checkpoint_at_or_before(self, boundary: PromptBoundary) -> Checkpoint | None:
        """The newest checkpoint usable for ``boundary`` (rollback for recurrent memory)."""
        best: Checkpoint | None = None
        for checkpoint in self.checkpoints:
            if checkpoint.boundary.logical_tokens <= boundary.logical_tokens and (
                best is None or checkpoint.boundary.logical_tokens > best.boundary.logical_tokens
            ):
                best = checkpoint
        return best


class SequenceState(enum.Enum):
    AVAILABLE = "available"
    ACTIVE = "active"
    QUARANTINED = "quarantined"


@dataclass(frozen=True, slots=True)
class Acquisition:
    """A sequence handed to one request.

    ``cached`` is the reused prefix, already stepped back so the last prompt token is
    decoded again and never inside media. The executor removes KV from
    ``truncate_from`` to the end. ``prefix`` is what the sequence held (with any
    checkpoints), for the recurrent-memory fallback when removal is refused.
    """

    sequence_id: int
    cached: PromptBoundary
    matched: bool  # similarity was above the threshold (a prefix-cache hit)
    prefix: ReusablePrefix | None = None

    @property
    def truncate_from(self) -> int:
        return self.cached.native_position

    def with_cached(self, cached: PromptBoundary) -> Acquisition:
        """The same acquisition reusing less (a checkpoint restored, or the sequence cleared)."""
        if cached > self.cached:
            raise ValueError(f"cannot reuse {cached}, more than the {self.cached} cached")
        return replace(self, cached=cached)


@dataclass(frozen=True, slots=True)
class PoolCounts:
    available: int
    active: int
    quarantined: int


@dataclass(frozen=True, slots=True)
class SequenceInfo:
    sequence_id: int
    state: SequenceState
    reusable_tokens: int


class SequencePool:
    """Sequence ids ``0..n-1``; available ones ordered by recency, each maybe with a prefix."""

    __slots__ = ("_active", "_available", "_prefixes", "_quarantined", "_size", "_stale", "threshold")

    def __init__(self, n_sequences: int, *, threshold: float = SIMILARITY_THRESHOLD) -> None:
        if n_sequences < 1:
            raise ValueError(f"a pool needs at least one sequence, got {n_sequences}")
        self._size = n_sequences
        self.threshold = threshold
        # Index 0 is the front (most recently released); the last element is the LRU.
        self._available: list[int] = list(range(n_sequences))
        self._prefixes: dict[int, ReusablePrefix] = {}
        self._active: set[int] = set()
        self._quarantined: set[int] = set()
        # Active sequences whose KV a context reset destroyed: their release must not
        # record a prefix, whatever the caller passes.
        self._stale: set[int] = set()

    @property
    def size(self) -> int:
        return self._size

    @property
    def capacity(self) -> int:
        """Sequences that can still serve requests (quarantined ones are gone for good)."""
        return self._size - len(self._quarantined)

    @property
    def available(self) -> int:
        return len(self._available)

    @property
    def active(self) -> int:
        return len(self._active)

    @property
    def quarantined(self) -> int:
        return len(self._quarantined)

    def counts(self) -> PoolCounts:
        return PoolCounts(len(self._available), len(self._active), len(self._quarantined))

    def available_ids(self) -> tuple[int, ...]:
        """Available sequence ids, most recently used first, LRU last."""
        return tuple(self._available)

    def state(self, sequence_id: int) -> SequenceState:
        self._check_id(sequence_id)
        if sequence_id in self._active:
            return SequenceState.ACTIVE
        if sequence_id in self._quarantined:
            return SequenceState.QUARANTINED
        return SequenceState.AVAILABLE

    def prefix(self, sequence_id: int) -> ReusablePrefix | None:
        self._check_id(sequence_id)
        return self._prefixes.get(sequence_id)

    def snapshot(self) -> tuple[SequenceInfo, ...]:
        return tuple(
            SequenceInfo(
                sequence_id,
                self.state(sequence_id),
                prefix.layout.logical_tokens if (prefix := self._prefixes.get(sequence_id)) else 0,
            )
            for sequence_id in range(self._size)
        )

    def acquire_matching(self, prompt: PromptLayout) -> Acquisition | None:
        """Take the available sequence that reuses the most of ``prompt``; None if none is free.

        Candidates need ``common_prefix / prompt_tokens`` strictly above the threshold;
        the longest common prefix wins and ties go to the more recently used. Without a
        candidate the LRU sequence is taken, still reusing whatever prefix it shares.
        """
        if not self._available:
            return None
        total = prompt.logical_tokens
        chosen = len(self._available) - 1  # LRU
        matched = False
        if total:
            best = 0
            for index, sequence_id in enumerate(self._available):  # front (MRU) first
                prefix = self._prefixes.get(sequence_id)
                if prefix is None:
                    continue
                common = prefix.layout.common_prefix(prompt).logical_tokens
                # Strict '>' on both keeps the earlier (more recent) one on ties.
                if common / total > self.threshold and common > best:
                    best, chosen, matched = common, index, True
        sequence_id = self._available.pop(chosen)
        prefix = self._prefixes.pop(sequence_id, None)
        cached = ZERO_BOUNDARY
        if prefix is not None and total:
            cached = prefix.layout.common_prefix(prompt)
            if cached.logical_tokens == total:
                # The last prompt token must be decoded again to produce logits; if
                # that lands inside media, the whole image is evaluated again.
                cached = prompt.boundary_at(total - 1, MediaSnap.START)
        self._active.add(sequence_id)
        return Acquisition(sequence_id, cached, matched, prefix)

    def acquire_lru(self) -> Acquisition | None:
        """Take the least recently used sequence for a request that does not want caching.

        Unlike the reference, this leaves the hottest prefixes for requests that can
        reuse them. The whole sequence is cleared (``truncate_from`` is 0).
        """
        if not self._available:
            return None
        sequence_id = self._available.pop()
        prefix = self._prefixes.pop(sequence_id, None)
        self._active.add(sequence_id)
        return Acquisition(sequence_id, ZERO_BOUNDARY, False, prefix)

    def release(self, sequence_id: int, prefix: PromptLayout | ReusablePrefix | None = None) -> None:
        """Return an active sequence to the front, with what its KV now holds."""
        self._check_id(sequence_id)
        if sequence_id not in self._active:
            raise ValueError(f"sequence {sequence_id} is not active")
        self._active.remove(sequence_id)
        stale = sequence_id in self._stale
        self._stale.discard(sequence_id)
        self._available.insert(0, sequence_id)
        if isinstance(prefix, PromptLayout):
            prefix = ReusablePrefix(prefix)
        if prefix is not None and prefix.layout.logical_tokens and not stale:
            self._prefixes[sequence_id] = prefix

    def invalidate(self, sequence_id: int) -> None:
        """Forget what one sequence's KV holds (e.g. after clearing it)."""
        self._check_id(sequence_id)
        self._prefixes.pop(sequence_id, None)
        if sequence_id in self._active:
            self._stale.add(sequence_id)

    def invalidate_all(self) -> None:
        """A context reset: no KV survives, so no prefix is reusable, now or on release."""
        self._prefixes.clear()
        self._stale |= self._active

    def quarantine(self, sequence_id: int) -> None:
        """Retire a sequence id whose KV could not be brought to a known state. Idempotent."""
        self._check_id(sequence_id)
        if sequence_id in self._quarantined:
            return
        if sequence_id in self._active:
            self._active.remove(sequence_id)
        else:
            self._available.remove(sequence_id)
        self._stale.discard(sequence_id)
        self._prefixes.pop(sequence_id, None)
        self._quarantined.add(sequence_id)

    def _check_id(self, sequence_id: int) -> None:
        if not 0 <= sequence_id < self._size:
            raise ValueError(f"no sequence {sequence_id} in a pool of {self._size}")


# ---------------------------------------------------------------------- batch planner


class WorkKind(enum.Enum):
    DECODE = "decode"  # one pending token (+ draft rows) of a generating sequence
    PREFILL = "prefill"  # prompt text tokens
    MEDIA = "media"  # an image chunk: its own evaluation step, never in a token batch


@dataclass(frozen=True, slots=True)
class Candidate:
    """A sequence that has work this tick.

    ``remaining``: PREFILL, tokens left in the current text run (up to the next media
    or the end of the prompt); MEDIA, the image's tokens (informational); DECODE,
    ignored (one pending row). ``draft_rows`` only for DECODE.
    """

    sequence_id: int
    kind: WorkKind
    remaining: int = 1
    draft_rows: int = 0

    def __post_init__(self) -> None:
        if self.remaining < 0 or self.draft_rows < 0:
            raise ValueError(f"negative work in {self!r}")
        if self.draft_rows and self.kind is not WorkKind.DECODE:
            raise ValueError("only decoding sequences have draft rows")


@dataclass(frozen=True, slots=True)
class BatchWork:
    """Rows for one sequence at consecutive positions (DECODE: pending + n_tokens-1 drafts)."""

    sequence_id: int
    kind: WorkKind
    n_tokens: int


@dataclass(frozen=True, slots=True)
class BatchPlan:
    """One tick: ``work`` is the token batch (decodes first); ``media`` a separate step."""

    work: tuple[BatchWork, ...] = ()
    media: BatchWork | None = None

    @property
    def n_rows(self) -> int:
        return sum(item.n_tokens for item in self.work)

    @property
    def decode_rows(self) -> int:
        return sum(item.n_tokens for item in self.work if item.kind is WorkKind.DECODE)

    @property
    def prefill_rows(self) -> int:
        return sum(item.n_tokens for item in self.work if item.kind is WorkKind.PREFILL)

    @property
    def is_empty(self) -> bool:
        return not self.work and self.media is None


class BatchPlanner:
    """Decode first, then round-robin prefill quanta; at most one media step per tick.

    Differences from the reference, all compatible with its rules:

    - Capacity is the whole batch; draft rows are counted here. Every decoding sequence
      gets its pending row first (by sequence id); draft rows are handed out afterwards
      in the same order, cut to what fits, so one sequence's drafts never cost another
      sequence its token. A cut draft is still a valid draft.
    - The rotation cursor is the id of the last prefill leader rather than an index, so
      the next leader is the next id after it. For a fixed set of n candidates this is
      exactly "start at cursor % n"; when sequences join or leave, nobody's turn is
      skipped. It only advances when the leader got a quantum, so a tick whose rows all
      went to decodes does not cost anyone a turn.
    - Media candidates never enter the token batch: one per tick is returned as
      ``BatchPlan.media``, round-robin by its own cursor.
    """

    __slots__ = ("_last_media", "_last_prefill", "prefill_quantum")

    def __init__(self, prefill_quantum: int = DEFAULT_PREFILL_QUANTUM) -> None:
        if prefill_quantum < 1:
            raise ValueError(f"prefill quantum must be at least 1, got {prefill_quantum}")
        self.prefill_quantum = prefill_quantum
        self._last_prefill = -1
        self._last_media = -1

    def reset(self) -> None:
        self._last_prefill = -1
        self._last_media = -1

    def plan(self, candidates: Iterable[Candidate], capacity: int) -> BatchPlan:
        if capacity < 0:
            raise ValueError(f"negative capacity {capacity}")
        decodes: list[Candidate] = []
        prefills: list[Candidate] = []
        media: list[Candidate] = []
        seen: set[int] = set()
        for candidate in candidates:
            if candidate.sequence_id in seen:
                raise ValueError(f"sequence {candidate.sequence_id} is a candidate twice")
            seen.add(candidate.sequence_id)
            if candidate.kind is WorkKind.DECODE:
                decodes.append(candidate)
            elif candidate.kind is WorkKind.PREFILL:
                if candidate.remaining:
                    prefills.append(candidate)
            else:
                media.append(candidate)

        work: list[BatchWork] = []
        left = capacity
        if decodes:
            # Sorted so the batch shape is stable and the backend can reuse its graph.
            decodes.sort(key=_by_id)
            served = decodes[:left]
            left -= len(served)
            extra = [0] * len(served)
            for index, candidate in enumerate(served):
                if not left:
                    break
                extra[index] = min(candidate.draft_rows, left)
                left -= extra[index]
            work.extend(
                BatchWork(candidate.sequence_id, WorkKind.DECODE, 1 + more)
                for candidate, more in zip(served, extra, strict=True)
            )

        if prefills and left:
            prefills.sort(key=_by_id)
            start = _next_after(prefills, self._last_prefill)
            order = prefills[start:] + prefills[:start]
            given = [0] * len(order)
            quantum = self.prefill_quantum
            hungry = True
            while left and hungry:
                hungry = False
                for index, candidate in enumerate(order):
                    want = candidate.remaining - given[index]
                    if want <= 0:
                        continue
                    take = min(quantum, want, left)
                    given[index] += take
                    left -= take
                    if want > take:
                        hungry = True
                    if not left:
                        break
            self._last_prefill = order[0].sequence_id
            work.extend(
                BatchWork(candidate.sequence_id, WorkKind.PREFILL, n)
                for candidate, n in zip(order, given, strict=True)
                if n
            )

        media_work: BatchWork | None = None
        if media:
            media.sort(key=_by_id)
            chosen = media[_next_after(media, self._last_media)]
            self._last_media = chosen.sequence_id
            media_work = BatchWork(chosen.sequence_id, WorkKind.MEDIA, chosen.remaining)
        return BatchPlan(tuple(work), media_work)


def _by_id(candidate: Candidate) -> int:
    return candidate.sequence_id


def _next_after(ordered: Sequence[Candidate], last_id: int) -> int:
    """Index of the first candidate with an id after ``last_id``, wrapping to 0."""
    for index, candidate in enumerate(ordered):
        if candidate.sequence_id > last_id:
            return index
    return 0


# -------------------------------------------------------------------------- progress


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


# ---------------------------------------------------------------------- batch commits


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
