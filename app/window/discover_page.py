"""The Discover page: search the Hub, open a repository, see each quantization's plan on
this machine before downloading it, and follow the downloads (pause, resume, cancel, load).

A thin layer: ``DiscoverController`` does the work on worker threads; the result list is a
model behind a uniform-height ``QListView``, so 50,000 results cost what one screen does.

The parts: ``discover_results`` (the result list model, the start and offline panels),
``discover_repo`` (the repository view, mixed in here), ``discover_downloads`` (a download's
row) and ``hub_dialog`` (Hub settings)."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListView,
    QPushButton,
    QScrollArea,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.services.discover import DiscoverController
from app.widgets.styles import ERROR_STYLE
from app.window.discover_downloads import DownloadRow
from app.window.discover_repo import DiscoverRepoView
from app.window.discover_results import OfflinePanel, RepoListModel, StartPanel
from app.window.hub_dialog import HubSettingsDialog
from engine import (
    DownloadProgress,
    QuantOption,
)


class DiscoverPage(DiscoverRepoView, QSplitter):
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

        right = self._build_repo_view()

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
