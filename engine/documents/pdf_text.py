"""A PDF's text layer, one section per page, by PDFium (pypdfium2).

A PDF with pages but no text on any of them is a scan: refused, since there is nothing to
index without OCR. A password-protected PDF is refused as encrypted, told apart from a
damaged one by PDFium's own error code. PDFium is not thread-safe, and the window indexes
on worker threads: every call into it holds one lock.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import BinaryIO

from engine.documents.document import SectionDraft
from engine.documents.errors import DocumentRefused
from engine.documents.text_decoding import normalize_newlines

_PDFIUM_LOCK = threading.Lock()

# PDFium's FPDF_GetLastError codes (fpdfview.h).
_ERR_FORMAT = 3
_ERR_PASSWORD = 4
_ERR_SECURITY = 5

# What PDFium's text extraction leaves that is not text: soft-hyphen marks (U+0002, U+FFFE)
# at line-end hyphenation, NULs, other controls.
_NOT_TEXT = re.compile("[\x00-\x08\x0b\x0e-\x1f\ufffe\uffff]")


def _error_code(error: Exception) -> int | None:
    code = getattr(error, "err_code", None)
    if isinstance(code, int):
        return code
    message = str(error).lower()
    if "password" in message:
        return _ERR_PASSWORD
    if "security" in message:
        return _ERR_SECURITY
    return None


def _open_reason(error: Exception) -> str:
    code = _error_code(error)
    if code == _ERR_PASSWORD:
        return "encrypted PDF: Hearth cannot read password-protected files"
    if code == _ERR_SECURITY:
        return "encrypted PDF: its security handler is not supported"
    if code == _ERR_FORMAT:
        return "damaged PDF: not a PDF, or its structure is broken"
    return f"damaged PDF: {error}"


# A word hyphenated at a line's end: PDFium marks the hyphen (U+0002 or U+FFFE) before the
# break; the word is joined again.
_LINE_END_HYPHEN = re.compile("[\x02\ufffe]\r?\n")
# A gap between two lines taller than this share of a line's height starts a paragraph.
_PARAGRAPH_GAP = 0.8


def page_text(raw: str) -> str:
    raw = _LINE_END_HYPHEN.sub("", raw)
    text = _NOT_TEXT.sub("", normalize_newlines(raw.replace("\x0c", "\n")))
    return "\n".join(line.rstrip() for line in text.split("\n"))


def _visual_lines(textpage: object) -> list[tuple[float, float]]:
    """``(bottom, top)`` of each line of text on the page, top to bottom as PDFium orders
    its text: its rectangles merged where they share a line."""
    lines: list[tuple[float, float]] = []
    for index in range(textpage.count_rects()):  # type: ignore[attr-defined]
        _left, bottom, _right, top = textpage.get_rect(index)  # type: ignore[attr-defined]
        if lines and bottom < lines[-1][1] and top > lines[-1][0]:
            lines[-1] = (min(bottom, lines[-1][0]), max(top, lines[-1][1]))
        else:
            lines.append((bottom, top))
    return lines


def with_paragraphs(text: str, lines: list[tuple[float, float]]) -> str:
    """``text`` with a blank line where the page leaves a paragraph's gap between two lines.
    PDF has no paragraphs, only glyphs at positions; when PDFium's lines and its rectangles
    do not pair one to one (columns, overlaps), the text is left as it came."""
    text_lines = text.split("\n")
    if len(text_lines) != len(lines) or len(lines) < 2:
        return text
    heights = sorted(top - bottom for bottom, top in lines)
    height = heights[len(heights) // 2]
    if height <= 0:
        return text
    out = [text_lines[0]]
    for index in range(1, len(lines)):
        gap = lines[index - 1][0] - lines[index][1]
        out.append("\n\n" if gap > _PARAGRAPH_GAP * height else "\n")
        out.append(text_lines[index])
    return "".join(out)


def pdf_sections(path: Path, file: BinaryIO) -> list[SectionDraft]:
    """``file``: the PDF, opened and checked (a regular file, within the size limit): PDFium
    reads that very file, not whatever the path names by then."""
    import pypdfium2

    with _PDFIUM_LOCK:
        try:
            pdf = pypdfium2.PdfDocument(file)
        except pypdfium2.PdfiumError as error:
            raise DocumentRefused(path, _open_reason(error)) from None
        try:
            count = len(pdf)
            if count == 0:
                raise DocumentRefused(path, "empty document: a PDF without pages")
            drafts: list[SectionDraft] = []
            for index in range(count):
                try:
                    page = pdf[index]
                    try:
                        textpage = page.get_textpage()
                        try:
                            text = with_paragraphs(
                                page_text(textpage.get_text_bounded()), _visual_lines(textpage)
                            )
                        finally:
                            textpage.close()
                    finally:
                        page.close()
                except pypdfium2.PdfiumError as error:
                    raise DocumentRefused(path, f"damaged PDF: page {index + 1}: {error}") from None
                drafts.append(SectionDraft(text=text, page=index + 1))
            if not any(draft.text.strip() for draft in drafts):
                pages = "its page" if count == 1 else f"any of its {count} pages"
                if not _has_images(pypdfium2, pdf):
                    raise DocumentRefused(path, f"empty document: no text on {pages}")
                raise DocumentRefused(path, f"scanned PDF: no text layer on {pages}")
        finally:
            pdf.close()
    return drafts


def _has_images(pypdfium2: object, pdf: object) -> bool:
    """Whether any page shows an image: no text and no images is a blank PDF, not a scan."""
    image = pypdfium2.raw.FPDF_PAGEOBJ_IMAGE  # type: ignore[attr-defined]
    for index in range(len(pdf)):  # type: ignore[arg-type]
        page = pdf[index]  # type: ignore[index]
        try:
            if next(iter(page.get_objects(filter=[image])), None) is not None:
                return True
        finally:
            page.close()
    return False
