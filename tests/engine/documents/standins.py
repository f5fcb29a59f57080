"""Small stand-ins for parsing, chunking and scanning, so the index's tests do not depend on the
real readers: a file is its paragraphs (blank-line separated), each paragraph one chunk.

They keep the real contract's shapes: sections and chunks with pages, headings and character
offsets into the full text (sections joined by a blank line), a refusal with a one-line
``reason``, and a scan that returns ``files`` and ``refusals``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.base.errors import EngineError

SEPARATOR = "\n\n"
SUFFIXES = (".txt", ".md")


class Refused(EngineError):
    def __init__(self, path: Path, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{self.path.name}: {reason}")


@dataclass(frozen=True)
class Section:
    text: str
    page: int | None
    heading: str
    start: int


@dataclass(frozen=True)
class Doc:
    path: Path
    sections: tuple[Section, ...]


@dataclass(frozen=True)
class Piece:
    ordinal: int
    text: str
    page: int | None
    heading: str
    start: int
    end: int
    tokens: int


@dataclass(frozen=True)
class ScanResult:
    files: tuple[Path, ...]
    refusals: tuple[Refused, ...]


def parse(path: Path) -> Doc:
    data = Path(path).read_bytes()
    if b"\0" in data:
        raise Refused(path, "binary file, not text")
    text = data.decode("utf-8")
    sections, offset = [], 0
    page = None
    heading = ""
    for block in text.split(SEPARATOR):
        block = block.strip("\n")
        if not block.strip():
            continue
        # "[page 3]" alone starts a page, "# Title" a heading: enough to test both fields.
        if block.startswith("[page ") and block.endswith("]"):
            page = int(block[6:-1])
            continue
        if block.startswith("# "):
            heading = block[2:]
        sections.append(Section(block, page, heading, offset))
        offset += len(block) + len(SEPARATOR)
    if not sections:
        raise Refused(path, "empty document")
    return Doc(Path(path), tuple(sections))


def chunk(
    doc: Doc, count_tokens: Callable[[str], int], max_tokens: int = 64, overlap: float = 0.0
) -> tuple[Piece, ...]:
    return tuple(
        Piece(i, s.text, s.page, s.heading, s.start, s.start + len(s.text), count_tokens(s.text))
        for i, s in enumerate(doc.sections)
    )


def scan(paths: Sequence[Path]) -> ScanResult:
    files: list[Path] = []
    refusals: list[Refused] = []
    for path in paths:
        path = Path(path)
        if path.is_dir():
            for folder, dirs, names in os.walk(path):
                dirs.sort()
                files += [Path(folder) / n for n in sorted(names) if n.endswith(SUFFIXES)]
        elif path.is_file():
            files.append(path)
        else:
            refusals.append(Refused(path, "not found"))
    return ScanResult(tuple(files), tuple(refusals))


def make_index(db: Path, **kwargs: object):  # type: ignore[no-untyped-def]
    from engine.documents.index import DocumentIndex

    return DocumentIndex(db, parse=parse, chunk=chunk, scan=scan, **kwargs)  # type: ignore[arg-type]


def write_doc(path: Path, paragraphs: Sequence[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SEPARATOR.join(paragraphs), encoding="utf-8")
    return path


def paragraphs_of(name: str, n: int) -> list[str]:
    """``n`` distinct paragraphs for the file ``name``: every one embeds to its own vector."""
    return [f"Paragraph {i} of {name}: the {name} notes talk about subject{i} and item{i}." for i in range(n)]
