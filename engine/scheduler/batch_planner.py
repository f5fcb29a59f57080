"""The batch planner: decode rows first, then prefill quanta round-robin."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from engine.scheduler.limits import DEFAULT_PREFILL_QUANTUM


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
    - Output rows (rows with logits) are bounded too, by ``max_outputs``: llama.cpp
      reserves logits for ``n_outputs_max`` rows and aborts on a batch that asks for more.
      A decode's rows all have logits; a prefill has at most one (its prompt's last
      token). Draft rows are cut first, so ``decode rows + prefill items <= max_outputs``
      holds whenever ``max_outputs`` is at least the number of sequences.
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

    def plan(
        self, candidates: Iterable[Candidate], capacity: int, max_outputs: int | None = None
    ) -> BatchPlan:
        """``capacity`` rows (n_batch), of which at most ``max_outputs`` with logits."""
        if capacity < 0:
            raise ValueError(f"negative capacity {capacity}")
        if max_outputs is not None and max_outputs < 0:
            raise ValueError(f"negative output limit {max_outputs}")
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
            if max_outputs is not None:
                served = served[:max_outputs]
            left -= len(served)
            # Draft rows have logits: leave one output for each prompt that may finish.
            outputs_left = left if max_outputs is None else max_outputs - len(served) - len(prefills)
            extra = [0] * len(served)
            for index, candidate in enumerate(served):
                if left <= 0 or outputs_left <= 0:
                    break
                extra[index] = min(candidate.draft_rows, left, outputs_left)
                left -= extra[index]
                outputs_left -= extra[index]
            work.extend(
                BatchWork(candidate.sequence_id, WorkKind.DECODE, 1 + more)
                for candidate, more in zip(served, extra, strict=True)
            )

        # Each prefill item may end its prompt, which takes an output row.
        prefill_items = len(prefills) if max_outputs is None else max(0, max_outputs - len(work))
        if prefills and left and prefill_items:
            prefills.sort(key=_by_id)
            start = _next_after(prefills, self._last_prefill)
            order = (prefills[start:] + prefills[:start])[:prefill_items]
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
