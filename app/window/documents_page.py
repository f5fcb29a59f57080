"""The Documents page: ``DocumentsPanel`` wired to ``DocumentsService``. The dialogs (a name, a
confirmation, files, a folder, the reindex's cost) are asked here; the service does the work
on its workers and answers with signals, so nothing here waits."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox, QVBoxLayout, QWidget

from app.services.documents import DocumentsService
from app.widgets.documents_panel import DocumentsPanel
from engine import plural

if TYPE_CHECKING:
    from app.conversation.document_chat import DocumentChat
    from engine import IndexProgress, IndexReport, ReindexPlan

# The chunk sizes Reindex… offers (tokens of the embedder); the embedder's window caps them.
MIN_CHUNK_TOKENS = 64
MAX_CHUNK_TOKENS = 512


def report_text(report: IndexReport) -> str:
    """What a finished run did, in one line."""
    verb = "Stopped" if report.cancelled else "Done"
    parts = [f"{report.indexed} indexed"]
    if report.unchanged:
        parts.append(f"{report.unchanged} unchanged")
    if report.moved:
        parts.append(f"{report.moved} moved")
    if report.removed:
        parts.append(f"{report.removed} removed")
    if report.refused:
        parts.append(f"{report.refused} refused")
    embedded = plural(report.chunks_embedded, "chunk")
    return f"{verb}: {', '.join(parts)} · {embedded} embedded in {report.seconds:.0f} s"


def plan_text(plan: ReindexPlan) -> str:
    """The question a reindex asks: what changes, how much is embedded, how long it takes."""
    changes = []
    if plan.from_embedder != plan.to_embedder:
        changes.append(f"the embedding model becomes {plan.to_embedder.split(':')[0]}")
    if plan.from_chunking != plan.to_chunking:
        changes.append(
            f"chunks go from ≤ {plan.from_chunking.max_tokens} to ≤ {plan.to_chunking.max_tokens} tokens"
        )
    minutes = plan.seconds / 60
    took = f"about {plan.seconds:.0f} s" if plan.seconds < 90 else f"about {minutes:.0f} min"
    done = f" ({plural(plan.chunks_done, 'chunk')} already done)" if plan.chunks_done else ""
    return (
        f"“{plan.collection}”: {' and '.join(changes) or 'nothing changes'}.\n\n"
        f"{plural(plan.documents, 'document')}, about {plural(plan.chunks_to_embed, 'chunk')} to embed"
        f"{done}: {took} on this machine ({plan.chunks_per_s:.0f} chunks/s).\n\n"
        "The current index keeps answering until the new one is complete."
    )


def ask_yes_no(parent: QWidget, title: str, text: str) -> bool:
    answer = QMessageBox.question(parent, title, text)
    return answer == QMessageBox.StandardButton.Yes


class DocumentsPage(QWidget):
    def __init__(self, service: DocumentsService, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("documentsPage")
        self.service = service
        self.panel = DocumentsPanel()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.panel)
        # The questions, replaceable by tests (title, text) -> yes.
        self.confirm: Callable[[str, str], bool] = lambda title, text: ask_yes_no(self, title, text)
        self._select_next: str | None = None
        self._last_folder = str(Path.home())

        self.panel.new_requested.connect(self.ask_new_collection)
        self.panel.rename_requested.connect(self.ask_rename)
        self.panel.remove_requested.connect(self.ask_remove)
        self.panel.add_files_requested.connect(lambda _name: self.choose_files())
        self.panel.add_folder_requested.connect(lambda _name: self.choose_folder())
        self.panel.reindex_requested.connect(self.ask_reindex)
        self.panel.paths_dropped.connect(self.add_paths)
        self.panel.selection_changed.connect(self._show_documents)
        self.panel.progress.pause_requested.connect(service.pause)
        self.panel.progress.resume_requested.connect(service.resume)
        self.panel.progress.cancel_requested.connect(service.cancel)
        service.collections_changed.connect(self._collections_changed)
        service.documents_changed.connect(self._show_documents)
        service.job_started.connect(self._job_started)
        service.progress.connect(self._progress)
        service.finished.connect(self._finished)
        service.failed.connect(self._failed)
        service.reindex_planned.connect(self.ask_to_reindex)
        service.embedder_changed.connect(
            lambda opened: self.panel.set_embedder_memory(opened.memory if opened is not None else None)
        )

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.service.start()  # the index opens on a worker the first time the page is seen

    def serve_chat(self, chat_documents: DocumentChat) -> None:
        """The chats search this service's collections; their Documents menus follow its list,
        which is read now (on a worker) so the menu is filled before the page is first seen."""
        chat_documents.set_source(self.service)
        # Indexing waits while a reply generates (a length read: safe from the indexing worker).
        self.service.set_chat_busy(lambda: bool(chat_documents.replies.streams))
        self.service.collections_changed.connect(chat_documents.refresh)
        self.service.start()

    def shutdown(self) -> None:
        self.service.close()

    # -- what the dialogs call ---------------------------------------------------------

    def create_collection(self, name: str) -> None:
        self._select_next = name.strip()
        self.service.create_collection(name)

    def add_paths(self, paths: Sequence[Path]) -> None:
        """Files or folders into the selected collection (Add files…, Add folder…, a drop)."""
        name = self.panel.selected()
        if name is not None and paths:
            self.panel.show_message("")
            self.service.add_paths(name, paths)

    # -- the dialogs -------------------------------------------------------------------

    def ask_new_collection(self) -> None:
        name, ok = QInputDialog.getText(self, "New collection", "Name of the collection:")
        if ok and name.strip():
            self.create_collection(name)

    def ask_rename(self, old: str) -> None:
        new, ok = QInputDialog.getText(self, "Rename collection", "New name:", text=old)
        if ok and new.strip() and new.strip() != old:
            self._select_next = new.strip()
            self.service.rename_collection(old, new)

    def ask_remove(self, name: str) -> None:
        text = f"Remove the collection “{name}” and its index? Its files stay where they are."
        if self.confirm("Remove collection", text):
            self.service.remove_collection(name)

    def choose_files(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Add files to the collection", self._last_folder)
        if files:
            self._last_folder = str(Path(files[0]).parent)
            self.add_paths([Path(f) for f in files])

    def choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add a folder to the collection", self._last_folder)
        if folder:
            self._last_folder = folder
            self.add_paths([Path(folder)])

    def ask_reindex(self, name: str) -> None:
        info = next((c for c in self.service.collections() if c.name == name), None)
        if info is None:
            return
        tokens, ok = QInputDialog.getInt(
            self, "Reindex", "Chunk size (tokens of the embedding model):",
            info.chunking.max_tokens, MIN_CHUNK_TOKENS, MAX_CHUNK_TOKENS, 32,
        )  # fmt: skip
        if ok:
            self.panel.show_message("Working out what a reindex would take…")
            self.service.plan_reindex(name, tokens)

    def ask_to_reindex(self, plan: ReindexPlan) -> None:
        """The service's plan (a changed model or chunking): agreed to, it starts."""
        self.panel.show_message("")
        if not plan.needed:
            self.panel.show_message(f"“{plan.collection}” is already indexed this way: nothing to do.")
            return
        if self.confirm("Reindex collection", plan_text(plan)):
            self.service.reindex(plan.collection, plan.to_chunking)

    # -- the service's answers ---------------------------------------------------------

    def _collections_changed(self) -> None:
        select, self._select_next = self._select_next, None
        if select is not None and select not in self.service.collection_names():
            self._select_next = select  # not listed yet
            select = None
        self.panel.set_collections(self.service.collections(), select=select)

    def _show_documents(self, name: str | None) -> None:
        if name is not None:
            self.panel.set_documents(name, self.service.documents(name), self.service.pages(name))

    def _job_started(self, name: str) -> None:
        self.panel.set_progress(name, None)
        self.panel.progress.start(name)

    def _progress(self, event: IndexProgress) -> None:
        self.panel.set_progress(self.service.indexing or "", event)

    def _finished(self, name: str, report: IndexReport) -> None:
        if not self.service.busy:
            self.panel.set_progress(name, None)
        self.panel.show_message(f"“{name}” — {report_text(report)}")

    def _failed(self, name: str, message: str) -> None:
        if not self.service.busy:
            self.panel.set_progress(name, None)
        self.panel.show_message(message, error=True)
