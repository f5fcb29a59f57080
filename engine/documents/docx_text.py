"""A Word document's text: paragraphs and tables in order, sections at its headings.

A DOCX is a zip archive, and a zip can unpack to far more than it weighs (a "zip bomb"):
the archive's directory is checked first, before python-docx opens anything. The sizes it
declares are the most that can come out: Python's zipfile stops a member at its declared
size (and fails its CRC check when the data goes on), so checking the declared sizes bounds
what python-docx could ever unpack. Its XML is parsed without resolving entities, so no
"billion laughs" either.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from engine.base.units import format_bytes
from engine.documents.document import SectionDraft, heading_path
from engine.documents.errors import DocumentRefused

# A DOCX's members: a real one has tens (hundreds with many images).
MAX_MEMBERS = 10_000
# All members unpacked, together (images included).
MAX_UNPACKED_BYTES = 512 * 1024 * 1024
# One member unpacked: the XML python-docx parses is held in memory several times over.
MAX_MEMBER_BYTES = 128 * 1024 * 1024
# Word's XML deflates 5–30×; a run of zeros 1000×. A member above the ratio and above the
# small size where ratios mean nothing is a bomb, whatever its total.
MAX_RATIO = 100
RATIO_FLOOR_BYTES = 1024 * 1024

_BOMB = "DOCX too large when unpacked (zip bomb?)"
_HEADING_STYLE = re.compile(r"^heading ([1-9])$", re.IGNORECASE)


def check_archive(path: Path, file: BinaryIO) -> None:
    """Refuse a DOCX whose zip directory promises too much, before it is unpacked."""
    try:
        with zipfile.ZipFile(file) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as error:
        raise DocumentRefused(path, f"damaged DOCX: not a readable zip archive ({error})") from None
    if len(members) > MAX_MEMBERS:
        raise DocumentRefused(path, f"{_BOMB}: {len(members):,} parts (at most {MAX_MEMBERS:,})")
    total = 0
    for member in members:
        total += member.file_size
        if member.file_size > MAX_MEMBER_BYTES:
            raise DocumentRefused(
                path,
                f"{_BOMB}: {member.filename} unpacks to {format_bytes(member.file_size)} "
                f"(at most {format_bytes(MAX_MEMBER_BYTES)})",
            )
        packed = max(1, member.compress_size)
        if member.file_size > RATIO_FLOOR_BYTES and member.file_size > MAX_RATIO * packed:
            ratio = member.file_size // packed
            raise DocumentRefused(
                path, f"{_BOMB}: {member.filename} unpacks to {ratio:,} times its packed size"
            )
    if total > MAX_UNPACKED_BYTES:
        raise DocumentRefused(
            path, f"{_BOMB}: {format_bytes(total)} in all (at most {format_bytes(MAX_UNPACKED_BYTES)})"
        )


def _heading_level(paragraph: object) -> int | None:
    style = getattr(paragraph, "style", None)
    name = getattr(style, "name", None) or ""
    # "Title" and "Heading 1" are both level 1: a Title is one document's one top heading,
    # and nesting every Heading 1 under it would only lengthen every path.
    if name.lower() == "title":
        return 1
    match = _HEADING_STYLE.match(name)
    return int(match.group(1)) if match else None


def _table_lines(table: object) -> Iterator[str]:
    for row in table.rows:  # type: ignore[attr-defined]
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            # A merged cell comes back once per grid column it spans: keep it once.
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            text = " ".join(cell.text.split())
            if text:
                cells.append(text)
            for nested in cell.tables:
                cells.extend(_table_lines(nested))
        if cells:
            yield " | ".join(cells)


def _blocks(document: object) -> list[tuple[str, int | None]]:
    """The body in order: each paragraph's text with its heading level (None: not a
    heading), each table as its rows' lines (never a heading)."""
    from docx.table import Table

    blocks: list[tuple[str, int | None]] = []
    for block in document.iter_inner_content():  # type: ignore[attr-defined]
        if isinstance(block, Table):
            blocks.append(("\n".join(_table_lines(block)), None))
        else:
            blocks.append((block.text.strip(), _heading_level(block)))
    return blocks


def _damaged(error: Exception) -> str:
    message = str(error).strip()
    return f"damaged DOCX: {message.splitlines()[0][:200] if message else type(error).__name__}"


def docx_sections(path: Path, file: BinaryIO) -> list[SectionDraft]:
    check_archive(path, file)
    file.seek(0)
    import docx

    try:
        blocks = _blocks(docx.Document(file))
    except Exception as error:  # python-docx raises whatever its parts raise (KeyError, lxml, ValueError)
        raise DocumentRefused(path, _damaged(error)) from None

    drafts: list[SectionDraft] = []
    stack: list[tuple[int, str]] = []
    heading = ""
    lines: list[str] = []
    has_body = False
    for text, level in blocks:
        if not text:
            continue
        if level is None:
            lines.append(text)
            has_body = True
            continue
        # A heading with nothing under it before the next one is no section of its own:
        # its title lives on in the path of what follows.
        if has_body:
            drafts.append(SectionDraft(text="\n\n".join(lines), heading=heading))
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, " ".join(text.split())))
        heading = heading_path(t for _, t in stack)
        lines, has_body = [text], False
    if has_body or (not drafts and lines):
        # (Headings and nothing else: the headings are the text.)
        drafts.append(SectionDraft(text="\n\n".join(lines), heading=heading))
    return drafts
