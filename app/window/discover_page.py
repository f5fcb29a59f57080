"""The Discover page: search the Hub, open a repository, see each quantization's plan on
this machine before downloading it, and follow the downloads (pause, resume, cancel, load).

A thin layer: ``DiscoverController`` does the work on worker threads; the result list is a
model behind a uniform-height ``QListView``, so 50,000 results cost what one screen does."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListView,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSplitter,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.services.discover import DiscoverController, QuantPlan, SummaryRow
from app.widgets.memory_bar import MemoryBar
from app.widgets.settings_hub import HubSettingsPage
from app.wording.presenters import fit_summary
from engine import (
    DownloadProgress,
    DownloadState,
    QuantOption,
    RepoFiles,
    RepoSummary,
    Verdict,
    format_bytes,
    format_count,
)

VERDICT_COLORS = {
    Verdict.FITS: "#2ca02c",
    Verdict.PARTIAL_OFFLOAD: "#e69500",
    Verdict.TIGHT: "#e69500",
    Verdict.DOES_NOT_FIT: "#d62728",
}
ERROR_STYLE = "color: #d62728;"
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


class DownloadRow(QFrame):
    """One download: title, bar, speed and time left, and what can be done with it."""

    def __init__(self, controller: DiscoverController, progress: DownloadProgress,
                 load: Signal) -> None:  # fmt: skip
        super().__init__()
        self.setObjectName(f"download-{progress.key}")
        self.key = progress.key
        self.controller = controller
        self._load = load
        self.target: Path | None = None
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 2)
        self.title = QLabel(progress.title)
        self.title.setMinimumWidth(220)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.detail = QLabel()
        self.detail.setMinimumWidth(220)
        self.pause_button = QPushButton("Pause")
        self.pause_button.setObjectName("pauseDownload")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("cancelDownload")
        self.load_button = QPushButton("Load")
        self.load_button.setObjectName("loadDownload")
        self.load_button.setVisible(False)
        for w in (self.title, self.bar, self.detail, self.pause_button, self.cancel_button, self.load_button):
            layout.addWidget(w)
        layout.setStretch(1, 1)
        self.pause_button.clicked.connect(self._pause_or_resume)
        self.cancel_button.clicked.connect(lambda: self.controller.cancel(self.key))
        self.load_button.clicked.connect(lambda: self.target and self._load.emit(self.target))
        self.state = progress.state
        self.update_progress(progress)

    def _pause_or_resume(self) -> None:
        if self.state in (DownloadState.PAUSED, DownloadState.FAILED):
            self.controller.resume(self.key)
        else:
            self.controller.pause(self.key)

    def update_progress(self, p: DownloadProgress) -> None:
        self.state = p.state
        self.bar.setValue(int(p.fraction * 1000))
        text = f"{format_bytes(p.done_bytes)} of {format_bytes(p.total_bytes)}"
        if p.state is DownloadState.RUNNING:
            text += f" · {format_bytes(p.speed)}/s"
            if p.eta_s is not None:
                s = int(p.eta_s)
                text += f" · {s // 60}:{s % 60:02d} left"
        else:
            text += f" · {p.state.value}"
        if p.error:
            text = p.error
        self.detail.setText(text)
        self.detail.setToolTip(text)
        self.detail.setStyleSheet(ERROR_STYLE if p.state is DownloadState.FAILED else "")
        active = not p.state.finished
        self.pause_button.setVisible(active or p.state is DownloadState.FAILED)
        self.pause_button.setText(
            "Resume" if p.state in (DownloadState.PAUSED, DownloadState.FAILED) else "Pause"
        )
        self.cancel_button.setVisible(active or p.state is DownloadState.FAILED)
        if p.state is DownloadState.DONE and p.target is not None:
            self.target = Path(p.target)
            self.load_button.setVisible(True)


class HubSettingsDialog(QDialog):
    """Discover's "Hub settings…": Settings → Hub's page in a dialog of its own."""

    def __init__(self, controller: DiscoverController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Hugging Face Hub")
        self.page = HubSettingsPage(controller)
        page = self.page
        self.endpoint, self.token, self.forget, self.parallel, self.error = (
            page.endpoint, page.token, page.forget, page.parallel, page.error
        )  # fmt: skip
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.save)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(page)
        layout.addWidget(buttons)

    def save(self) -> None:
        if self.page.save():
            self.accept()


class DiscoverPage(QSplitter):
    """Search at the left; the chosen repository's quantizations and their plans at the
    right; downloads underneath."""

    load_requested = Signal(object)  # Path of a downloaded model
    add_requested = Signal()  # offline: "Add models from disk…"
    library_requested = Signal()  # offline: the models already on disk

    def __init__(self, controller: DiscoverController, parent: QWidget | None = None) -> None:
        super().__init__(Qt.Orientation.Vertical, parent)
        self.setObjectName("discoverPage")
        self.controller = controller
        self._options: list[QuantOption] = []
        self._rows: dict[str, DownloadRow] = {}

        # -- search column
        self.search_field = QLineEdit()
        self.search_field.setObjectName("hubSearch")
        self.search_field.setPlaceholderText("Search the Hugging Face Hub for GGUF models…")
        self.search_button = QPushButton("Search")
        self.settings_button = QPushButton("Hub settings…")
        self.results_model = RepoListModel()
        self.results = QListView()
        self.results.setObjectName("hubResults")
        self.results.setModel(self.results_model)
        # Uniform sizes and a batched layout keep an insert O(batch): in the default single
        # pass, each batch of rows relays out the whole list (60 ms per insert at 45,000 rows).
        self.results.setUniformItemSizes(True)
        self.results.setLayoutMode(QListView.LayoutMode.Batched)
        self.results.setBatchSize(256)
        self.results.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.results.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        # A result is two lines cut to the column (the name in full in its tooltip), set
        # apart from the next: no sideways scrolling through a list of names.
        self.results.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.results.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.results.setWordWrap(False)
        self.results.setSpacing(3)
        self.results.setAlternatingRowColors(True)
        self.start_panel = StartPanel()
        self.start_panel.search_requested.connect(self.search_for)
        self.offline_panel = OfflinePanel()
        self.offline_panel.retry_requested.connect(self.start_search)
        self.offline_panel.add_requested.connect(self.add_requested)
        self.offline_panel.library_requested.connect(self.library_requested)
        self.results_stack = QStackedWidget()
        self.results_stack.addWidget(self.start_panel)
        self.results_stack.addWidget(self.results)
        self.results_stack.addWidget(self.offline_panel)
        self.search_status = QLabel("Search the Hub: results show name, author, downloads, likes, license.")
        self.search_status.setObjectName("searchStatus")
        self.search_status.setWordWrap(True)
        left = QWidget()
        lv = QVBoxLayout(left)
        row = QHBoxLayout()
        row.addWidget(self.search_field, 1)
        row.addWidget(self.search_button)
        lv.addLayout(row)
        lv.addWidget(self.results_stack, 1)
        lv.addWidget(self.search_status)
        lv.addWidget(self.settings_button)

        # -- repository details
        self.repo_title = QLabel("Choose a repository")
        self.repo_title.setObjectName("repoTitle")
        font = self.repo_title.font()
        font.setPointSizeF(font.pointSizeF() * 1.3)
        font.setBold(True)
        self.repo_title.setFont(font)
        self.repo_facts = QLabel()
        self.repo_facts.setWordWrap(True)
        self.quants = QTableWidget(0, 5)
        self.quants.setObjectName("quantTable")
        self.quants.setHorizontalHeaderLabels(["Quantization", "Size", "Files", "On this machine", ""])
        self.quants.verticalHeader().setVisible(False)
        self.quants.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.quants.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.quants.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        header = self.quants.horizontalHeader()
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        self.memory_bar = MemoryBar()
        self.plan_detail = QLabel()
        self.plan_detail.setObjectName("planDetail")
        self.plan_detail.setWordWrap(True)
        self.projector_label = QLabel()
        self.projector_label.setObjectName("projectorLabel")
        self.projector_button = QPushButton("Download projector")
        self.projector_button.setObjectName("downloadProjector")
        self.projector_button.setVisible(False)
        self.repo_error = QLabel()
        self.repo_error.setObjectName("repoError")
        self.repo_error.setStyleSheet(ERROR_STYLE)
        self.repo_error.setWordWrap(True)
        right = QWidget()
        rv = QVBoxLayout(right)
        rv.addWidget(self.repo_title)
        rv.addWidget(self.repo_facts)
        rv.addWidget(self.repo_error)
        rv.addWidget(self.quants, 1)
        rv.addWidget(self.memory_bar)
        rv.addWidget(self.plan_detail)
        prow = QHBoxLayout()
        prow.addWidget(self.projector_label, 1)
        prow.addWidget(self.projector_button)
        rv.addLayout(prow)

        top = QSplitter(Qt.Orientation.Horizontal)
        top.addWidget(left)
        top.addWidget(right)
        top.setStretchFactor(1, 1)
        top.setSizes([380, 800])

        # -- downloads
        self.downloads_box = QWidget()
        self.downloads_layout = QVBoxLayout(self.downloads_box)
        self.downloads_layout.setContentsMargins(0, 0, 0, 0)
        self.downloads_layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.downloads_box)
        scroll.setObjectName("downloads")
        bottom = QWidget()
        bv = QVBoxLayout(bottom)
        bv.setContentsMargins(6, 0, 6, 6)
        self.downloads_title = QLabel()
        self._show_download_limit()
        bv.addWidget(self.downloads_title)
        bv.addWidget(scroll, 1)

        self.addWidget(top)
        self.addWidget(bottom)
        self.setStretchFactor(0, 3)
        self.setStretchFactor(1, 1)

        self.search_field.returnPressed.connect(self.start_search)
        self.search_button.clicked.connect(self.start_search)
        self.settings_button.clicked.connect(self.open_hub_settings)
        controller.settings_changed.connect(self._show_download_limit)
        self.results.selectionModel().currentChanged.connect(self._on_result_chosen)
        self.quants.itemSelectionChanged.connect(self._show_selected_plan)
        self.projector_button.clicked.connect(self._download_projector)
        controller.search_started.connect(self._on_search_started)
        controller.results_appended.connect(self.results_model.append)
        controller.search_finished.connect(self._on_search_finished)
        controller.search_failed.connect(self._on_search_failed)
        controller.search_offline.connect(self._on_offline)
        controller.repo_loaded.connect(self._on_repo_loaded)
        controller.repo_failed.connect(self._on_repo_failed)
        controller.plan_ready.connect(self._on_plan)
        controller.download_changed.connect(self._on_download)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.controller.warm_up()

    # -- search -----------------------------------------------------------------------------

    def open_hub_settings(self) -> None:
        HubSettingsDialog(self.controller, self).exec()

    def _show_download_limit(self) -> None:
        self.downloads_title.setText(f"Downloads (at most {self.controller.manager.max_parallel} at once)")

    def start_search(self) -> None:
        self.controller.search(self.search_field.text().strip())

    def search_for(self, query: str) -> None:
        """Search as if ``query`` were typed (a suggested search)."""
        self.search_field.setText(query)
        self.start_search()

    def set_models_on_disk(self, count: int) -> None:
        """How many models the library holds: what still works when the Hub cannot be reached."""
        self.offline_panel.set_models_on_disk(count)

    def _on_offline(self, message: str) -> None:
        self.offline_panel.show_error(message)
        self.results_stack.setCurrentWidget(self.offline_panel)

    def _on_search_started(self, query: str) -> None:
        self.results_stack.setCurrentWidget(self.results)
        self.results_model.clear()
        self.search_status.setStyleSheet("")
        self.search_status.setText(f"Searching for {query!r}…" if query else "Searching…")

    def _on_search_finished(self, count: int) -> None:
        self.search_status.setText(f"{count:,} GGUF repositories" if count else "No GGUF repositories match.")

    def _on_search_failed(self, message: str) -> None:
        self.search_status.setStyleSheet(ERROR_STYLE)
        self.search_status.setText(message)

    def _on_result_chosen(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            self.open_repo(self.results_model.row(current.row()))

    def open_repo(self, summary: RepoSummary | str) -> None:
        repo_id = summary if isinstance(summary, str) else summary.repo_id
        self.repo_title.setText(repo_id)
        self.repo_facts.setText("" if isinstance(summary, str) else repo_facts(summary))
        self.repo_error.clear()
        self.quants.setRowCount(0)
        self._options = []
        self.memory_bar.set_devices(())
        self.plan_detail.clear()
        self.projector_label.clear()
        self.projector_button.setVisible(False)
        self.controller.open_repo(repo_id)

    # -- one repository -------------------------------------------------------------------------

    def _on_repo_failed(self, message: str) -> None:
        self.repo_error.setText(message)

    def _on_repo_loaded(self, listing: RepoFiles) -> None:
        self._options = list(listing.quants)
        self.quants.setRowCount(len(self._options))
        for i, option in enumerate(self._options):
            parts = f"{len(option.files)} parts" if option.is_split else "1 file"
            self.quants.setItem(i, 0, QTableWidgetItem(option.label))
            self.quants.setItem(i, 1, QTableWidgetItem(format_bytes(option.total_size)))
            self.quants.setItem(i, 2, QTableWidgetItem(parts))
            self.quants.setItem(i, 3, QTableWidgetItem("reading its header…"))
            button = QPushButton("Download")
            button.setObjectName(f"download-{option.label}")
            button.clicked.connect(lambda _c=False, o=option: self.controller.download(o))
            self.quants.setCellWidget(i, 4, button)
        gated = " · gated: needs a token with access" if listing.gated else ""
        self.repo_facts.setText((self.repo_facts.text() or listing.repo_id) + gated)
        if listing.projectors:
            p = listing.projectors[0]
            self.projector_label.setText(f"Vision projector: {p.name} ({format_bytes(p.size)})")
            self.projector_button.setVisible(True)
        if self._options:
            self.quants.selectRow(0)

    def _on_plan(self, plan: QuantPlan) -> None:
        for i, option in enumerate(self._options):
            if option.label != plan.label:
                continue
            item = self.quants.item(i, 3)
            if plan.plan is not None:
                item.setText(fit_summary(plan.plan))
                item.setForeground(_color(VERDICT_COLORS[plan.plan.verdict]))
            else:
                item.setText(plan.error or "")
                item.setForeground(_color("#d62728"))
            item.setToolTip(item.text())
        self._show_selected_plan()

    def _show_selected_plan(self) -> None:
        rows = self.quants.selectionModel().selectedRows()
        if not rows or rows[0].row() >= len(self._options):
            return
        option = self._options[rows[0].row()]
        planned = self.controller.plans.get(option.label)
        if planned is None or planned.plan is None:
            self.memory_bar.set_devices(())
            self.plan_detail.setText(planned.error if planned and planned.error else "")
            return
        self.memory_bar.set_devices(planned.plan.memory)
        read = planned.inspection
        source = (
            "from the cached header"
            if read is None or read.from_cache
            else f"from its header: {format_bytes(read.bytes_read)} in {read.requests} requests"
        )
        vision = f", with the vision projector {planned.projector}" if planned.projector else ""
        self.plan_detail.setText(
            f"{option.label}{vision}: {fit_summary(planned.plan)} — planned {source}, before any download."
        )

    def _download_projector(self) -> None:
        listing = self.controller.repo
        if listing is not None and listing.projectors:
            self.controller.download(listing.find(listing.projectors[0].path))

    # -- downloads ------------------------------------------------------------------------------

    def _on_download(self, progress: DownloadProgress) -> None:
        row = self._rows.get(progress.key)
        if row is None:
            row = DownloadRow(self.controller, progress, self.load_requested)
            self._rows[progress.key] = row
            self.downloads_layout.insertWidget(self.downloads_layout.count() - 1, row)
        row.update_progress(progress)

    def download_rows(self) -> dict[str, DownloadRow]:
        return dict(self._rows)


def _color(name: str):  # -> QBrush
    from PySide6.QtGui import QBrush, QColor

    return QBrush(QColor(name))
