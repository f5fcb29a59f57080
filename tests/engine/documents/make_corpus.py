"""The retrieval corpus's PDFs and DOCXs, written by the real libraries from committed sources.

Each source in ``corpus/sources/`` is ``<file name>.txt`` (``thermostat.pdf.txt`` becomes
``thermostat.pdf``) in a small line markup, one block per line:

    title: ...            metadata, before the first blank line (also ``author:``)
    === page              a new PDF page: every answer's page number is the count of these
    # Heading             Heading 1 (``##`` Heading 2)
    - item                a bullet
    | a | b |             a table row; consecutive rows make one table, the first is its header
    anything else         one paragraph

A PDF whose page overflows onto the next is refused rather than written: the questions name
pages, and a silent extra page would move every answer after it.

    python tests/engine/documents/make_corpus.py OUT_DIR
"""

from __future__ import annotations

import io
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

SOURCES = Path(__file__).resolve().parent / "corpus" / "sources"

# Fixed dates so the same sources make the same bytes on every machine and every run.
CREATED = datetime(2024, 6, 1, 9, 0, tzinfo=UTC)

PAGE_BREAK = "=== page"
PDF_FONT = "Helvetica"  # a core font: no font file to ship, text must be Latin-1
PDF_BODY_SIZE = 10.5
PDF_LINE = 5.2  # mm per body line
PDF_MARGIN = 20  # mm, all sides


@dataclass(frozen=True)
class Heading:
    text: str
    level: int


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Bullet:
    text: str


@dataclass(frozen=True)
class Table:
    rows: tuple[tuple[str, ...], ...]


Block = Heading | Paragraph | Bullet | Table


@dataclass(frozen=True)
class Source:
    """One document to generate: its metadata and its blocks, page by page (DOCX: one page)."""

    name: str
    title: str
    author: str
    pages: tuple[tuple[Block, ...], ...]


class SourceError(ValueError):
    """A source that cannot become the document it claims to be."""


def parse_source(name: str, text: str) -> Source:
    header, _, body = text.partition("\n\n")
    meta = dict(line.split(": ", 1) for line in header.splitlines())
    if "title" not in meta:
        raise SourceError(f"{name}: no 'title:' line before the first blank line")
    pages: list[list[Block]] = [[]]
    for line in body.splitlines():
        line = line.strip()
        if not line:
            continue
        if line == PAGE_BREAK:
            if pages[-1]:
                pages.append([])
            continue
        blocks = pages[-1]
        if line.startswith("|"):
            row = tuple(cell.strip() for cell in line.strip("|").split("|"))
            if blocks and isinstance(blocks[-1], Table):
                blocks[-1] = Table((*blocks[-1].rows, row))
            else:
                blocks.append(Table((row,)))
        elif line.startswith("## "):
            blocks.append(Heading(line[3:], 2))
        elif line.startswith("# "):
            blocks.append(Heading(line[2:], 1))
        elif line.startswith("- "):
            blocks.append(Bullet(line[2:]))
        else:
            blocks.append(Paragraph(line))
    for block in (b for page in pages for b in page):
        if isinstance(block, Table) and len({len(row) for row in block.rows}) != 1:
            raise SourceError(f"{name}: a table's rows have different numbers of cells")
    return Source(name, meta["title"], meta.get("author", ""), tuple(tuple(p) for p in pages))


def read_sources(folder: Path = SOURCES) -> tuple[Source, ...]:
    return tuple(
        parse_source(path.name.removesuffix(".txt"), path.read_text(encoding="utf-8"))
        for path in sorted(folder.glob("*.txt"))
    )


