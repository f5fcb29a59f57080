"""What the documents service's and page's tests share: a folder of real documents with files
that must be refused, and the service on the test suite's converted embedder."""

from __future__ import annotations

import shutil
from pathlib import Path

from app.platform.paths import AppPaths
from app.services.documents import DocumentsService
from tests.engine.documents.corpus_fixture import committed_documents
from tests.engine.documents.document_files import write_scanned_pdf

WAIT = 60_000  # ms: indexing on one thread of a shared 2-core machine
TEXT_DOCUMENTS = ("bicycle_maintenance.txt", "espresso_machine_manual.md", "http_retry.py")
BINARY_TXT = "0-notes.txt"  # first in the scan's order: refused before a pause
SCANNED_PDF = "0-scanned.pdf"


def docs_folder(folder: Path, names: tuple[str, ...] = TEXT_DOCUMENTS, copies: int = 1) -> Path:
    """Real documents of the corpus (``copies`` of each, renamed), a binary file named .txt
    and a scanned PDF without a text layer: the two must be refused, the rest indexed."""
    folder.mkdir(parents=True, exist_ok=True)
    by_name = {p.name: p for p in committed_documents()}
    for name in names:
        for copy in range(copies):
            target = folder / (name if copy == 0 else f"{Path(name).stem}-{copy}{Path(name).suffix}")
            shutil.copyfile(by_name[name], target)
    (folder / BINARY_TXT).write_bytes(bytes(range(256)) * 64)
    write_scanned_pdf(folder / SCANNED_PDF, pages=2)
    return folder


def make_service(paths: AppPaths, embedder_gguf: Path, rescan_delay_ms: int = 300) -> DocumentsService:
    # One thread: a second one waits at every barrier on a shared 2-core machine.
    return DocumentsService(
        paths, embedder_path=embedder_gguf, embedder_threads=1, rescan_delay_ms=rescan_delay_ms
    )
