"""Real document files written at test time: PDFs (fpdf2), DOCX (python-docx), and the bad
inputs a collection must survive (a scan, an encrypted PDF, a zip bomb, a symlink loop, ...).

Shared by the documents tests; nothing here is a fake: each file is what a user could have.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

# Text pages for a PDF: fpdf2's core fonts are Latin-1, so the words are too.
PDF_PAGES = (
    "Hearth keeps every model on the user's own machine. Nothing is sent anywhere.\n\n"
    "The planner decides how many layers fit on the graphics card before a model loads.",
    "Chapter two: retrieval. Each question is answered from the excerpts found in the "
    "collections that are turned on.\n\nThe excerpts are numbered so the reply can cite them.",
    "Appendix: the index lives in SQLite, in WAL mode, one transaction per file.",
)


def write_text_pdf(path: Path, pages: Sequence[str] = PDF_PAGES) -> Path:
    """A PDF with one page per string, each with a real text layer."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for text in pages:
        pdf.add_page()
        for paragraph in text.split("\n\n"):
            pdf.multi_cell(0, 6, paragraph)
            pdf.ln(4)
    pdf.output(str(path))
    return path


def write_scanned_pdf(path: Path, pages: int = 12) -> Path:
    """A PDF whose pages are images only, as a scanner makes them: no text layer."""
    from fpdf import FPDF
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (400, 200), "white")
    ImageDraw.Draw(image).text((20, 80), "This text is pixels, not characters.", fill="black")
    pdf = FPDF()
    for _ in range(pages):
        pdf.add_page()
        pdf.image(image, x=10, y=10, w=180)
    pdf.output(str(path))
    return path


def write_encrypted_pdf(path: Path, text: str = "A secret page.", password: str = "hunter2") -> Path:
    """A PDF that opens only with ``password`` (the user password, RC4)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_encryption(owner_password="owner-" + password, user_password=password)
    pdf.set_font("helvetica", size=12)
    pdf.add_page()
    pdf.multi_cell(0, 6, text)
    pdf.output(str(path))
    return path


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 1


@dataclass(frozen=True)
class Table:
    rows: tuple[tuple[str, ...], ...]


DocxBlock = str | Heading | Table

DOCX_BLOCKS: tuple[DocxBlock, ...] = (
    "A short preface before any heading.",
    Heading("Install", 1),
    "Hearth runs on Linux, macOS and Windows.",
    Heading("Linux", 2),
    "Unpack the archive and run the hearth script.",
    Table((("Distribution", "Package"), ("Debian", "hearth.deb"), ("Fedora", "hearth.rpm"))),
    Heading("Usage", 1),
    "Open a model, then ask it something.",
)


def write_docx(path: Path, blocks: Sequence[DocxBlock] = DOCX_BLOCKS) -> Path:
    """A Word document with paragraphs, Heading N styles and tables, in order."""
    import docx

    document = docx.Document()
    for block in blocks:
        if isinstance(block, Heading):
            document.add_heading(block.text, level=block.level)
        elif isinstance(block, Table):
            table = document.add_table(rows=len(block.rows), cols=len(block.rows[0]))
            for r, row in enumerate(block.rows):
                for c, value in enumerate(row):
                    table.cell(r, c).text = value
        else:
            document.add_paragraph(block)
    document.save(str(path))
    return path


def write_zip_bomb_docx(path: Path, unpacked_bytes: int = 200 * 1024 * 1024) -> Path:
    """A "DOCX" whose word/document.xml deflates from ``unpacked_bytes`` of zeros to a few
    hundred KiB, with the parts a real one has around it (python-docx would open it).
    Deflating 200 MiB takes seconds: the bomb is kept in the test cache, keyed by its size
    and this function's own source."""
    from tests.conftest import TEST_CACHE

    key = hashlib.sha256(f"{unpacked_bytes}\n{inspect.getsource(write_zip_bomb_docx)}".encode()).hexdigest()
    cached = TEST_CACHE / "documents" / f"zip-bomb-{key[:16]}.docx"
    if not cached.exists():
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}.partial")
        valid = write_docx(path.with_name(path.name + ".valid.docx"), ["Harmless."])
        with zipfile.ZipFile(valid) as source, zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as bomb:
            for item in source.infolist():
                if item.filename != "word/document.xml":
                    bomb.writestr(item, source.read(item.filename))
            block = b"\0" * (1024 * 1024)
            with bomb.open("word/document.xml", "w", force_zip64=True) as member:
                for _ in range(unpacked_bytes // len(block)):
                    member.write(block)
        valid.unlink()
        partial.replace(cached)
    shutil.copyfile(cached, path)
    return path


def write_symlink_loop(folder: Path, first: str = "loop-a.txt", second: str = "loop-b.txt") -> Path:
    """``first`` → ``second`` → ``first``: opening either fails with ELOOP."""
    os.symlink(second, folder / first)
    os.symlink(first, folder / second)
    return folder / first


MARKDOWN = """Intro text before any heading.

# Install

Get the archive.

## Linux

Unpack it, then run:

```sh
# this is a comment in a fence, not a heading
./hearth
```

## Windows

Run the installer.

# Usage

Ask a question.
"""

HTML = """<!doctype html>
<html><head><title>Hearth guide</title>
<style>body { color: red; }</style>
<script>var notText = "hidden";</script></head>
<body>
<p>Welcome to the guide.</p>
<h1>Install</h1>
<p>Get the   archive.</p>
<h2>Linux</h2>
<ul><li>Unpack it</li><li>Run it</li></ul>
<table><tr><td>Debian</td><td>deb</td></tr></table>
<h1>Usage</h1>
<pre>hearth   chat
  --docs notes</pre>
<p>Ask &amp; cite.</p>
</body></html>
"""


UNPRIVILEGED_UID = 65534  # "nobody"


@contextlib.contextmanager
def unprivileged() -> Iterator[None]:
    """Run the block as an ordinary user, so that file permissions apply.

    The tests run as root, and root reads a mode-000 file anyway; as "nobody" (the
    effective uid only: the real one stays root, to switch back) it cannot. Outside root
    the block runs as is: the permissions already apply."""
    if os.geteuid() != 0:
        yield
        return
    os.seteuid(UNPRIVILEGED_UID)
    try:
        yield
    finally:
        os.seteuid(0)


@contextlib.contextmanager
def public_folder() -> Iterator[Path]:
    """A fresh folder an ordinary user can reach, removed afterwards. pytest's temporary
    folders sit under root's mode-700 one, where "nobody" could not even look for a file:
    a refusal there would be the folder's, never the file's own."""
    folder = Path(tempfile.mkdtemp(prefix="hearth-documents-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for path in folder.rglob("*"):
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
        shutil.rmtree(folder)
