"""The excerpts as the model reads them, numbered, and the citations its reply makes of them.

``prompt_block(retrieval)`` is the text put before the question: the instruction to cite by
``[n]`` and each excerpt as ``[n] file.pdf, p. 3: …``. ``find_citations(reply, given)`` finds
the markers a reply wrote (``[2]``, ``[1, 3]``, ``[1][2]``) where they are citations: a number
never given is not one (the model invented it), and neither is anything inside code (``a[1]``
in a snippet).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from engine.documents.retrieval import Excerpt, Retrieval

INSTRUCTION = (
    "Answer from the numbered excerpts below. After each statement that uses one, cite it by its "
    "number in square brackets, like [1] or [2][3]. Cite only these numbers. If the excerpts do "
    "not contain the answer, say so."
)
WHOLE_NOTE = "The documents are given whole, not as excerpts: say in the answer that you read them all."

# [3], [1, 2], [1,2;4]: digits, separated by commas or semicolons.
_MARKER = re.compile(r"\[\s*(\d{1,4}(?:\s*[,;]\s*\d{1,4})*)\s*\]")
# Fenced blocks (``` or ~~~, to the closing fence or the end) and inline code spans.
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?(?:^[ \t]*\1[ \t]*$|\Z)", re.DOTALL | re.MULTILINE)
_INLINE = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.DOTALL)


def excerpt_label(excerpt: Excerpt) -> str:
    """Where an excerpt comes from, in a few words: "report.pdf, p. 3", "notes.md, Setup › Linux"."""
    label = excerpt.path.name
    if excerpt.page is not None:
        if excerpt.last_page is not None and excerpt.last_page != excerpt.page:
            label += f", pp. {excerpt.page}–{excerpt.last_page}"
        else:
            label += f", p. {excerpt.page}"
    if excerpt.heading:
        label += f", {excerpt.heading}"
    return label


def prompt_block(retrieval: Retrieval) -> str:
    """The instruction and the numbered excerpts; "" when there are none."""
    if not retrieval.excerpts:
        return ""
    parts = [INSTRUCTION + (" " + WHOLE_NOTE if retrieval.whole else "")]
    parts += [f"[{e.n}] {excerpt_label(e)}: {e.text}" for e in retrieval.excerpts]
    return "\n\n".join(parts)


@dataclass(frozen=True)
class Citation:
    """One marker in a reply: its span in the text and the given numbers it cites."""

    start: int
    end: int
    numbers: tuple[int, ...]


def _code_spans(text: str) -> list[tuple[int, int]]:
    spans = [m.span() for m in _FENCE.finditer(text)]
    masked = list(text)
    for start, end in spans:
        masked[start:end] = " " * (end - start)
    spans += [m.span() for m in _INLINE.finditer("".join(masked))]
    return spans


def find_citations(reply: str, given: Iterable[int]) -> list[Citation]:
    """The reply's citation markers, in order, each with only the numbers that were given;
    markers inside code, or citing nothing that was given, are left out."""
    allowed = set(given)
    code = _code_spans(reply)
    found = []
    for match in _MARKER.finditer(reply):
        if any(start <= match.start() < end for start, end in code):
            continue
        numbers = tuple(int(n) for n in re.split(r"\s*[,;]\s*", match.group(1)))
        kept = tuple(dict.fromkeys(n for n in numbers if n in allowed))
        if kept:
            found.append(Citation(match.start(), match.end(), kept))
    return found


def cited_numbers(reply: str, given: Iterable[int]) -> list[int]:
    """The given numbers the reply cites, each once, in the order it first cites them."""
    return list(dict.fromkeys(n for c in find_citations(reply, given) for n in c.numbers))
