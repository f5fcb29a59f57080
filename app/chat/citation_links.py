"""A reply's citations as links, and the Sources under it.

A reply grounded in documents cites the excerpts it was given as ``[n]``. Before its Markdown
is rendered, each marker that cites a number it was given becomes a ``cite:n`` link (one never
given, or one inside code, stays text: ``find_citations`` decides), and the excerpts it cited
are listed under it as ``source:n`` links. Both are worked out with the render, which
``MessageDocuments`` does once per finished text: never per paint.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from app.chat.data import Source
from app.chat.markdown import MarkdownStyle
from engine import cited_numbers, find_citations

CITE_SCHEME = "cite"  # a [n] in the reply's text
SOURCE_SCHEME = "source"  # a line of the Sources list
PREVIEW_WORDS = 14  # of an excerpt, on its line in the Sources list
SOURCES_TITLE = "Sources"
NONE_CITED_TITLE = "Excerpts given (the reply cites none of them)"


def source_number(href: str) -> int | None:
    """The excerpt a ``cite:n`` or ``source:n`` link points at (None for any other link)."""
    scheme, _, rest = href.partition(":")
    if scheme not in (CITE_SCHEME, SOURCE_SCHEME) or not rest.isdigit():
        return None
    return int(rest)


def linked_citations(text: str, given: Sequence[int]) -> str:
    """``text`` (Markdown) with each cited number that was ``given`` made a ``cite:n`` link."""
    out: list[str] = []
    pos = 0
    for citation in find_citations(text, given):
        out.append(text[pos : citation.start])
        out.append(_linked_marker(text[citation.start : citation.end], set(citation.numbers)))
        pos = citation.end
    out.append(text[pos:])
    return "".join(out)


def _linked_marker(marker: str, numbers: set[int]) -> str:
    inner = marker[1:-1]
    if inner.strip().isdigit():  # [3]: the whole marker is the link
        return f"[\\[{inner.strip()}\\]]({CITE_SCHEME}:{inner.strip()})"
    # [1, 7]: each number given is a link of its own, brackets and the rest plain.
    parts = re.split(r"(\d+)", inner)
    linked = "".join(f"[{p}]({CITE_SCHEME}:{p})" if p.isdigit() and int(p) in numbers else p for p in parts)
    return f"\\[{linked}\\]"


def preview(text: str, words: int = PREVIEW_WORDS) -> str:
    """The first words of an excerpt, on one line (Markdown heading marks left out)."""
    split = re.sub(r"(?m)^\s*#{1,6}\s+", "", text).split()
    return " ".join(split[:words]) + ("…" if len(split) > words else "")


def cited_sources(text: str, sources: Sequence[Source]) -> list[Source]:
    """The sources ``text`` cites, in the order it first cites them."""
    by_number = {s.n: s for s in sources}
    return [by_number[n] for n in cited_numbers(text, list(by_number))]


def sources_html(text: str, sources: Sequence[Source], note: str, style: MarkdownStyle) -> str:
    """What goes under a reply's text: the note about its documents, and the Sources it cites
    (every excerpt it was given when it cites none: what it was asked to answer from)."""
    parts = []
    small = "font-size: small;"
    if note:
        parts.append(
            f'<p style="margin-top: 6px; margin-bottom: 4px; color: {style.muted}; {small}">'
            f"<i>{html.escape(note)}</i></p>"
        )
    cited = cited_sources(text, sources)
    shown = cited or list(sources)
    if shown:
        title = SOURCES_TITLE if cited else NONE_CITED_TITLE
        head = f"margin-top: 8px; margin-bottom: 3px; color: {style.muted}; {small}"
        parts.append(f'<p style="{head}"><b>{title}</b></p>')
        for source in shown:
            href = f"{SOURCE_SCHEME}:{source.n}"
            parts.append(
                f'<p style="margin-top: 0px; margin-bottom: 3px; {small}">'
                f'<a href="{href}" style="color: {style.link}; text-decoration: none;">'
                f"[{source.n}] {html.escape(source.label(short=True))}</a>"
                f'<a href="{href}" style="color: {style.muted}; text-decoration: none;">'
                f" — {html.escape(preview(source.text))}</a></p>"
            )
    return "".join(parts)
