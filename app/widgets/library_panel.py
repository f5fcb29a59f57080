"""The model library: models with their projectors beneath them, unusable files with why,
and after them each remote server with the models it lists (the model picker)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QModelIndex, QSortFilterProxyModel, Qt, Signal, SignalInstance
from PySide6.QtGui import (
    QAction,
    QBrush,
    QColor,
    QKeySequence,
    QResizeEvent,
    QStandardItem,
    QStandardItemModel,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from app.state.remote import ListingState, ServerListing
from app.widgets.badge_delegate import BADGE_ROLE, BadgeDelegate
from app.wording.presenters import BASE_MODEL_BADGE, sentence
from engine import LibraryEntry, RemoteModelInfo, format_bytes, format_count

ENTRY_ROLE = Qt.ItemDataRole.UserRole + 1
PATH_ROLE = Qt.ItemDataRole.UserRole + 2
REMOTE_ROLE = Qt.ItemDataRole.UserRole + 3  # a remote model's RemoteModelInfo
REMOTE_KEY_ROLE = Qt.ItemDataRole.UserRole + 4  # its (base URL, model id), to select it again
SERVER_ROLE = Qt.ItemDataRole.UserRole + 5  # a remote server's row: its base URL
TIP_ROLE = Qt.ItemDataRole.UserRole + 6  # a model's tooltip before "Loaded now"
COLUMNS = ("Model", "Parameters", "Quant", "Size")
COLUMN_TIPS = {
    "Parameters": "How many weights the model has, as its file labels them (usually from the model's "
    "name); the model page also shows the parameters counted in the weights",
    "Quant": "How the weights are stored (quantization)",
    "Size": "The file's size on disk, every part of a split model together",
}
PARAMETERS_COLUMN, QUANT_COLUMN, SIZE_COLUMN = 1, 2, 3
# The columns kept first when the list is narrow (the last given way first); the name stays.
COLUMNS_BY_PRIORITY = (SIZE_COLUMN, PARAMETERS_COLUMN, QUANT_COLUMN)
NAME_MIN_WIDTH = 220
BASE_TAG = "base model"
VISION_TAG = "vision projector"
REMOTE_TAG = "remote"
LOADED_TAG = "loaded"
INVALID_COLOR = QColor("#d62728")
EMPTY_TEXT = (
    "<b>No models yet.</b><br>Find one on <a href='discover'>Discover</a>: search the Hugging Face "
    "Hub from Hearth and see what fits this computer before downloading. Small ones such as "
    "Gemma 3 270M or Qwen 2.5 0.5B run on any laptop.<br><br>Models already on disk: "
    "<a href='add'>Add models…</a> (Ctrl+O). Drop <code>.gguf</code> files or folders anywhere "
    "on this window works too."
)


def short_reason(error: str) -> str:
    """What a list row says of an unusable file: the reason's first words ("incomplete
    file"), the whole of it in the tooltip and on the model page."""
    head = error.split(": ", 1)[0]
    return head if len(head) <= 40 else head[:39] + "…"


def _remote_key(key: tuple[str, str]) -> str:
    return "\n".join(key)  # a base URL and a model id; neither holds a newline


class LibraryTree(QTreeView):
    """The name column stretches; the other columns are hidden, least useful last, when
    the view is too narrow to show them beside a readable name."""

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.fit_columns()

    def fit_columns(self) -> None:
        header = self.header()
        room = self.viewport().width() - NAME_MIN_WIDTH
        for column in COLUMNS_BY_PRIORITY:
            need = max(self.sizeHintForColumn(column), header.sectionSizeHint(column))
            fits = room >= need
            self.setColumnHidden(column, not fits)
            if fits:
                room -= need


class LibrarySource(Protocol):
    """What the panel needs of the library (the library service, ``LibraryController``)."""

    entries_changed: SignalInstance  # tuple[LibraryEntry, ...]
    select_requested: SignalInstance  # Path of an entry to select

    def entries(self) -> tuple[LibraryEntry, ...]: ...
    def remove(self, path: Path) -> None: ...


