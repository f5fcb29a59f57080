"""The sequence pool: which KV sequence serves a request, and what it can reuse."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from engine.scheduler.layouts import ZERO_BOUNDARY, MediaSnap, PromptBoundary, PromptLayout
from engine.scheduler.limits import SIMILARITY_THRESHOLD


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
