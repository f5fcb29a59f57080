"""A parsed document cut into chunks by the embedder's own tokens. Pure: no llama.cpp here,
only the ``count_tokens`` it is given.

Each section is cut into units, the smallest pieces a cut may fall between: sentences (lines,
for code), with the paragraph breaks between them remembered. A unit longer than a chunk is
cut finer: a giant sentence into lines, then words, a giant word (a URL, base64) into runs of
characters. Each unit is counted once; chunks are packed greedily from the units' counts,
and each chunk, when full, ends at the strongest boundary in its second half (a paragraph
break before a sentence end, a sentence end before a line end, ...). The packed chunk is
counted once more, since subword counts do not add exactly (two pieces may count more
together than apart): a chunk over the limit by the real count gives back its last unit.

The next chunk begins with the previous one's tail units, about ``overlap`` of the limit in
tokens, so that a passage cut in two is whole in one of them. Chunks never cross a section,
so never a page or a heading; their offsets are into the document's full text
(``full_text(doc)[chunk.start:chunk.end] == chunk.text``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate

from engine.documents.document import DocumentKind, ParsedDocument, Section, full_text

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_OVERLAP",
    "MIN_MAX_TOKENS",
    "Chunk",
    "chunk_document",
    "full_text",
]

# At most this many of the embedder's tokens per chunk (special tokens not counted): well
# inside MiniLM's 512 positions, and a passage small enough for a citation to point at.
DEFAULT_MAX_TOKENS = 256
# The share of the limit carried over from one chunk's end to the next one's start.
DEFAULT_OVERLAP = 0.15
# Below this, one character could be more tokens than a chunk holds (a byte-level BPE
# spends up to four on one character).
MIN_MAX_TOKENS = 4
# Whole sentences carried as the overlap may miss the tokens asked by this share of them
# (over or under); further off, the overlap is cut from the last sentence's words instead.
_OVERLAP_TOLERANCE = 0.25


@dataclass(frozen=True)
class Chunk:
    """``start``/``end``: offsets in the document's full text; ``tokens``: the embedder's
    count of ``text`` (no special tokens)."""

    ordinal: int
    text: str
    page: int | None
    heading: str
    start: int
    end: int
    tokens: int


class _Boundary(enum.IntEnum):
    """What separates a unit from the one before it: the stronger, the better a place to cut."""

    CHARACTER = 0
    WORD = 1
    LINE = 2
    SENTENCE = 3
    PARAGRAPH = 4


@dataclass(frozen=True)
class _Unit:
    start: int  # offsets in the section's text
    end: int
    tokens: int
    boundary: _Boundary


_PARAGRAPH_BREAK = re.compile(r"\n[ \t\f\v]*\n\s*")
# A sentence ends at . ! ? … (closing quotes and brackets kept with it) before whitespace, or
# at the CJK full stops, which need no space after them.
_SENTENCE_END = re.compile(r"[.!?…]+['\"”’)\]»]*(?=\s)|[。！？]+[」』”’)]*")
_LINE_END = re.compile(r"\n")
_WORD = re.compile(r"\S+")


def _pieces(text: str, start: int, end: int, cuts: re.Pattern[str]) -> list[tuple[int, int]]:
    """``text[start:end]`` cut after each match of ``cuts``, each piece without its outer
    whitespace, empty ones dropped."""
    pieces = []
    position = start
    for match in cuts.finditer(text, start, end):
        pieces.append((position, match.end()))
        position = match.end()
    pieces.append((position, end))
    trimmed = []
    for a, b in pieces:
        piece = text[a:b]
        stripped = piece.strip()
        if stripped:
            a += len(piece) - len(piece.lstrip())
            trimmed.append((a, a + len(stripped)))
    return trimmed


class _Cutter:
    def __init__(self, text: str, count_tokens: Callable[[str], int], max_tokens: int, code: bool) -> None:
        self.text = text
        self.count = count_tokens
        self.max_tokens = max_tokens
        # Finer and finer: the pattern each level cuts after, and the boundary it makes.
        self.levels: list[tuple[re.Pattern[str], _Boundary]] = (
            [(_LINE_END, _Boundary.LINE)]
            if code
            else [(_SENTENCE_END, _Boundary.SENTENCE), (_LINE_END, _Boundary.LINE)]
        )

    def units(self) -> list[_Unit]:
        units: list[_Unit] = []
        for a, b in _pieces(self.text, 0, len(self.text), _PARAGRAPH_BREAK):
            self._split(a, b, 0, _Boundary.PARAGRAPH, units)
        return units

    def _split(
        self,
        start: int,
        end: int,
        level: int,
        boundary: _Boundary,
        out: list[_Unit],
        tokens: int | None = None,
    ) -> None:
        """``tokens``: the span's count when already known (over the limit)."""
        pattern, inner = self.levels[level]
        pieces = _pieces(self.text, start, end, pattern)
        for index, (a, b) in enumerate(pieces):
            first = boundary if index == 0 else inner
            # A level that does not cut the span (one giant line) need not count it again.
            count = tokens if tokens is not None and len(pieces) == 1 else self.count(self.text[a:b])
            if count <= self.max_tokens:
                out.append(_Unit(a, b, count, first))
            elif level + 1 < len(self.levels):
                self._split(a, b, level + 1, first, out, count)
            else:
                self._words(a, b, first, out, count)

    def _words(self, start: int, end: int, boundary: _Boundary, out: list[_Unit], tokens: int) -> None:
        words = list(_WORD.finditer(self.text, start, end))
        for index, match in enumerate(words):
            first = boundary if index == 0 else _Boundary.WORD
            a, b = match.span()
            count = tokens if len(words) == 1 else self.count(self.text[a:b])
            if count <= self.max_tokens:
                out.append(_Unit(a, b, count, first))
            else:
                self._characters(a, b, count, first, out)

    def _characters(self, start: int, end: int, tokens: int, boundary: _Boundary, out: list[_Unit]) -> None:
        """A giant word in runs of characters, each sized from the characters per token of
        the run before it (the word's own at first), aiming at 90% of the limit: each run is
        counted about once, not searched for."""
        chars_per_token = (end - start) / max(1, tokens)
        position = start
        while position < end:
            size = min(end - position, max(1, int(self.max_tokens * chars_per_token * 0.9)))
            count = self.count(self.text[position : position + size])
            while count > self.max_tokens and size > 1:
                size = max(1, min(size - 1, int(size * self.max_tokens / count * 0.9)))
                count = self.count(self.text[position : position + size])
            out.append(_Unit(position, position + size, count, boundary))
            boundary = _Boundary.CHARACTER
            position += size
            if count > 0:
                chars_per_token = size / count


