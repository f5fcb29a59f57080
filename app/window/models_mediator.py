"""Between the Models page and the services: the library entry selected shows its plan and
load controls (with the settings it was last loaded with, its projectors and the smaller
models that can draft for it), a remote model selected shows its facts, the remote servers'
listings join the library's list; models added by file dialog or dropped on the window; the
page brought up when the library is empty, and the loaded model shown there on request."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QFileDialog, QStackedWidget, QWidget

from app.services.library import LibraryController
from app.services.model_session import ModelSession
from app.services.remote_servers import RemoteServers
from app.settings.load_settings import request_from_dict, settings_key
from app.settings.recent_folder import RecentFolder
from app.store.history import Store
from app.widgets.library_panel import LibraryPanel
from app.widgets.model_panel import ModelPanel
from app.widgets.nav_rail import Page
from app.widgets.remote_panel import RemotePanel
from engine import LibraryEntry, ModelInfo, RemoteModelInfo, draft_candidates


def dropped_paths(event: QDragEnterEvent | QDropEvent) -> list[Path]:
    """Local files ending in .gguf, and folders (scanned recursively)."""
    mime = event.mimeData()
    if not mime.hasUrls():
        return []
    paths = []
    for url in mime.urls():
        if not url.isLocalFile():
            continue
        path = Path(url.toLocalFile())
        if path.is_dir() or path.suffix.lower() == ".gguf":
            paths.append(path)
    return paths


class ModelsMediator:
    """``details``: the stack of the model panel and the remote model's panel; ``pages``: the
    window's current page and a way to show another; ``recent_folder``: where the file
    dialogs open now (Settings may change the models folder); ``say``: a status line."""

    def __init__(
        self,
        store: Store,
        library: LibraryController,
        session: ModelSession,
        remote_servers: RemoteServers,
        library_panel: LibraryPanel,
        model_panel: ModelPanel,
        remote_panel: RemotePanel,
        details: QStackedWidget,
        pages: tuple[Callable[[], Page], Callable[[Page], None]],
        recent_folder: Callable[[], RecentFolder],
        say: Callable[[str], None],
        dialog_parent: QWidget,
    ) -> None:
        self.store = store
        self.library = library
        self.session = session
        self.remote_servers = remote_servers
        self.library_panel = library_panel
        self.model_panel = model_panel
        self.remote_panel = remote_panel
        self.details = details
        self._current_page, self._show_page = pages
        self._recent_folder = recent_folder
        self._say = say
        self._dialog_parent = dialog_parent
        library_panel.selection_changed.connect(self._on_library_selection)
        library_panel.remote_selected.connect(self._on_remote_selection)
        remote_servers.changed.connect(self._on_remote_servers)
        library.scan_finished.connect(self._on_scan_finished)
        library.busy_changed.connect(self._on_busy)

    # -- adding models ------------------------------------------------------------------------

    def choose_files(self) -> None:
        recent = self._recent_folder()
        start = str(recent.get())
        parent = self._dialog_parent
        files, _ = QFileDialog.getOpenFileNames(parent, "Add models", start, "GGUF models (*.gguf)")
        if files:
            recent.remember(Path(files[0]).parent)
            self.library.add_paths([Path(f) for f in files])

    def choose_folder(self) -> None:
        recent = self._recent_folder()
        start = str(recent.get())
        folder = QFileDialog.getExistingDirectory(self._dialog_parent, "Add a folder of models", start)
        if folder:
            recent.remember(Path(folder))
            self.library.add_paths([Path(folder)])

    def drop(self, paths: list[Path]) -> None:
        self._show_page(Page.MODELS)
        self.library.add_paths(paths, select=paths[0])

    def _on_scan_finished(self) -> None:
        counts = self.library.counts()
        if (
            counts.models == 0
            and self.session.model is None
            and self.session.remote is None
            and self._current_page() is not Page.DISCOVER
        ):
            # First run (or an empty library): show how to add models, not an empty chat;
            # but a projector downloaded first must not pull the user away from Discover.
            self._show_page(Page.MODELS)
        elif self.library_panel.selected_entry() is None:
            self.library_panel.select_first()
        self._say(counts.describe())

    def _on_busy(self, busy: bool) -> None:
        if busy:
            self._say("Scanning for models…")

    # -- the loaded model -----------------------------------------------------------------------

    def show_loaded_model(self) -> None:
        """The toolbar's Details: the Models page, with the loaded model selected."""
        self._show_page(Page.MODELS)
        plan = self.session.plan
        if plan is not None:
            self.library_panel.select_path(plan.model.path)
        elif self.session.remote is not None:
            self.library_panel.select_remote(self.session.remote.info.key)

    def offer_parallel(self, parallel: int) -> None:
        """A queued chat's "More parallel conversations…": the loaded model's settings on
        the Models page with ``parallel`` conversations, planned, for the user to reload."""
        plan = self.session.plan
        if plan is None:
            return
        self.show_loaded_model()
        self.model_panel.apply_request(replace(plan.request, parallel=parallel))
        self._say(
            f"Parallel conversations set to {parallel}: press “Reload with these settings” once the "
            "reply being written is done (reloading stops it)."
        )

    # -- the selection ------------------------------------------------------------------------

    def _on_library_selection(self, entry: LibraryEntry | None) -> None:
        self.details.setCurrentWidget(self.model_panel)
        if entry is None:
            self.model_panel.show_model(None)
            return
        if entry.info is None:
            self.model_panel.show_invalid(str(entry.path), entry.error or "unreadable")
            return
        remembered_data = self.store.get_setting(settings_key(entry.path))
        remembered = request_from_dict(remembered_data, self._find_info) if remembered_data else None
        self.model_panel.show_model(
            entry.info, self.library.projectors_for(entry), self._draft_candidates(entry.info), remembered
        )

    def _find_info(self, path: Path) -> ModelInfo | None:
        entry = self.library.library.get(path)
        return entry.info if entry is not None else None

    def _draft_candidates(self, target: ModelInfo) -> tuple[ModelInfo, ...]:
        """Library models that can draft for ``target``, the default pairing first."""
        return draft_candidates(target, (e.info for e in self.library.entries() if e.info is not None))

    def _on_remote_servers(self) -> None:
        self.library_panel.set_remote(self.remote_servers.listings())

    def _on_remote_selection(self, info: RemoteModelInfo | None) -> None:
        if info is None:
            return
        remote = self.session.remote
        self.remote_panel.show_model(info, remote is not None and remote.info == info)
        self.details.setCurrentWidget(self.remote_panel)
