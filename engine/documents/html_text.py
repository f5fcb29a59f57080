"""HTML as text with sections at its headings (h1–h6), by the standard library's parser.

Scripts, styles and other non-content elements are dropped; block elements end a line,
paragraph-like ones a paragraph; whitespace collapses as a browser collapses it, except in
``<pre>``. The ``<title>`` heads whatever comes before the first heading.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from engine.documents.document import SectionDraft, heading_path

_HIDDEN = frozenset({"script", "style", "noscript", "template", "svg", "math", "iframe", "object"})
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
# Elements after which the text starts a new paragraph (a blank line).
_PARAGRAPHS = frozenset(
    {
        "p", "div", "section", "article", "main", "aside", "header", "footer", "nav", "blockquote",
        "pre", "table", "ul", "ol", "dl", "figure", "figcaption", "form", "fieldset", "details",
        "summary", "hr", "address",
    }
)  # fmt: skip
# Elements after which the text starts a new line.
_LINES = frozenset({"br", "li", "tr", "dt", "dd", "caption", "option", "legend"})
_CELLS = frozenset({"td", "th"})
# Void elements never get an end tag, so they cannot open a hidden region.
_VOID = frozenset(
    {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "wbr"}
)
_SPACES = re.compile(r"[ \t\n\r\f\v]+")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


def declared_charset(data: bytes) -> str | None:
    """The ``<meta charset>`` (or http-equiv content type) in the first 4 KiB, if any."""
    match = _META_CHARSET.search(data[:4096])
    return match.group(1).decode("ascii").lower() if match else None


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title = ""
        self._in_title = False
        self._hidden: list[str] = []  # the hidden elements open, innermost last
        self._pre = 0
        self._heading_level: int | None = None
        self._heading_words: list[str] = []
        self._stack: list[tuple[int, str]] = []
        self._current_heading: str | None = None  # None: before the first h1-h6
        self._parts: list[str] = []  # the current section's text as it grows
        self._body_from = 0  # where in _parts the text under the current heading begins
        self._sections: list[tuple[str, str | None]] = []  # (text, heading path or None: before any)

    # The parser's callbacks.
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._hidden:
            if tag in _HIDDEN and tag not in _VOID:
                self._hidden.append(tag)
            return
        if tag == "title":
            self._in_title = True
        elif tag in _HIDDEN:
            self._hidden.append(tag)
        elif tag in _HEADINGS:
            self._start_heading(_HEADINGS[tag])
        elif tag == "pre":
            self._pre += 1
            self._break("\n\n")
        elif tag in _PARAGRAPHS:
            self._break("\n\n")
        elif tag in _LINES:
            self._break("\n")
        elif tag in _CELLS:
            # Cells of a row on one line, between bars.
            if self._parts and not self._parts[-1].endswith("\n"):
                self._parts[-1] = self._parts[-1].rstrip(" ")
                self._parts.append(" | ")
        elif tag == "img":
            alt = dict(attrs).get("alt")
            if alt:
                self._text(f" {alt} ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._hidden:
            if tag in self._hidden:
                # Close it and anything left unclosed inside it.
                del self._hidden[len(self._hidden) - 1 - self._hidden[::-1].index(tag) :]
            return
        if tag == "title":
            self._in_title = False
        elif tag in _HEADINGS and self._heading_level is not None:
            self._end_heading()
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)
            self._break("\n\n")
        elif tag in _PARAGRAPHS:
            self._break("\n\n")
        elif tag in _LINES:
            self._break("\n")

    def handle_data(self, data: str) -> None:
        if self._hidden:
            return
        if self._in_title:
            self.title += data
            return
        if self._heading_level is not None:
            self._heading_words.append(data)
        if self._pre:
            self._parts.append(data)
        else:
            self._text(data)

    # The section being built.
    def _text(self, data: str) -> None:
        text = _SPACES.sub(" ", data)
        if not text:
            return
        if text.startswith(" ") and (not self._parts or self._parts[-1].endswith((" ", "\n"))):
            text = text[1:]
        if text:
            self._parts.append(text)

    def _trailing_newlines(self) -> int:
        count = 0
        for part in reversed(self._parts):
            count += len(part) - len(part.rstrip("\n"))
            if part.strip("\n"):
                break
        return count

    def _break(self, separator: str) -> None:
        if not self._parts:
            return
        self._parts[-1] = self._parts[-1].rstrip(" ")
        newlines = self._trailing_newlines()
        if newlines < len(separator):
            self._parts.append("\n" * (len(separator) - newlines))

    def _start_heading(self, level: int) -> None:
        if self._heading_level is not None:
            self._end_heading()
        self._flush()
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        self._heading_level = level
        self._heading_words = []

    def _end_heading(self) -> None:
        title = " ".join("".join(self._heading_words).split())
        assert self._heading_level is not None
        self._stack.append((self._heading_level, title))
        self._current_heading = heading_path(t for _, t in self._stack)
        self._heading_level = None
        self._break("\n\n")
        self._body_from = len(self._parts)

    def _flush(self) -> None:
        # A heading with nothing under it before the next one is no section of its own: its
        # title lives on in the path of what follows (as in Markdown).
        if "".join(self._parts[self._body_from :]).strip():
            self._sections.append(("".join(self._parts), self._current_heading))
        self._parts = []
        self._body_from = 0

    def finish(self) -> list[SectionDraft]:
        self.close()
        if self._heading_level is not None:
            self._end_heading()
        self._flush()
        title = " ".join(self.title.split())
        # Before the first heading, the page's title is the heading.
        return [
            SectionDraft(text=text, heading=title if heading is None else heading)
            for text, heading in self._sections
        ]


def html_sections(text: str) -> list[SectionDraft]:
    extractor = _TextExtractor()
    extractor.feed(text)
    return extractor.finish()