def _best_cut(units: list[_Unit], sums: list[int], base: int, new: int, full: int, max_tokens: int) -> int:
    """Where a full chunk should end (it holds ``base + sums[cut]`` tokens when cut before
    unit ``cut``): after unit ``new`` at least, at the strongest boundary that leaves it at
    least half full, the latest of equals; ``full`` (all that fit) when no boundary does."""
    best, best_strength = full, -1
    for cut in range(new + 1, full + 1):
        if cut != full and base + sums[cut] < max_tokens / 2:
            continue
        strength = units[cut].boundary
        if strength >= best_strength:
            best, best_strength = cut, strength
    return best


@dataclass(frozen=True)
class _Lead:
    """The overlap a chunk begins with: the previous chunk's tail from ``start``."""

    start: int
    tokens: int


class _Packer:
    def __init__(
        self, text: str, units: list[_Unit], count_tokens: Callable[[str], int], max_tokens: int, target: int
    ) -> None:
        self.text = text
        self.units = units
        self.sums = [0, *accumulate(unit.tokens for unit in units)]
        self.count = count_tokens
        self.max_tokens = max_tokens
        self.target = target

    def chunks(self) -> list[tuple[int, int, int]]:
        units, sums, limit = self.units, self.sums, self.max_tokens
        chunks: list[tuple[int, int, int]] = []
        new = 0  # the first unit no chunk holds yet
        lead: _Lead | None = None
        while new < len(units):
            # The overlap gives way when it and the next unit do not fit together.
            if lead is not None and lead.tokens + units[new].tokens > limit:
                lead = None
            base = (lead.tokens if lead else 0) - sums[new]
            full = new
            while full < len(units) and base + sums[full + 1] <= limit:
                full += 1
            cut = len(units) if full == len(units) else _best_cut(units, sums, base, new, full, limit)
            while True:
                start = lead.start if lead else units[new].start
                end = units[cut - 1].end
                # One unit alone is its own count already.
                alone = lead is None and cut == new + 1
                tokens = units[new].tokens if alone else self.count(self.text[start:end])
                if tokens <= limit:
                    break
                # Counted together, the pieces are more than their sum: give back the last
                # unit, or the overlap when one new unit is left (one unit alone fits).
                if cut - 1 > new:
                    cut -= 1
                elif lead is not None:
                    lead = None
                else:  # pragma: no cover - a unit's text is its own count, within the limit
                    break
            chunks.append((start, end, tokens))
            if cut < len(units):
                lead = self._lead(new, cut)
            new = cut
        return chunks

    def _lead(self, new: int, cut: int) -> _Lead | None:
        """The next chunk's overlap, from the tail of units ``new..cut`` (what the chunk
        just made added; never all of it): the whole units closest to the target when they
        come within ``_OVERLAP_TOLERANCE`` of it, else the last words up to it."""
        target, sums = self.target, self.sums
        if target <= 0:
            return None
        best: int | None = None
        best_distance = target
        for start in range(cut - 1, new, -1):
            tokens = sums[cut] - sums[start]
            if tokens > target * (1 + _OVERLAP_TOLERANCE):
                break
            if abs(tokens - target) <= best_distance:
                best, best_distance = start, abs(tokens - target)
        if best is not None and best_distance <= target * _OVERLAP_TOLERANCE:
            return _Lead(self.units[best].start, sums[cut] - sums[best])
        partial = self._partial_lead(new, cut)
        if partial is not None:
            return partial
        return _Lead(self.units[best].start, sums[cut] - sums[best]) if best is not None else None

    def _partial_lead(self, new: int, cut: int) -> _Lead | None:
        """The tail words of the unit the target falls in, with the whole units after it."""
        target, sums = self.target, self.sums
        straddling = cut - 1
        while straddling > new and sums[cut] - sums[straddling] <= target:
            straddling -= 1
        after = sums[cut] - sums[straddling + 1]
        unit = self.units[straddling]
        need = target - after
        if need <= 0 or unit.tokens <= 0:
            return None
        words = [match.start() for match in _WORD.finditer(self.text, unit.start, unit.end)]
        take = round(len(words) * need / unit.tokens)
        if take <= 0 or take >= len(words):
            return None
        tokens = self.count(self.text[words[-take] : unit.end])
        if tokens > need * (1 + _OVERLAP_TOLERANCE) and take > 1:
            # Its last words are denser than the sentence: one more guess, from their own rate.
            take = max(1, round(take * need / tokens))
            tokens = self.count(self.text[words[-take] : unit.end])
        return _Lead(words[-take], tokens + after)


