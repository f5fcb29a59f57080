"""The Documents page's widgets: the collections at the left (New…, Rename…, Remove), the
selected collection's files at the right (Add files…, Add folder…, Reindex…, drops), and the
indexing run's progress above them. Fed values (``CollectionInfo``, ``DocumentInfo``,
``IndexProgress``); every request is a signal, answered by the page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.widgets.documents_table import DocumentsTableModel
from app.widgets.index_progress import IndexProgressView
from app.widgets.styles import ERROR_STYLE, NOTE_STYLE
from engine import format_bytes, format_count, plural

if TYPE_CHECKING:
    from engine import CollectionInfo, DocumentInfo, IndexProgress

NAME_ROLE = Qt.ItemDataRole.UserRole + 1
EMPTY_HINT = "Make a collection with New…, then add files or folders to it, or drop them here."
NO_FILES_HINT = "No files yet: Add files…, Add folder…, or drop them here. They stay where they are."


def collection_line(info: CollectionInfo) -> str:
    """ "12 files · 340 chunks · 2 refused"."""
    parts = [plural(info.documents, "file"), plural(info.chunks, "chunk")]
    if info.refused:
        parts.append(f"{info.refused} refused")
    if info.pending:
        parts.append(f"{info.pending} pending")
    return " · ".join(parts)


class DocumentsPanel(QSplitter):
    selection_changed = Signal(object)  # str | None: the collection shown
    new_requested = Signal()
    rename_requested = Signal(str)
    remove_requested = Signal(str)
    add_files_requested = Signal(str)
    add_folder_requested = Signal(str)
    reindex_requested = Signal(str)
    paths_dropped = Signal(object)  # list[Path]

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(Qt.Orientation.Horizontal, parent)
        self.setObjectName("documentsPanel")
        self.setAcceptDrops(True)

        # -- the collections
        self.collections = QListWidget()
        self.collections.setObjectName("collections")
        self.collections.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.collections.currentItemChanged.connect(lambda *_: self._selected())
        self.new_button = QPushButton("New…")
        self.new_button.setObjectName("newCollection")
        self.rename_button = QPushButton("Rename…")
        self.remove_button = QPushButton("Remove")
        self.new_button.clicked.connect(self.new_requested)
        self.rename_button.clicked.connect(lambda: self._ask(self.rename_requested))
        self.remove_button.clicked.connect(lambda: self._ask(self.remove_requested))
        heading = QLabel("Collections")
        heading.setStyleSheet("font-weight: 600; font-size: 110%;")
        self.memory_label = QLabel()
        self.memory_label.setObjectName("embedderMemory")
        self.memory_label.setStyleSheet(NOTE_STYLE)
        self.memory_label.setWordWrap(True)
        buttons = QHBoxLayout()
        for button in (self.new_button, self.rename_button, self.remove_button):
            buttons.addWidget(button)
        side = QWidget()
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(10, 10, 6, 10)
        side_layout.addWidget(heading)
        side_layout.addWidget(self.collections, 1)
        side_layout.addLayout(buttons)
        side_layout.addWidget(self.memory_label)
        side.setMinimumWidth(220)

        # -- the selected collection
        self.title = QLabel()
        self.title.setObjectName("collectionTitle")
        self.title.setStyleSheet("font-weight: 600; font-size: 130%;")
        self.summary = QLabel()
        self.summary.setObjectName("collectionSummary")
        self.summary.setStyleSheet(NOTE_STYLE)
        self.add_files_button = QPushButton("Add files…")
        self.add_files_button.setObjectName("addDocumentFiles")
        self.add_folder_button = QPushButton("Add folder…")
        self.add_folder_button.setObjectName("addDocumentFolder")
        self.reindex_button = QPushButton("Reindex…")
        self.reindex_button.setObjectName("reindexCollection")
        self.reindex_button.setToolTip("Build the index again with other chunks: you see what it costs first")
        self.add_files_button.clicked.connect(lambda: self._ask(self.add_files_requested))
        self.add_folder_button.clicked.connect(lambda: self._ask(self.add_folder_requested))
        self.reindex_button.clicked.connect(lambda: self._ask(self.reindex_requested))
        self.message = QLabel()
        self.message.setObjectName("documentsMessage")
        self.message.setWordWrap(True)
        self.message.setVisible(False)
        self.progress = IndexProgressView()
        self.model = DocumentsTableModel()
        self.table = QTableView()
        self.table.setObjectName("documentsTable")
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(4, QHeaderView.ResizeMode.ResizeToContents)
        header.resizeSection(0, 240)
        header.resizeSection(1, 260)
        self.hint = QLabel(EMPTY_HINT)
        self.hint.setObjectName("documentsHint")
        self.hint.setStyleSheet(NOTE_STYLE)
        self.hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.hint.setWordWrap(True)
        actions = QHBoxLayout()
        titles = QVBoxLayout()
        titles.addWidget(self.title)
        titles.addWidget(self.summary)
        actions.addLayout(titles, 1)
        for button in (self.add_files_button, self.add_folder_button, self.reindex_button):
            actions.addWidget(button, 0, Qt.AlignmentFlag.AlignTop)
        main = QWidget()
        main_layout = QVBoxLayout(main)
        main_layout.setContentsMargins(6, 10, 10, 10)
        main_layout.addLayout(actions)
        main_layout.addWidget(self.message)
        main_layout.addWidget(self.progress)
        main_layout.addWidget(self.table, 1)
        main_layout.addWidget(self.hint, 1)
        main.setMinimumWidth(480)

        self.addWidget(side)
        self.addWidget(main)
        self.setStretchFactor(0, 0)
        self.setStretchFactor(1, 1)
        self.setCollapsible(0, False)
        self.setCollapsible(1, False)
        self.setSizes([280, 1000])
        self._infos: dict[str, CollectionInfo] = {}
        self._shown: str | None = None
        self._update_shown()

    # -- fed values --------------------------------------------------------------------

    def selected(self) -> str | None:
        item = self.collections.currentItem()
        return item.data(NAME_ROLE) if item is not None else None

    def set_collections(self, infos: Sequence[CollectionInfo], select: str | None = None) -> None:
        """The collections, in order; the selection kept (or ``select``, or the first)."""
        keep = select or self.selected()
        self._infos = {info.name: info for info in infos}
        self.collections.blockSignals(True)
        self.collections.clear()
        for info in infos:
            item = QListWidgetItem(f"{info.name}\n{collection_line(info)}")
            item.setData(NAME_ROLE, info.name)
            item.setToolTip("\n".join(str(s) for s in info.sources) or "No files yet")
            self.collections.addItem(item)
        names = [info.name for info in infos]
        if names:
            self.collections.setCurrentRow(names.index(keep) if keep in names else 0)
        self.collections.blockSignals(False)
        self._selected()

    def set_documents(self, name: str, docs: Sequence[DocumentInfo], pages: Mapping[int, int]) -> None:
        """``name``'s files (ignored unless it is the collection shown)."""
        if name == self._shown:
            self.model.set_documents(docs, pages)
            self._update_shown()

    def set_progress(self, collection: str, event: IndexProgress | None) -> None:
        """A run's progress (None: no run now)."""
        if event is None:
            self.progress.stop()
        else:
            if not self.progress.isVisible():
                self.progress.start(collection)
            self.progress.set_progress(event)

    def show_message(self, text: str, error: bool = False) -> None:
        """One line above the files ("" hides it)."""
        self.message.setText(text)
        self.message.setStyleSheet(ERROR_STYLE if error else NOTE_STYLE)
        self.message.setVisible(bool(text))

    def set_embedder_memory(self, memory: int | None) -> None:
        self.memory_label.setText(
            "" if memory is None else f"Embedding model: about {format_bytes(memory)} of memory"
        )

    # -- inside ------------------------------------------------------------------------

    def _ask(self, signal: Signal) -> None:  # type: ignore[valid-type]
        name = self.selected()
        if name is not None:
            signal.emit(name)  # type: ignore[attr-defined]

    def _selected(self) -> None:
        name = self.selected()
        if name != self._shown:
            self._shown = name
            self.model.set_documents((), {})
            self.selection_changed.emit(name)
        self._update_shown()

    def _update_shown(self) -> None:
        info = self._infos.get(self._shown) if self._shown is not None else None
        has = info is not None
        for button in (self.rename_button, self.remove_button, self.add_files_button,
                       self.add_folder_button):  # fmt: skip
            button.setEnabled(has)
        self.reindex_button.setEnabled(has and info.indexed > 0)
        self.title.setText(info.name if info is not None else "Documents")
        if info is None:
            self.summary.setText("Your files, searched when a chat turns a collection on")
        else:
            tokens = f" · {format_count(info.tokens)} tokens" if info.tokens else ""
            chunking = f" · chunks of ≤ {info.chunking.max_tokens} tokens"
            self.summary.setText(collection_line(info) + tokens + chunking)
        empty = info is None or (self.model.rowCount() == 0 and info.documents == 0)
        self.hint.setText(EMPTY_HINT if info is None else NO_FILES_HINT)
        self.hint.setVisible(empty)
        self.table.setVisible(not empty)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if self.selected() is not None and dropped_files(event):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event: QDropEvent) -> None:
        paths = dropped_files(event)
        if self.selected() is None or not paths:
            event.ignore()
            return
        event.acceptProposedAction()
        self.paths_dropped.emit(paths)


def dropped_files(event: QDragEnterEvent | QDropEvent) -> list[Path]:
    """Local files and folders in a drag (any kind: the index says what it cannot read)."""
    mime = event.mimeData()
    if not mime.hasUrls():
        return []
    return [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile()]
