"""A corpus document's text, page by page, as an independent reader sees it.

The evidence of every answer is looked up here, not through engine/documents/: the test set
must not depend on the parser it is meant to judge. PDFs by pypdfium2 (what a viewer shows),
DOCX by python-docx (paragraphs and table rows in body order), HTML by the standard library's
parser (visible text, entities decoded), everything else as UTF-8 text.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path


def normalised(text: str) -> str:
    """Whitespace collapsed: a PDF breaks lines where the page is full, not where the source did."""
    return " ".join(text.split())


def page_texts(path: Path) -> dict[int | None, str]:
    """``{page: text}``: pages 1..n for a PDF, the single key None for every other format."""
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        return _pdf_pages(path)
    if suffix == ".docx":
        return {None: _docx_text(path)}
    if suffix in (".html", ".htm"):
        return {None: _html_text(path.read_text(encoding="utf-8"))}
    return {None: path.read_text(encoding="utf-8")}


def pdf_page_count(path: Path) -> int:
    import pypdfium2

    document = pypdfium2.PdfDocument(path)
    try:
        return len(document)
    finally:
        document.close()


def _pdf_pages(path: Path) -> dict[int | None, str]:
    import pypdfium2

    document = pypdfium2.PdfDocument(path)
    try:
        pages: dict[int | None, str] = {}
        for number, page in enumerate(document, start=1):
            textpage = page.get_textpage()
            pages[number] = textpage.get_text_range()
            textpage.close()
            page.close()
        return pages
    finally:
        document.close()


def _docx_text(path: Path) -> str:
    import docx
    from docx.table import Table

    lines = []
    for block in docx.Document(str(path)).iter_inner_content():
        if isinstance(block, Table):
            lines.extend(" | ".join(cell.text for cell in row.cells) for row in block.rows)
        else:
            lines.append(block.text)
    return "\n".join(lines)


class _VisibleText(HTMLParser):
    HIDDEN = frozenset({"script", "style", "head", "title"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.HIDDEN:
            self._hidden += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self.HIDDEN and self._hidden:
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


def _html_text(html: str) -> str:
    parser = _VisibleText()
    parser.feed(html)
    parser.close()
    return "".join(parser.parts)