def _section_chunks(
    section: Section, count_tokens: Callable[[str], int], max_tokens: int, overlap_tokens: int, code: bool
) -> list[tuple[int, int, int]]:
    """``(start, end, tokens)`` of each chunk of one section, offsets in the section's text."""
    text = section.text
    # Most sections of notes and Markdown fit in one chunk: one count says so.
    if len(text) <= 8 * max_tokens:
        tokens = count_tokens(text)
        if tokens <= max_tokens:
            return [(0, len(text), tokens)]
    units = _Cutter(text, count_tokens, max_tokens, code).units()
    return _Packer(text, units, count_tokens, max_tokens, overlap_tokens).chunks()


def chunk_document(
    doc: ParsedDocument,
    count_tokens: Callable[[str], int],
    max_tokens: int = DEFAULT_MAX_TOKENS,
    overlap: float = DEFAULT_OVERLAP,
) -> tuple[Chunk, ...]:
    """The document's chunks in order, each at most ``max_tokens`` by ``count_tokens``.

    Text no token stands for (zero-width characters only) makes no chunk."""
    if max_tokens < MIN_MAX_TOKENS:
        raise ValueError(f"max_tokens must be at least {MIN_MAX_TOKENS}, not {max_tokens}")
    if not 0 <= overlap < 0.5:
        raise ValueError(f"overlap must be in [0, 0.5), not {overlap}")
    overlap_tokens = round(max_tokens * overlap)
    code = doc.kind is DocumentKind.CODE
    chunks: list[Chunk] = []
    for section in doc.sections:
        for start, end, tokens in _section_chunks(section, count_tokens, max_tokens, overlap_tokens, code):
            if tokens == 0:
                continue
            chunks.append(
                Chunk(
                    ordinal=len(chunks),
                    text=section.text[start:end],
                    page=section.page,
                    heading=section.heading,
                    start=section.start + start,
                    end=section.start + end,
                    tokens=tokens,
                )
            )
    return tuple(chunks)
