"""Discover's result column: suggested searches before the first one, the offline panel,
and the list model of search results (filled in batches, shown a page at a time)."""

from __future__ import annotations

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtWidgets import (
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.services.discover import SummaryRow
from engine import (
    RepoSummary,
    format_count,
)

__all__ = [
    "REPO_ROLE",
    "RESULT_PAGE_ROWS",
    "SUGGESTED_SEARCHES",
    "OfflinePanel",
    "RepoListModel",
    "StartPanel",
    "repo_facts",
]

REPO_ROLE = Qt.ItemDataRole.UserRole + 1
RESULT_PAGE_ROWS = 200  # results the list takes at a time as it is scrolled to its end
# Where a new user may start: small models that run on any laptop, as searches (label, query).
SUGGESTED_SEARCHES = (
    ("Gemma 3 270M", "gemma-3-270m"),
    ("Qwen 2.5 0.5B Instruct", "qwen2.5-0.5b-instruct"),
    ("Llama 3.2 1B Instruct", "llama-3.2-1b-instruct"),
    ("SmolLM2 1.7B Instruct", "smollm2-1.7b-instruct"),
    ("Qwen 2.5 Coder 1.5B", "qwen2.5-coder-1.5b-instruct"),
    ("Gemma 3 4B (sees pictures)", "gemma-3-4b-it"),
)
START_TEXT = (
    "<b>Find a model to download.</b> Search by name, or start with one of these small "
    "models: they run on any laptop. Each result shows, per file, whether it fits this computer "
    "before you download it; a Q4_K_M file is a good start."
)


class StartPanel(QWidget):
    """What the result list shows before the first search: suggested searches."""

    search_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("discoverStart")
        layout = QVBoxLayout(self)
        self.intro = QLabel(START_TEXT)
        self.intro.setWordWrap(True)
        layout.addWidget(self.intro)
        self.buttons: list[QPushButton] = []
        for label, query in SUGGESTED_SEARCHES:
            button = QPushButton(label)
            button.setToolTip(f"Search the Hub for “{query}”")
            button.clicked.connect(lambda _checked=False, q=query: self.search_requested.emit(q))
            layout.addWidget(button)
            self.buttons.append(button)
        layout.addStretch(1)


class OfflinePanel(QWidget):
    """The Hub cannot be reached: say so, and what still works without it."""

    retry_requested = Signal()
    add_requested = Signal()
    library_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("discoverOffline")
        layout = QVBoxLayout(self)
        self.message = QLabel()
        self.message.setObjectName("offlineMessage")
        self.message.setWordWrap(True)
        self.works = QLabel()
        self.works.setObjectName("offlineWorks")
        self.works.setWordWrap(True)
        self.library_button = QPushButton()
        self.library_button.setObjectName("offlineLibrary")
        self.library_button.clicked.connect(self.library_requested)
        self.add_button = QPushButton("Add models from disk…")
        self.add_button.setObjectName("offlineAdd")
        self.add_button.clicked.connect(self.add_requested)
        self.retry_button = QPushButton("Try again")
        self.retry_button.setObjectName("offlineRetry")
        self.retry_button.clicked.connect(self.retry_requested)
        layout.addWidget(self.message)
        layout.addWidget(self.works)
        layout.addWidget(self.library_button)
        layout.addWidget(self.add_button)
        layout.addWidget(self.retry_button)
        layout.addStretch(1)
        self.set_models_on_disk(0)

    def show_error(self, message: str) -> None:
        self.message.setText(f"<b>{message}</b>")

    def set_models_on_disk(self, count: int) -> None:
        if count:
            models = "1 model" if count == 1 else f"{count:,} models"
            self.works.setText(
                f"Without the Hub, everything else works: chat with the {models} already on this "
                "computer, or add .gguf files you have (a download from another computer, a USB stick)."
            )
            self.library_button.setText(f"Open the library ({models} on disk)")
        else:
            self.works.setText(
                "Without the Hub, everything else works: add .gguf files you already have (a "
                "download from another computer, a USB stick) and chat with them."
            )
            self.library_button.setText("Open the library")
        self.library_button.setVisible(bool(count))


def repo_facts(r: RepoSummary) -> str:
    parts = [r.author, f"{format_count(r.downloads)} downloads", f"{format_count(r.likes)} likes"]
    if r.last_modified:
        parts.append(f"updated {r.last_modified}")
    parts.append(r.license or "no license given")
    if r.gated:
        parts.append("gated")
    return " · ".join(parts)


class RepoListModel(QAbstractListModel):
    """Search results, appended in batches as plain tuples (``summary_row``); the text of a
    row is made when it is painted.

    Every result is kept, but the view sees them a page at a time (``canFetchMore`` /
    ``fetchMore``, which QListView calls as it is scrolled to its end): each rows-inserted
    makes QListView lay out all the rows it has, asking Python for ``rowCount`` per row, so
    a view given 50,000 rows as they arrived stalled the GUI thread 50-60 ms at a time (a
    single pass over them took 270 ms). The first page is shown as soon as it comes."""

    def __init__(self, page_rows: int = RESULT_PAGE_ROWS) -> None:
        super().__init__()
        self._rows: list[SummaryRow] = []
        self._shown = 0
        self.page_rows = page_rows

    @property
    def total(self) -> int:
        """Results received (the view may show fewer until scrolled)."""
        return len(self._rows)

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else self._shown

    def data(
        self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole
    ) -> object:
        if not index.isValid():
            return None
        r = self.row(index.row())
        if role == Qt.ItemDataRole.DisplayRole:
            return f"{r.repo_id}\n{repo_facts(r)}"
        if role == Qt.ItemDataRole.ToolTipRole:
            return r.repo_id
        if role == REPO_ROLE:
            return r
        return None

    def canFetchMore(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> bool:  # noqa: B008
        return not parent.isValid() and self._shown < len(self._rows)

    def fetchMore(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> None:  # noqa: B008
        if self.canFetchMore(parent):
            self._show(min(len(self._rows), self._shown + self.page_rows))

    def clear(self) -> None:
        self.beginResetModel()
        self._rows = []
        self._shown = 0
        self.endResetModel()

    def append(self, rows: tuple[SummaryRow, ...]) -> None:
        self._rows.extend(rows)
        if self._shown < self.page_rows:  # the first page fills as results come
            self._show(min(len(self._rows), self.page_rows))

    def _show(self, count: int) -> None:
        if count <= self._shown:
            return
        self.beginInsertRows(QModelIndex(), self._shown, count - 1)
        self._shown = count
        self.endInsertRows()

    def row(self, i: int) -> RepoSummary:
        return RepoSummary(*self._rows[i])