class LibraryPanel(QWidget):
    selection_changed = Signal(object)  # LibraryEntry | None
    remote_selected = Signal(object)  # RemoteModelInfo of a remote model's row, else None
    add_requested = Signal()  # the empty library's "Add models…"
    discover_requested = Signal()  # its "Discover"

    def __init__(self, controller: LibrarySource, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self._entries: tuple[LibraryEntry, ...] = ()
        self._remote: tuple[ServerListing, ...] = ()
        self._loaded: Path | None = None  # the model loaded now, marked in the list
        self.heading = QLabel("Library")
        font = self.heading.font()
        font.setBold(True)
        self.heading.setFont(font)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Filter models…")
        self.search.setClearButtonEnabled(True)
        self.model = QStandardItemModel(0, len(COLUMNS), self)
        self.model.setHorizontalHeaderLabels(list(COLUMNS))
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.proxy.setRecursiveFilteringEnabled(True)
        self.proxy.setFilterKeyColumn(-1)
        for column, title in enumerate(COLUMNS):
            if title in COLUMN_TIPS:
                self.model.horizontalHeaderItem(column).setToolTip(COLUMN_TIPS[title])
        self.tree = LibraryTree()
        self.tree.setModel(self.proxy)
        self.tree.setItemDelegateForColumn(0, BadgeDelegate(self.tree))
        self.tree.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.tree.setRootIsDecorated(True)
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.tree.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in range(1, len(COLUMNS)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.empty_label = QLabel(EMPTY_TEXT)
        self.empty_label.setObjectName("libraryEmpty")
        self.empty_label.linkActivated.connect(self._empty_link)
        self.empty_label.setWordWrap(True)
        self.empty_label.setTextFormat(Qt.TextFormat.RichText)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.empty_label.setContentsMargins(6, 12, 6, 6)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 0)
        layout.addWidget(self.heading)
        layout.addWidget(self.search)
        layout.addWidget(self.tree, 1)
        layout.addWidget(self.empty_label, 1)
        # Remove is a button too, not only in the context menu: a broken file is found by
        # looking at the list, and the reason says to get rid of it.
        self.remove_button = QPushButton("Remove from library")
        self.remove_button.setObjectName("removeModel")
        self.remove_button.setToolTip("Forget the selected file; it stays on disk (Delete)")
        self.remove_button.setEnabled(False)
        self.remove_button.clicked.connect(self.remove_selected)
        buttons = QHBoxLayout()
        buttons.setContentsMargins(0, 0, 0, 4)
        buttons.addStretch(1)
        buttons.addWidget(self.remove_button)
        layout.addLayout(buttons)

        self.remove_action = QAction("Remove from library", self)
        self.remove_action.setShortcut(QKeySequence.StandardKey.Delete)
        self.remove_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.remove_action.setToolTip("Forget this file; it stays on disk")
        self.remove_action.triggered.connect(self.remove_selected)
        self.copy_path_action = QAction("Copy path", self)
        self.copy_path_action.triggered.connect(self._copy_path)
        self.tree.addAction(self.remove_action)

        self.search.textChanged.connect(self.proxy.setFilterFixedString)
        self.tree.selectionModel().currentChanged.connect(self._on_current)
        self.tree.customContextMenuRequested.connect(self._context_menu)
        controller.entries_changed.connect(self.set_entries)
        controller.select_requested.connect(self.select_path)
        self.set_entries(controller.entries())

    # -- content ------------------------------------------------------------------------

    def set_entries(self, entries: tuple[LibraryEntry, ...]) -> None:
        self._entries = tuple(entries)
        self._rebuild()

    def set_remote(self, listings: tuple[ServerListing, ...]) -> None:
        """The remote servers, each with the models it lists (or why it lists none). Only
        their rows are replaced: a local model selected stays selected, untouched (its
        panel keeps what the user was editing)."""
        self._remote = tuple(listings)
        selected_remote = self.tree.currentIndex().data(REMOTE_KEY_ROLE)
        for row in reversed(range(self.model.rowCount())):
            if self.model.item(row, 0).data(SERVER_ROLE) is not None:
                self.model.removeRow(row)
        self._append_remote()
        self._show_rows()
        if selected_remote is not None:
            self.select_remote(tuple(selected_remote.split("\n", 1)))  # type: ignore[arg-type]

    def _rebuild(self) -> None:
        entries = self._entries
        selected = self.selected_path()
        selected_remote = self.tree.currentIndex().data(REMOTE_KEY_ROLE)
        by_path = {e.path: e for e in entries}
        paired = {p for e in entries if e.ok and not e.is_projector for p in e.projectors}
        self.model.removeRows(0, self.model.rowCount())
        models = sorted(
            (e for e in entries if not (e.is_projector and e.path in paired)),
            key=lambda e: (not e.ok, e.is_projector, e.display_name.lower()),
        )
        for entry in models:
            row = self._row(entry)
            for projector_path in entry.projectors if not entry.is_projector else ():
                projector = by_path.get(projector_path)
                if projector is not None:
                    row[0].appendRow(self._row(projector, child=True))
            self.model.appendRow(row)
        self._append_remote()
        self.tree.expandAll()
        self._show_rows()
        if selected is not None:
            self.select_path(selected)
        elif selected_remote is not None:
            self.select_remote(tuple(selected_remote.split("\n", 1)))  # type: ignore[arg-type]

    def _append_remote(self) -> None:
        for listing in self._remote:
            row = self._server_row(listing)
            self.model.appendRow(row)
            self.tree.setExpanded(self.proxy.mapFromSource(row[0].index()), True)

    def _show_rows(self) -> None:
        self.tree.fit_columns()
        shown = bool(self._entries) or bool(self._remote)
        self.empty_label.setVisible(not shown)
        self.tree.setVisible(shown)
        self.remove_button.setVisible(bool(self._entries))

    def _empty_link(self, href: str) -> None:
        (self.discover_requested if href == "discover" else self.add_requested).emit()

    # -- the loaded model ---------------------------------------------------------------

    def set_loaded(self, path: Path | None) -> None:
        """Mark the model loaded now (bold, a "loaded" tag); None: no model is loaded."""
        self._loaded = path
        for row in range(self.model.rowCount()):
            self._mark_loaded(self.model.item(row, 0))

    def loaded_path(self) -> Path | None:
        return self._loaded

    def _mark_loaded(self, name: QStandardItem) -> None:
        entry: LibraryEntry | None = name.data(ENTRY_ROLE)
        if entry is not None and entry.info is not None and not entry.is_projector:
            loaded = self._loaded is not None and entry.path == self._loaded
            font = name.font()
            font.setBold(loaded)
            name.setFont(font)
            base = BASE_TAG if entry.info.is_base_model else None
            name.setData((f"{LOADED_TAG} · {base}" if base else LOADED_TAG) if loaded else base, BADGE_ROLE)
            tip = name.data(TIP_ROLE) or ""
            name.setToolTip(f"Loaded now\n{tip}" if loaded else tip)

    def _server_row(self, listing: ServerListing) -> list[QStandardItem]:
        """A server (its name and status) with its models beneath it."""
        # The picker is narrow: "offline" here, why in the tooltip and under Settings.
        short = "offline" if listing.state is ListingState.OFFLINE else listing.status_text()
        name = QStandardItem(f"{listing.title} — {short}")
        name.setToolTip(f"Remote server {listing.server.base_url}\n{listing.status_text()}")
        name.setSelectable(False)
        name.setData(listing.server.base_url, SERVER_ROLE)
        cells = [name, QStandardItem(""), QStandardItem(""), QStandardItem("")]
        if listing.state is ListingState.OFFLINE:
            name.setForeground(QBrush(INVALID_COLOR))
        for info in listing.models:
            name.appendRow(self._remote_row(info))
        return cells

    def _remote_row(self, info: RemoteModelInfo) -> list[QStandardItem]:
        name = QStandardItem(info.model_id)
        name.setData(REMOTE_TAG, BADGE_ROLE)
        context = f"{info.context_length:,} tokens per conversation" if info.context_length else ""
        tip = [info.model_id, f"On {info.endpoint.base_url}", context, "Select it, then Chat with this model"]
        name.setToolTip("\n".join(t for t in tip if t))
        cells = [name, QStandardItem(""), QStandardItem("remote"), QStandardItem("")]
        for cell in cells:
            cell.setData(info, REMOTE_ROLE)
            cell.setData(_remote_key(info.key), REMOTE_KEY_ROLE)
        return cells

    def _row(self, entry: LibraryEntry, child: bool = False) -> list[QStandardItem]:
        info = entry.info
        if info is None:
            error = entry.error or "unusable"
            name = QStandardItem(f"{entry.path.name} — {short_reason(error)}")
            cells = [name, QStandardItem(""), QStandardItem(""), QStandardItem(format_bytes(entry.size))]
            for cell in cells:
                cell.setForeground(QBrush(INVALID_COLOR))
                cell.setToolTip(
                    f"Hearth cannot use this file. {sentence(error)}\n{entry.path}\n"
                    "Select it for the details; Remove from library forgets it."
                )
        else:
            label = entry.display_name
            if entry.is_projector and not child:
                label = "vision projector (no matching model): " + label
            name = QStandardItem(label)
            on_disk = format_bytes(entry.size or info.file_size)
            counted = f"{format_count(info.parameter_count)} parameters"
            tip = [label]
            if info.is_base_model:
                name.setData(BASE_TAG, BADGE_ROLE)
                tip.append(BASE_MODEL_BADGE)
            elif child:
                name.setData(VISION_TAG, BADGE_ROLE)
                tip.append("Vision projector: lets this model see images (chosen on the model page)")
            tip += [f"{counted} · {info.file_type} · {on_disk} on disk", str(entry.path)]
            name.setData("\n".join(tip), TIP_ROLE)
            name.setToolTip("\n".join(tip))
            parameters = QStandardItem(info.size_label or format_count(info.parameter_count))
            labelled = f"Labelled {info.size_label}; " if info.size_label else ""
            parameters.setToolTip(f"{labelled}{counted} in the weights")
            size = QStandardItem(on_disk)
            size.setToolTip(f"{on_disk} on disk")
            cells = [name, parameters, QStandardItem(info.file_type), size]
        for cell in cells:
            cell.setData(entry, ENTRY_ROLE)
            cell.setData(str(entry.path), PATH_ROLE)
        if not child:
            self._mark_loaded(name)
        return cells

    def vision_models(self) -> tuple[tuple[str, Path], ...]:
        """The models in the library that can see pictures (a vision file, mmproj, is
        paired with them): (name, path), by name."""
        models = [e for e in self._entries if e.ok and not e.is_projector and e.projectors and e.info]
        names = [e.display_name for e in models]
        # Two files of one model (two quantizations) are told apart by their file names.
        twice = {n for n in names if names.count(n) > 1}
        labelled = [
            (f"{e.display_name} ({e.path.name})" if e.display_name in twice else e.display_name, e.path)
            for e in models
        ]
        return tuple(sorted(labelled, key=lambda m: m[0].lower()))

    # -- selection ---------------------------------------------------------------------

    def selected_entry(self) -> LibraryEntry | None:
        index = self.tree.currentIndex()
        return index.data(ENTRY_ROLE) if index.isValid() else None

    def selected_path(self) -> Path | None:
        entry = self.selected_entry()
        return entry.path if entry is not None else None

    def select_path(self, path: Path) -> None:
        matches = self.model.match(
            self.model.index(0, 0),
            PATH_ROLE,
            str(path),
            1,
            Qt.MatchFlag.MatchExactly | Qt.MatchFlag.MatchRecursive,
        )
        if matches:
            index = self.proxy.mapFromSource(matches[0])
            self.tree.setCurrentIndex(index)
            self.tree.scrollTo(index)

    def selected_remote(self) -> RemoteModelInfo | None:
        index = self.tree.currentIndex()
        return index.data(REMOTE_ROLE) if index.isValid() else None

    def select_remote(self, key: tuple[str, str]) -> bool:
        """Select the remote model ``(base URL, model id)``, if listed."""
        matches = self.model.match(
            self.model.index(0, 0),
            REMOTE_KEY_ROLE,
            _remote_key(key),
            1,
            Qt.MatchFlag.MatchExactly | Qt.MatchFlag.MatchRecursive,
        )
        if not matches:
            return False
        index = self.proxy.mapFromSource(matches[0])
        self.tree.setCurrentIndex(index)
        self.tree.scrollTo(index)
        return True

    def select_first(self) -> None:
        if self.proxy.rowCount():
            self.tree.setCurrentIndex(self.proxy.index(0, 0))

    def _on_current(self, current: QModelIndex, _previous: QModelIndex) -> None:
        self.remove_button.setEnabled(current.isValid() and current.data(ENTRY_ROLE) is not None)
        self.selection_changed.emit(current.data(ENTRY_ROLE) if current.isValid() else None)
        self.remote_selected.emit(current.data(REMOTE_ROLE) if current.isValid() else None)

    # -- actions ---------------------------------------------------------------------

    def remove_selected(self) -> None:
        path = self.selected_path()
        if path is not None:
            self.controller.remove(path)

    def _copy_path(self) -> None:
        path = self.selected_path()
        if path is not None:
            QApplication.clipboard().setText(str(path))

    def _context_menu(self, position) -> None:
        if self.selected_entry() is None:
            return
        menu = QMenu(self)
        menu.addAction(self.remove_action)
        menu.addAction(self.copy_path_action)
        menu.exec(self.tree.viewport().mapToGlobal(position))