def write_pdf(source: Source, path: Path) -> Path:
    import fpdf
    from fpdf import FPDF, XPos, YPos

    title = source.title

    class Document(FPDF):
        def footer(self) -> None:
            self.set_y(-12)
            self.set_font(PDF_FONT, size=8)
            self.cell(0, 5, f"{title}  -  page {self.page_no()} of {{nb}}", align="C")

    pdf = Document(format="A4")
    pdf.set_margins(PDF_MARGIN, PDF_MARGIN, PDF_MARGIN)
    pdf.set_auto_page_break(auto=True, margin=PDF_MARGIN)
    pdf.set_title(source.title)
    pdf.set_author(source.author)
    pdf.set_creation_date(CREATED)
    pdf.set_creator("tests/engine/documents/make_corpus.py")
    pdf.set_producer(f"fpdf2 {fpdf.__version__}")
    _check_latin1(source)
    for number, blocks in enumerate(source.pages, start=1):
        pdf.add_page()
        for block in blocks:
            if isinstance(block, Heading):
                pdf.set_font(PDF_FONT, style="B", size=16 if block.level == 1 else 12)
                pdf.ln(2 if block.level == 1 else 1.5)
                pdf.multi_cell(0, 8 if block.level == 1 else 6.5, block.text,
                               new_x=XPos.LMARGIN, new_y=YPos.NEXT)  # fmt: skip
            elif isinstance(block, Table):
                _pdf_table(pdf, block)
            else:
                pdf.set_font(PDF_FONT, size=PDF_BODY_SIZE)
                indent = 5 if isinstance(block, Bullet) else 0
                pdf.set_x(PDF_MARGIN + indent)
                text = f"-  {block.text}" if isinstance(block, Bullet) else block.text
                pdf.multi_cell(0, PDF_LINE, text, new_x=XPos.LMARGIN, new_y=YPos.NEXT)
                pdf.ln(0.8 if isinstance(block, Bullet) else 2)
        if pdf.page != number:
            raise SourceError(f"{source.name}: page {number} does not fit on one page; shorten it")
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def _pdf_table(pdf, table: Table) -> None:
    # Columns as wide as their longest cell wants, within reason, so short codes stay narrow.
    widths = [min(max(len(row[i]) for row in table.rows), 60) + 4 for i in range(len(table.rows[0]))]
    pdf.set_font(PDF_FONT, size=9.5)
    pdf.ln(1)
    with pdf.table(col_widths=widths, line_height=4.8, text_align="LEFT",
                   first_row_as_headings=True) as grid:  # fmt: skip
        for row in table.rows:
            cells = grid.row()
            for text in row:
                cells.cell(text)
    pdf.ln(3)


def _check_latin1(source: Source) -> None:
    texts = [source.title, source.author]
    for block in (b for page in source.pages for b in page):
        if isinstance(block, Table):
            texts.extend(cell for row in block.rows for cell in row)
        else:
            texts.append(block.text)
    for text in texts:
        try:
            text.encode("latin-1")
        except UnicodeEncodeError as error:
            bad = text[error.start : error.end]
            raise SourceError(
                f"{source.name}: {bad!r} is not Latin-1 (core PDF fonts): {text[:60]!r}"
            ) from None


def write_docx(source: Source, path: Path) -> Path:
    import docx

    document = docx.Document()
    properties = document.core_properties
    properties.title, properties.author = source.title, source.author
    properties.created = properties.modified = CREATED.replace(tzinfo=None)
    properties.last_modified_by = source.author
    properties.revision = 1
    document.add_heading(source.title, level=0)
    for block in (b for page in source.pages for b in page):
        if isinstance(block, Heading):
            document.add_heading(block.text, level=block.level)
        elif isinstance(block, Bullet):
            document.add_paragraph(block.text, style="List Bullet")
        elif isinstance(block, Table):
            grid = document.add_table(rows=len(block.rows), cols=len(block.rows[0]))
            grid.style = "Table Grid"
            for r, row in enumerate(block.rows):
                for c, text in enumerate(row):
                    cell = grid.cell(r, c)
                    cell.text = text
                    if r == 0:
                        for run in cell.paragraphs[0].runs:
                            run.bold = True
        else:
            document.add_paragraph(block.text)
    buffer = io.BytesIO()
    document.save(buffer)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_zip_with_fixed_times(buffer.getvalue()))
    return path


def _zip_with_fixed_times(data: bytes) -> bytes:
    # python-docx stamps every zip member with the current time; the same sources should give
    # the same bytes, so the members are copied with CREATED's time instead.
    source, target = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        for member in source.infolist():
            info = zipfile.ZipInfo(member.filename, date_time=CREATED.timetuple()[:6])
            info.compress_type = zipfile.ZIP_DEFLATED
            out.writestr(info, source.read(member))
    return target.getvalue()


def write_document(source: Source, folder: Path) -> Path:
    target = folder / source.name
    if source.name.endswith(".pdf"):
        return write_pdf(source, target)
    if source.name.endswith(".docx"):
        if len(source.pages) != 1:
            raise SourceError(f"{source.name}: a DOCX has no pages; drop the '{PAGE_BREAK}' lines")
        return write_docx(source, target)
    raise SourceError(f"{source.name}: only .pdf and .docx are generated")


def generate(folder: Path, sources: Sequence[Source] | None = None) -> tuple[Path, ...]:
    """Writes every source's document into ``folder``; returns their paths."""
    return tuple(write_document(source, folder) for source in (sources or read_sources()))


def main(argv: Sequence[str]) -> int:
    if len(argv) != 1:
        print("usage: make_corpus.py OUT_DIR", file=sys.stderr)
        return 2
    for path in generate(Path(argv[0])):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
