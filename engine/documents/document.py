"""A parsed document as values: its kind, its sections, and the one full text they index into.

The full text is defined here, once: the sections' texts joined in order by
``SECTION_SEPARATOR``. Every offset anywhere (a section's ``start``, a chunk's ``start`` and
``end``) is a character offset into that string, so ``full_text(doc)[chunk.start:chunk.end]
== chunk.text`` and a viewer that shows ``full_text(doc)`` can highlight any excerpt.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# Between two sections in the full text: a blank line, so a section never runs into the next
# as one paragraph, and the full text reads as the document did.
SECTION_SEPARATOR = "\n\n"

# Between the parts of a heading path: "Install › Linux".
HEADING_SEPARATOR = " › "


class DocumentKind(enum.Enum):
    TEXT = "text"
    MARKDOWN = "markdown"
    CODE = "code"
    PDF = "pdf"
    DOCX = "docx"
    HTML = "html"


@dataclass(frozen=True)
class Section:
    """A run of the document's text under one heading (and on one page, for a PDF).

    ``page`` is 1-based (PDFs only, else None); ``heading`` the heading path ("A › B", "" if
    none); ``start`` the offset of ``text`` in the document's full text."""

    text: str
    page: int | None
    heading: str
    start: int

    @property
    def end(self) -> int:
        return self.start + len(self.text)


@dataclass(frozen=True)
class ParsedDocument:
    path: Path
    kind: DocumentKind
    sections: tuple[Section, ...]

    def __post_init__(self) -> None:
        # The offsets are the contract every consumer relies on: check them once, here.
        offset = 0
        for section in self.sections:
            if section.start != offset:
                raise ValueError(f"section at {section.start} should start at {offset}")
            if not section.text.strip():
                raise ValueError("a section with no text")
            offset = section.end + len(SECTION_SEPARATOR)


@dataclass(frozen=True)
class SectionDraft:
    """A section before its offset is known: what each kind's reader produces."""

    text: str
    page: int | None = None
    heading: str = ""


def full_text(doc: ParsedDocument) -> str:
    """The document's full extracted text: its sections joined by ``SECTION_SEPARATOR``."""
    return SECTION_SEPARATOR.join(section.text for section in doc.sections)


def trim_section_text(text: str) -> str:
    """Blank lines off the start and trailing whitespace off the end; a first line's
    indentation is kept (code)."""
    text = text.rstrip()
    first = 0
    for line in text.splitlines(keepends=True):
        if line.strip():
            break
        first += len(line)
    return text[first:]


def build_document(path: Path, kind: DocumentKind, drafts: Iterable[SectionDraft]) -> ParsedDocument:
    """Drafts trimmed, the empty ones dropped, the rest given their offsets."""
    sections: list[Section] = []
    offset = 0
    for draft in drafts:
        text = trim_section_text(draft.text)
        if not text:
            continue
        sections.append(Section(text=text, page=draft.page, heading=draft.heading, start=offset))
        offset += len(text) + len(SECTION_SEPARATOR)
    return ParsedDocument(path=path, kind=kind, sections=tuple(sections))


def heading_path(titles: Iterable[str]) -> str:
    return HEADING_SEPARATOR.join(title for title in titles if title)
