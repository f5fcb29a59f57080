"""A real ``DocumentSource`` for the chat's tests: a ``DocumentIndex`` in the test's folder,
indexed with the real default embedder, searched by the engine's ``retrieve``; the answer
comes back later on the GUI thread, as the documents service gives it.

Import the embedder fixtures next to it (``from tests.app.documents_support import *``).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QTimer

from engine import DocumentIndex, EngineError, Retrieval, retrieve
from tests.engine.documents.conftest import embedder, embedder_gguf, minilm_folder  # noqa: F401
from tests.engine.documents.corpus_questions import CORPUS
from tests.engine.documents.document_files import write_text_pdf

CORPUS_DOCUMENTS = CORPUS / "documents"
# Three of the corpus's documents: more than half of a 4,096-token context, so searched.
NOTES = ("espresso_machine_manual.md", "bicycle_maintenance.txt", "marrowby_history.txt")


class IndexSource:
    """``collection_names`` and ``retrieve_async`` over a real index; ``asked``: each
    search as (names, question, context_tokens)."""

    def __init__(self, index: DocumentIndex, embedder_: object) -> None:
        self.index = index
        self.embedder = embedder_
        self.asked: list[tuple[list[str], str, int]] = []

    def collection_names(self) -> list[str]:
        return [c.name for c in self.index.collections()]

    def retrieve_async(
        self,
        names: Sequence[str],
        question: str,
        context_tokens: int,
        callback: Callable[[Retrieval | None, str | None], None],
    ) -> None:
        self.asked.append((list(names), question, context_tokens))
        try:
            found = retrieve(self.index, list(names), question, self.embedder, context_tokens=context_tokens)
        except EngineError as exc:
            error = exc.message  # the name ``exc`` is gone once the except block ends
            QTimer.singleShot(0, lambda: callback(None, error))
            return
        QTimer.singleShot(0, lambda: callback(found, None))


def build_source(folder: Path, embedder_: object) -> IndexSource:
    """Collections ``notes`` (three corpus documents and a 3-page PDF), ``manual`` (the PDF
    alone: small enough to go whole) and ``empty`` (nothing indexed)."""
    files = folder / "files"
    files.mkdir(parents=True)
    for name in NOTES:
        shutil.copyfile(CORPUS_DOCUMENTS / name, files / name)
    pdf = write_text_pdf(files / "hearth-guide.pdf")
    index = DocumentIndex(folder / "documents.sqlite3")
    index.create_collection("notes")
    index.index_paths("notes", [files], embedder_)
    index.create_collection("manual")
    index.index_paths("manual", [pdf], embedder_)
    index.create_collection("empty")
    return IndexSource(index, embedder_)
