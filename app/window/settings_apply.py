"""What Settings change in the running window, kept here so the window only calls in:
the saved appearance and load defaults at start-up, the dialog itself, and the models
folder changed live (downloads, the library, the file dialogs)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from PySide6.QtWidgets import QApplication

from app.chat.sampling_panel import SamplingPanel, SamplingSettings
from app.chat.theme import apply_appearance
from app.conversation.controller import ChatController
from app.platform.paths import AppPaths, save_models_dir
from app.services.discover import DiscoverController
from app.services.library import LibraryController
from app.services.remote_servers import RemoteServers
from app.services.tools import ToolsService
from app.settings.preferences import Preferences
from app.settings.recent_folder import RecentFolder
from app.store.history import Store
from app.widgets.model_panel import ModelPanel
from app.widgets.settings_dialog import SettingsContext, SettingsDialog, SettingsPage
from engine import DownloadState, EngineError, HardwareSnapshot, plural

# A paused or failed download keeps its parts in the old folder's staging area to resume from.
_SETTLED = (DownloadState.DONE, DownloadState.CANCELLED)


class SettingsWindow(Protocol):
    """What Settings change in the window (``app.window.main_window.MainWindow`` is one)."""

    paths: AppPaths
    store: Store
    library: LibraryController
    recent_folder: RecentFolder
    remote_servers: RemoteServers
    tools: ToolsService
    discover: DiscoverController
    chat: ChatController
    model_panel: ModelPanel
    sampling_panel: SamplingPanel
    settings_dialog: SettingsDialog | None

    def planning_hardware(self) -> HardwareSnapshot: ...


class ModelsFolderBusy(EngineError):
    """Downloads not finished still write to the current models folder."""


def install_preferences(window: SettingsWindow) -> None:
    """At start-up (the window's constructor): the saved theme and font size, and the GPU
    layers a model without settings of its own starts with."""
    preferences = Preferences(window.store)
    app = QApplication.instance()
    if isinstance(app, QApplication):
        apply_appearance(app, preferences)
    window.model_panel.default_gpu_layers = preferences.default_gpu_layers


def open_settings_dialog(window: SettingsWindow, page: SettingsPage | None = None) -> SettingsDialog:
    """Settings, made when first opened, not modal (the window goes on while remote servers
    are listed); at ``page`` when given."""
    if window.settings_dialog is None:
        context = SettingsContext(
            preferences=Preferences(window.store),
            servers=window.remote_servers,
            hub=window.discover,
            models_folder=WindowModelsFolder(window),
            hardware=window.planning_hardware(),
            tools=window.tools,
        )
        window.settings_dialog = SettingsDialog(context, window)
        window.settings_dialog.general_page.defaults_changed.connect(
            lambda settings: _show_defaults(window, settings)
        )
        # The load plan on screen follows the new default at once, not at the next model.
        window.settings_dialog.hardware_page.threads.valueChanged.connect(window.model_panel.set_default_threads)
    dialog = window.settings_dialog
    if page is not None:
        dialog.show_page(page)
    dialog.show()
    dialog.raise_()
    dialog.activateWindow()
    return dialog


def _show_defaults(window: SettingsWindow, settings: SamplingSettings) -> None:
    """With no conversation shown, the chat's panel holds what the first one will start with."""
    if window.chat.current_id is None:
        window.sampling_panel.set_settings(settings)


class WindowModelsFolder:
    """The window's models folder (``window.paths.models_dir``), changed live: new downloads
    go to the new folder, the library scans it, the file dialogs start there; remembered
    in settings.json for the next start (and the CLI's `hearth pull`)."""

    def __init__(self, window: SettingsWindow) -> None:
        self._window = window

    def current(self) -> Path:
        return self._window.paths.models_dir

    def change(self, folder: Path) -> Path:
        window = self._window
        unsettled = [p for p in window.discover.manager.jobs() if p.state not in _SETTLED]
        if unsettled:
            raise ModelsFolderBusy(
                f"{plural(len(unsettled), 'download')} not finished keep their parts in "
                f"{self.current()}: finish or cancel them first."
            )
        paths = save_models_dir(window.paths, folder)
        models = paths.models_dir
        window.paths = paths
        discover = window.discover
        discover.paths = paths
        downloader = discover.manager.downloader
        downloader.models_dir = models
        downloader.staging = models / downloader.staging.name
        window.recent_folder = RecentFolder(window.store, models)
        window.library.add_paths([models])
        return models
