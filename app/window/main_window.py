"""Hearth's main window.

Left edge: the navigation rail, one button per page. The Chats page holds the
conversations, the chat and its settings; the Models page the library, the hardware and
the selected model's plan and load controls. Right: the live dashboard, in a dock the user
can keep open. Top: the loaded model, always visible.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings, Qt, QTimer
from PySide6.QtGui import (
    QAction,
    QCloseEvent,
    QDragEnterEvent,
    QDropEvent,
    QKeySequence,
    QShowEvent,
)
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QStackedWidget,
    QToolBar,
    QToolButton,
    QWidget,
)

from app.chat import Composer, ConversationList, MessageView, SamplingPanel
from app.chat.lexer_warmup import warm_lexers_when_idle
from app.chat.model_picker import PICKER_SHORTCUT, ModelPickerPopup
from app.conversation.context_fix import context_fix
from app.conversation.controller import ChatController
from app.conversation.model_chooser import ModelChoice, ModelChooser
from app.dashboard import DashboardView
from app.platform.paths import AppPaths
from app.services.discover import DiscoverController
from app.services.library import LibraryController
from app.services.local_server import LocalServer, ServerStatus
from app.services.model_session import ModelSession, SessionState
from app.services.planning import planning_hardware
from app.services.remote_servers import RemoteServers
from app.services.workers import WorkerRegistry
from app.settings.key_vault import KeyVault
from app.settings.load_settings import request_from_dict, request_to_dict, settings_key
from app.settings.preferences import Preferences
from app.settings.recent_folder import RecentFolder
from app.store.history import ReplyModel, Store
from app.widgets.hardware_panel import HardwarePanel
from app.widgets.library_panel import LibraryPanel
from app.widgets.load_progress import PHASE_LABELS
from app.widgets.model_badge import ModelBadge
from app.widgets.model_panel import ModelPanel
from app.widgets.nav_rail import NavRail, Page
from app.widgets.remote_panel import RemotePanel
from app.widgets.server_panel import ServerPanel
from app.widgets.settings_apply import install_preferences, open_settings_dialog
from app.widgets.settings_dialog import SettingsDialog, SettingsPage
from app.window.chats_page import ChatsPage
from app.window.discover_page import DiscoverPage
from app.window.geometry import PREFERRED_SIZE, first_geometry, fit_to_screen, screen_room
from app.window.models_page import ModelsPage
from app.window.quit_prompt import confirm_quit
from app.wording.presenters import BASE_MODEL_BADGE
from engine import (
    EngineError,
    HardwareSnapshot,
    LibraryEntry,
    LoadPhase,
    LoadPlan,
    ModelInfo,
    PromptSize,
    RemoteModel,
    RemoteModelInfo,
    SpeculationConfig,
    take_snapshot,
)

SETTINGS_COLUMN_KEY = "window.chat_settings_shown"


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


class MainWindow(QMainWindow):
    def __init__(
        self,
        paths: AppPaths,
        hardware: HardwareSnapshot | None = None,
        telemetry: object | None = None,
        keys: KeyVault | None = None,
    ) -> None:
        super().__init__()
        self.paths = paths
        self.setWindowTitle("Hearth")
        self.setAcceptDrops(True)
        self._shown_once = False
        self._close_confirmed = False
        self._bring_chat_when_ready = False
        self._hardware = hardware
        self._telemetry = telemetry

        self.store = Store(paths.database_file)
        self.session = ModelSession(self)
        self.library = LibraryController(paths.library_file, default_folders=(paths.models_dir,), parent=self)
        self.recent_folder = RecentFolder(self.store, paths.models_dir)
        self.remote_servers = RemoteServers(self.store, keys or KeyVault.system(), self)
        self.settings_dialog: SettingsDialog | None = None  # made when first opened

        self.library_panel = LibraryPanel(self.library)
        self.hardware_panel = HardwarePanel()
        self.workers = WorkerRegistry(paths.workers_file, parent=self)
        self.workers.changed.connect(self._workers_changed)
        self.session.model_ready.connect(lambda model: self.workers.set_in_use(model.plan.workers))
        self.session.model_unloaded.connect(lambda: self.workers.set_in_use(()))
        self.hardware_panel.workers.add_requested.connect(self.ask_for_worker)
        self.model_panel = ModelPanel()
        install_preferences(self)  # Settings' theme, font size and load defaults
        self.remote_panel = RemotePanel()
        # The Models page's details: a GGUF's plan and load controls, or a remote model's facts.
        self.details_stack = QStackedWidget()
        self.details_stack.addWidget(self.model_panel)
        self.details_stack.addWidget(self.remote_panel)
        self.conversation_list = ConversationList()
        self.message_view = MessageView()
        self.composer = Composer()
        self.sampling_panel = SamplingPanel()

        # One navigation: the rail picks a page; each page holds its list and its details.
        self.chats_page = ChatsPage(
            self.conversation_list, self.message_view, self.composer, self.sampling_panel
        )
        self.models_page = ModelsPage(self.library_panel, self.hardware_panel, self.details_stack)
        self.discover = DiscoverController(paths, hardware, parent=self, workers=lambda: self.workers.workers)
        self.discover_page = DiscoverPage(self.discover)
        self.pages = QStackedWidget()
        self._page_widgets = {
            Page.CHATS: self.chats_page,
            Page.MODELS: self.models_page,
            Page.DISCOVER: self.discover_page,
        }
        for widget in self._page_widgets.values():
            self.pages.addWidget(widget)
        self.nav = NavRail()
        self.nav.page_selected.connect(self.show_page)
        central = QWidget()
        central_layout = QHBoxLayout(central)
        central_layout.setContentsMargins(0, 0, 0, 0)
        central_layout.setSpacing(0)
        central_layout.addWidget(self.nav)
        central_layout.addWidget(self.pages, 1)
        self.setCentralWidget(central)

        self.dashboard_dock = QDockWidget("Dashboard", self)
        self.dashboard_dock.setObjectName("dashboardDock")
        self.dashboard_dock.setVisible(False)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.dashboard_dock)
        self.dashboard: DashboardView | None = None  # created on first show: it samples while visible

        # The Local server: the OpenAI-compatible API serving whatever model is loaded.
        self.local_server = LocalServer(self.store, lambda: self.session.model, self)
        self.server_panel = ServerPanel()
        self.server_dock = QDockWidget("Local server", self)
        self.server_dock.setObjectName("serverDock")
        self.server_dock.setWidget(self.server_panel)
        self.server_dock.setVisible(False)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.server_dock)

        self.chat = ChatController(
            self.store,
            self.session,
            self.message_view,
            self.composer,
            self.conversation_list,
            self.sampling_panel,
            parent=self,
        )
        # The picker atop the chat; a chat's own model loaded for it; the last model at start.
        self.chooser = ModelChooser(
            self.store,
            self.library,
            self.remote_servers,
            self.session,
            self.planning_hardware,
            lambda plan, speculation: self.load_model(plan, speculation),
            lambda info: self.use_remote(info),
            self,
        )
        self.chat.load_for = lambda chat: self.chooser.load_for_chat(self.chat.writer_of(chat))
        self.picker_popup = ModelPickerPopup(self)
        self.picker_popup.chosen.connect(self.choose_model)
        self.chats_page.header.model.clicked.connect(self.open_model_picker)
        self._notice_writer: ReplyModel | None = None
        self.badge = ModelBadge()
        self._build_actions()
        self.status_label = QLabel()
        self.statusBar().addWidget(self.status_label, 1)
        # Why llama.cpp cannot run here, if so: stays while library scans update status_label.
        self.native_label = QLabel()
        self.native_label.setObjectName("nativeError")
        self.native_label.setStyleSheet("color: #d62728;")
        self.native_label.setWordWrap(True)
        self.native_label.setVisible(False)
        self.statusBar().addPermanentWidget(self.native_label, 2)
        # While the server is on: its port, one click from its panel.
        self.server_button = QToolButton()
        self.server_button.setAutoRaise(True)
        self.server_button.setToolTip("The local API server: show its panel")
        self.server_button.clicked.connect(self.show_server_panel)
        self.server_button.setVisible(False)
        self.statusBar().addPermanentWidget(self.server_button)
        self.local_server.status_changed.connect(self._on_server_status)
        self.local_server.request_logged.connect(self.server_panel.add_record)
        self.server_panel.enabled_toggled.connect(self.set_serving)
        self.server_panel.port_changed.connect(self.local_server.set_port)

        self.library_panel.selection_changed.connect(self._on_library_selection)
        self.library_panel.remote_selected.connect(self._on_remote_selection)
        self.remote_servers.changed.connect(self._on_remote_servers)
        self.remote_panel.use_requested.connect(self.use_remote)
        self.remote_panel.settings_requested.connect(lambda: open_settings_dialog(self, SettingsPage.REMOTE))
        self.session.remote_ready.connect(self._on_remote_ready)
        self.library.scan_finished.connect(self._on_scan_finished)
        self.library.busy_changed.connect(self._on_busy)
        self.model_panel.load_requested.connect(self._load_from_page)
        self.model_panel.cancel_requested.connect(self.session.cancel_load)
        self.badge.unload_requested.connect(self.unload_model)
        self.badge.show_model_requested.connect(self.show_loaded_model)
        self.badge.pick_requested.connect(self.open_model_picker)
        self.session.state_changed.connect(self._on_session_state)
        self.session.phase_started.connect(self._on_phase_started)
        self.session.phase_progress.connect(self._on_phase_progress)
        self.session.phase_finished.connect(self.model_panel.load_progress.phase_finished)
        self.session.load_failed.connect(self._on_load_failed)
        self.session.model_ready.connect(self._on_model_ready)
        self.chat.status.connect(self.status_label.setText)
        self.chat.title_changed.connect(self.chats_page.header.set_title)
        self._context_size: PromptSize | None = None
        self._images_left_out = False
        self._notice_fix: LoadPlan | None = None
        self.chat.context_checked.connect(self._on_context_checked)
        self.chat.images_left_out.connect(self._on_images_left_out)
        self.chat.parallel_wanted.connect(self.offer_parallel)
        self.chats_page.notice.action_clicked.connect(self._apply_notice_fix)
        self.chats_page.settings_visibility_changed.connect(self._remember_settings_column)
        # A finished download joins the library (paired with its projector there); Load loads it.
        self.discover.download_finished.connect(lambda path: self.library.add_paths([path], select=path))
        self.discover.download_failed.connect(self.status_label.setText)
        self.discover_page.load_requested.connect(self._load_downloaded_from_page)
        # Finding models (issue 26): empty states and Discover point to Add models and the
        # library; the picture button offers the models that can see; the loaded one is marked.
        self.library_panel.add_requested.connect(self.choose_files)
        self.library_panel.discover_requested.connect(lambda: self.show_page(Page.DISCOVER))
        self.discover_page.add_requested.connect(self.choose_files)
        self.discover_page.library_requested.connect(lambda: self.show_page(Page.MODELS))
        self.library.entries_changed.connect(
            lambda _e: self.discover_page.set_models_on_disk(self.library.counts().models)
        )
        self.composer.set_vision_models(self.library_panel.vision_models)
        self.composer.vision_model_chosen.connect(self.load_downloaded)  # with its projector
        self.session.model_ready.connect(lambda m: self.library_panel.set_loaded(m.plan.model.path))
        self.session.model_unloaded.connect(lambda: self.library_panel.set_loaded(None))
        self._restore_geometry()

    def _build_actions(self) -> None:
        def action(
            text: str, shortcut: str | QKeySequence.StandardKey | None, slot, tip: str = ""
        ) -> QAction:
            act = QAction(text, self)
            if shortcut is not None:
                act.setShortcut(QKeySequence(shortcut))
            if tip:
                act.setToolTip(tip)
            act.triggered.connect(slot)
            self.addAction(act)
            return act

        self.new_chat_action = action(
            "New chat", "Ctrl+N", self.new_chat, "Start a new conversation (Ctrl+N)"
        )
        self.add_files_action = action(
            "Add models…",
            "Ctrl+O",
            self.choose_files,
            "Add GGUF files to the library (they stay where they are)",
        )
        self.add_folder_action = action("Add folder…", None, self.choose_folder, "Add every GGUF in a folder")
        self.rescan_action = action("Rescan", QKeySequence.StandardKey.Refresh, self.library.rescan)
        self.focus_composer_action = action("Focus composer", "Ctrl+L", self.focus_composer)
        self.search_action = action("Search chats", "Ctrl+K", self.focus_search)
        self.picker_action = action(
            "Choose model",
            PICKER_SHORTCUT,
            self.open_model_picker,
            f"Choose the model that answers ({PICKER_SHORTCUT})",
        )
        self.chats_page_action = action("Chats", "Ctrl+1", lambda: self.show_page(Page.CHATS))
        self.models_page_action = action("Models", "Ctrl+2", lambda: self.show_page(Page.MODELS))
        self.discover_page_action = action("Discover", "Ctrl+3", lambda: self.show_page(Page.DISCOVER))
        self.quit_action = action("Quit", "Ctrl+Q", self.request_quit, "Quit Hearth (Ctrl+Q)")
        self.quit_action.setShortcutContext(Qt.ShortcutContext.ApplicationShortcut)
        # Esc stops the reply wherever the focus is; enabled only while one streams, so
        # Esc keeps its other meanings (cancel an edit, clear the search) the rest of the time.
        self.stop_action = action("Stop", "Esc", self.stop_generating, "Stop the reply (Esc)")
        self.stop_action.setEnabled(False)
        self.composer.generating_changed.connect(self.stop_action.setEnabled)
        self.dashboard_action = self.dashboard_dock.toggleViewAction()
        self.dashboard_action.setText("Dashboard")
        self.dashboard_action.setShortcut(QKeySequence("Ctrl+D"))
        self.dashboard_action.toggled.connect(self._ensure_dashboard)
        toolbar = QToolBar("Main")
        toolbar.setObjectName("mainToolbar")
        toolbar.setMovable(False)
        toolbar.addAction(self.add_files_action)
        toolbar.addAction(self.add_folder_action)
        toolbar.addSeparator()
        toolbar.addWidget(self.badge)
        toolbar.addAction(self.dashboard_action)
        # Opens the panel (its switch serves): looking at the server does not start it.
        self.server_action = self.server_dock.toggleViewAction()
        self.server_action.setText("Local server")
        self.server_action.setToolTip(
            "The OpenAI-compatible API for other programs on this machine: its switch, address "
            "and recent requests"
        )
        toolbar.addAction(self.server_action)
        self.settings_action = action(
            "Settings…", "Ctrl+,", self.open_settings, "Defaults, theme, remote servers, Hub (Ctrl+,)"
        )
        toolbar.addAction(self.settings_action)
        self.addToolBar(toolbar)

    # -- lifecycle ----------------------------------------------------------------

    def start(self, load_last: bool = True) -> None:
        """Take the hardware snapshot, scan the library, open the conversations; with
        ``load_last`` (and the preference on), load the model loaded last."""
        if self._hardware is None:
            self._hardware = take_snapshot()
        self.hardware_panel.set_snapshot(self._hardware)
        self.model_panel.set_default_threads(Preferences(self.store).default_threads())
        self.model_panel.set_hardware(self.planning_hardware())
        self.discover.set_hardware(self._hardware)
        self._workers_changed()
        self.workers.start()
        self.discover.restore_downloads()
        if self._hardware.native_error is not None:  # this llama.cpp build failed its self-check
            print(f"hearth: {self._hardware.native_error}", file=sys.stderr)
            self.native_label.setText(self._hardware.native_error)
            self.native_label.setVisible(True)
            self.model_panel.show_load_error(self._hardware.native_error)
        self.library.rescan()
        self.remote_servers.refresh()  # in the background: their models join the library
        self.chat.start()
        self._show_answering_model()
        self.chats_page.set_settings_wanted(bool(self.store.get_setting(SETTINGS_COLUMN_KEY, True)))
        page = QSettings(str(self.paths.data_dir / "window.ini"), QSettings.Format.IniFormat).value("page")
        self.show_page(Page(page) if page in {p.value for p in Page} else Page.CHATS)
        self.server_panel.set_port(self.local_server.port)
        self.local_server.restore()
        if load_last and self._hardware.native_error is None:
            self.chooser.load_last()
        warm_lexers_when_idle(self)  # the first reply with code does not pay for them

    def bring_forward(self) -> None:
        """A second launch on this data folder asked: show this window, in front."""
        if self.isMinimized():
            self.showNormal()
        self.show()
        self.raise_()
        self.activateWindow()

    def request_quit(self) -> None:
        """Ctrl+Q: close the window (and so quit), asking first while a reply is generating."""
        if self.may_close():
            self._close_confirmed = True
            self.close()

    def may_close(self) -> bool:
        """Whether the user lets the window close: asked only while replies are generating
        (they are kept, as interrupted, and can be continued next time)."""
        return not self.chat.streaming or confirm_quit(self, self.chat.streaming)

    def closeEvent(self, event: QCloseEvent) -> None:
        # The window manager's close button asks as Ctrl+Q does; a close by the program
        # itself (the session ending, a test) does not.
        if event.spontaneous() and not self._close_confirmed and not self.may_close():
            event.ignore()
            return
        self.picker_popup.hide()
        settings = QSettings(str(self.paths.data_dir / "window.ini"), QSettings.Format.IniFormat)
        settings.setValue("geometry", self.saveGeometry())
        settings.setValue("state", self.saveState())
        settings.setValue("chats_page", self.chats_page.saveState())
        settings.setValue("models_page", self.models_page.saveState())
        settings.setValue("page", self.current_page().value)
        self.chat.shutdown()
        self.workers.stop()
        self.local_server.shutdown()  # API requests end before their model goes
        self.discover.shutdown()  # downloads pause; their parts resume on the next start
        self.session.unload()
        if self.dashboard is not None:
            self.dashboard.shutdown()
        self.library.shutdown()
        self.remote_servers.shutdown()
        if self.settings_dialog is not None:
            self.settings_dialog.close()
        self.store.close()
        super().closeEvent(event)

    def _restore_geometry(self) -> None:
        settings = QSettings(str(self.paths.data_dir / "window.ini"), QSettings.Format.IniFormat)
        saved = settings.value("geometry")
        if not (isinstance(saved, QByteArray) and self.restoreGeometry(saved)):
            self.setGeometry(first_geometry(PREFERRED_SIZE, screen_room(self)))
        for key, restore in (
            ("state", self.restoreState),
            ("chats_page", self.chats_page.restoreState),
            ("models_page", self.models_page.restoreState),
        ):
            value = settings.value(key)
            if isinstance(value, QByteArray):
                restore(value)
        self.fit_screen()

    def fit_screen(self) -> None:
        """Within the screen the window is on (a geometry saved on a larger screen, or a
        frame learned only once shown, pulled back inside)."""
        fit_to_screen(self)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._shown_once:
            self._shown_once = True
            # The window manager's frame is known now: the whole window must fit.
            QTimer.singleShot(0, self, self.fit_screen)

    # -- chats -------------------------------------------------------------------------

    def new_chat(self) -> None:
        self.show_page(Page.CHATS)
        self.chat.new_conversation()

    def focus_composer(self) -> None:
        self.show_page(Page.CHATS)
        self.composer.focus_input()

    def focus_search(self) -> None:
        self.show_page(Page.CHATS)
        self.chats_page.set_settings_wanted(self.chats_page.settings_wanted())  # the list, if folded
        self.conversation_list.focus_search()

    def stop_generating(self) -> None:
        """Esc, wherever the focus is: stop the shown conversation's reply."""
        self.chat.stop()

    # -- pages -------------------------------------------------------------------------

    def current_page(self) -> Page:
        return next(p for p, w in self._page_widgets.items() if w is self.pages.currentWidget())

    def show_page(self, page: Page) -> None:
        self.pages.setCurrentWidget(self._page_widgets[page])
        self.nav.set_page(page)

    def show_loaded_model(self) -> None:
        """The toolbar's Details: the Models page, with the loaded model selected."""
        self.show_page(Page.MODELS)
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
        self.status_label.setText(
            f"Parallel conversations set to {parallel}: press “Reload with these settings” once the "
            "reply being written is done (reloading stops it)."
        )

    def _remember_settings_column(self, shown: bool) -> None:
        self.store.set_setting(SETTINGS_COLUMN_KEY, shown)

    # -- models ------------------------------------------------------------------------

    def choose_files(self) -> None:
        start = str(self.recent_folder.get())
        files, _ = QFileDialog.getOpenFileNames(self, "Add models", start, "GGUF models (*.gguf)")
        if files:
            self.recent_folder.remember(Path(files[0]).parent)
            self.library.add_paths([Path(f) for f in files])

    def choose_folder(self) -> None:
        start = str(self.recent_folder.get())
        folder = QFileDialog.getExistingDirectory(self, "Add a folder of models", start)
        if folder:
            self.recent_folder.remember(Path(folder))
            self.library.add_paths([Path(folder)])

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if dropped_paths(event):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event: QDropEvent) -> None:
        paths = dropped_paths(event)
        if not paths:
            event.ignore()
            return
        event.acceptProposedAction()
        self.show_page(Page.MODELS)
        self.library.add_paths(paths, select=paths[0])

    def load_model(self, plan: LoadPlan, speculation: SpeculationConfig | None = None) -> None:
        if self.chat.streaming and self.session.model is not None:
            self.status_label.setText(
                f"Replaced the model while {self.chat.streaming} reply(s) were generating."
            )
        self.store.set_setting(settings_key(plan.model.path), request_to_dict(plan.request, speculation))
        self.session.load(plan, speculation)
        if self.dashboard is not None:
            self.dashboard.set_model(self.session.model)  # measures the load's memory growth

    def load_and_send(self, model_path: Path, message: str | None = None) -> None:
        """Load ``model_path`` with its remembered (or default) settings; then, if given,
        send ``message`` in a new chat. For `hearth --load MODEL --send TEXT`."""
        error = self.chooser.load_path(model_path)
        if error is not None:
            self.status_label.setText(error)
            return
        if message:

            def send_when_ready(_model: object) -> None:
                self.session.model_ready.disconnect(send_when_ready)
                self.chat.new_conversation()
                self.composer.set_text(message)
                self.composer.submit()

            self.session.model_ready.connect(send_when_ready)

    def load_downloaded(self, model_path: Path) -> None:
        """Discover's Load: the model with its remembered (or default) settings and, the
        first time, the vision projector the library pairs with it."""
        self.load_and_send(model_path)

    def unload_model(self) -> None:
        self.session.unload()

    def _on_library_selection(self, entry: LibraryEntry | None) -> None:
        self.details_stack.setCurrentWidget(self.model_panel)
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
        """Smaller library models with the same vocabulary size and tokenizer family."""
        return tuple(
            e.info
            for e in self.library.entries()
            if e.info is not None
            and not e.is_projector
            and e.path != target.path
            and e.info.vocab_size == target.vocab_size
            and e.info.parameter_count < target.parameter_count
        )

    def _on_scan_finished(self) -> None:
        counts = self.library.counts()
        if (
            counts.models == 0
            and self.session.model is None
            and self.session.remote is None
            and self.current_page() is not Page.DISCOVER
        ):
            # First run (or an empty library): show how to add models, not an empty chat;
            # but a projector downloaded first must not pull the user away from Discover.
            self.show_page(Page.MODELS)
        elif self.library_panel.selected_entry() is None:
            self.library_panel.select_first()
        self.status_label.setText(counts.describe())

    def _on_busy(self, busy: bool) -> None:
        if busy:
            self.status_label.setText("Scanning for models…")

    # -- remote servers ----------------------------------------------------------------

    def open_settings(self) -> None:
        open_settings_dialog(self)

    def use_remote(self, info: RemoteModelInfo) -> None:
        """The picker's Chat with this model: a remote model answers the chats."""
        if self.chat.streaming and self.session.model is not None:
            self.status_label.setText(
                f"Replaced the model while {self.chat.streaming} reply(s) were generating."
            )
        self.session.use_remote(RemoteModel(info))

    def _on_remote_servers(self) -> None:
        self.library_panel.set_remote(self.remote_servers.listings())

    def _on_remote_selection(self, info: RemoteModelInfo | None) -> None:
        if info is None:
            return
        remote = self.session.remote
        self.remote_panel.show_model(info, remote is not None and remote.info == info)
        self.details_stack.setCurrentWidget(self.remote_panel)

    def _on_remote_ready(self, model: RemoteModel) -> None:
        self.status_label.setText(f"{model.label.name} on {model.info.endpoint.title} answers your chats.")
        shown = self.remote_panel.info
        self.remote_panel.set_in_use(shown == model.info)
        self.show_page(Page.CHATS)
        self.composer.focus_input()

    # -- loading -----------------------------------------------------------------------

    def _on_session_state(self, state: SessionState) -> None:
        plan = self.session.plan
        remote = self.session.remote
        self.badge.show_state(state, plan, self.session.speculation, remote.label if remote else None)
        if remote is None:
            self.remote_panel.set_in_use(False)
        self.model_panel.set_session(plan, state)
        if state in (SessionState.READY, SessionState.EMPTY):
            self.chats_page.header.load_line.clear()
        self._show_answering_model()
        self._show_server()

    def _show_answering_model(self) -> None:
        """The chat header names the model that will answer."""
        model = self.session.ready_model
        remote = self.session.remote
        if remote is not None:
            text = f"{remote.label.name} answers, {remote.label.detail}"
        elif model is not None:
            text = f"{model.plan.model.display_name} answers"
        elif self.session.state is SessionState.LOADING and self.session.plan is not None:
            text = f"Loading {self.session.plan.model.display_name}…"
        else:
            text = "No model loaded: choose one"
        self.chats_page.header.set_model(text)
        self._update_notice()

    def _on_context_checked(self, size: PromptSize | None) -> None:
        self._context_size = size
        self._update_notice()

    def _on_images_left_out(self, left_out: bool) -> None:
        self._images_left_out = left_out
        self._update_notice()

    def _update_notice(self) -> None:
        """What the user must know before sending, most pressing first: the conversation no
        longer fits the loaded context (with the reload that makes it fit), images this
        model cannot see, a base model that will ramble."""
        model = self.session.ready_model
        self._notice_fix = None
        self._notice_writer = None
        if model is None:
            self._notice_for_writer()
            return
        info = model.plan.model
        size = self._context_size
        if size is not None and not size.fits:
            text, fix = context_fix(model.plan, size, self.planning_hardware())
            self._notice_fix = fix
            action = f"Reload with {fix.context_per_conversation:,} tokens" if fix else ""
            self.chats_page.set_notice(text, action)
        elif self._images_left_out:
            self.chats_page.set_notice(
                f"{info.display_name} has no vision projector: the images in this conversation are "
                "left out of what it reads."
            )
        elif info.is_base_model:
            self.chats_page.set_notice(
                f"{info.display_name} — {BASE_MODEL_BADGE.lower()}: its replies will ramble on from "
                "your message. To chat, load an instruct or chat version."
            )
        else:
            self._notice_for_writer()

    def _notice_for_writer(self) -> None:
        """A conversation written by a model that is not the one answering: load it in one click."""
        writer = self.chat.writer_of(self.chat.current_id)
        notice = self.chooser.writer_notice(writer)
        self._notice_writer = writer if notice is not None else None
        self.chats_page.set_notice(*(notice or ("",)))

    def _apply_notice_fix(self) -> None:
        """The notice's one-click fix: reload the model with the context the chat needs, or
        load the model the conversation is with."""
        if self._notice_fix is not None:
            self.load_model(self._notice_fix, self.session.speculation)
        elif self._notice_writer is not None and self.chooser.load_writer(self._notice_writer) is None:
            self.status_label.setText(f"{self._notice_writer.name} is no longer in the library.")

    def _on_phase_started(self, phase: LoadPhase) -> None:
        self.model_panel.load_progress.phase_started(phase)
        self._show_phase(phase, 0.0)

    def _on_phase_progress(self, phase: LoadPhase, fraction: float) -> None:
        self.model_panel.load_progress.phase_progress(phase, fraction)
        self._show_phase(phase, fraction)

    def _show_phase(self, phase: LoadPhase, fraction: float) -> None:
        """In the toolbar and under the chat's picker: the load goes on wherever one looks."""
        label = PHASE_LABELS.get(phase, phase.value)
        self.badge.show_phase(label, fraction)
        plan = self.session.plan
        if plan is not None:
            self.chats_page.header.load_line.show_phase(plan.model.display_name, label, fraction)

    def _on_load_failed(self, error: EngineError) -> None:
        self._bring_chat_when_ready = False
        self.model_panel.show_load_error(error.message)
        self.chats_page.header.load_line.show_error(error.message)
        self.status_label.setText(error.message)

    # -- the model picker ----------------------------------------------------------------

    def open_model_picker(self) -> None:
        """Ctrl+M or the chat's model name: the models to choose from, each with its verdict."""
        self.show_page(Page.CHATS)
        self.picker_popup.set_choices(self.chooser.choices())
        self.picker_popup.open_under(self.chats_page.header.model)

    def choose_model(self, choice: ModelChoice) -> None:
        error = self.chooser.choose(choice)
        if error is not None:
            self.chats_page.header.load_line.show_error(error)
            self.status_label.setText(error)

    def _on_model_ready(self, model) -> None:  # model: engine.loaded_model.LoadedModel
        self.status_label.setText(f"{model.plan.model.display_name} is ready.")
        self.chooser.remember_loaded(model.plan)
        self.chats_page.header.load_line.clear()
        if self.dashboard is not None:
            self.dashboard.set_model(model)
            self.dashboard.set_load_report(model.plan, model.reported_memory)
        # Loaded from the Models or Discover page: the chat comes forward. A load from the
        # chat, or the last model's at start, leaves the user where they are.
        if self._bring_chat_when_ready:
            self._bring_chat_when_ready = False
            self.show_page(Page.CHATS)
            self.composer.focus_input()

    def _load_from_page(self, plan: LoadPlan, speculation: SpeculationConfig | None = None) -> None:
        self._bring_chat_when_ready = True
        self.load_model(plan, speculation)

    def _load_downloaded_from_page(self, model_path: Path) -> None:
        self._bring_chat_when_ready = True
        self.load_downloaded(model_path)

    # -- local server ------------------------------------------------------------------

    def set_serving(self, on: bool) -> None:
        """The switch (toolbar or panel): serve the loaded model over the API, or stop."""
        self.local_server.set_enabled(on)
        if on:
            self.show_server_panel()
        self._show_server()

    def show_server_panel(self) -> None:
        self.server_dock.setVisible(True)
        self.server_dock.raise_()

    def _on_server_status(self, status: ServerStatus) -> None:
        self._show_server()
        if status is ServerStatus.FAILED:
            self.status_label.setText(self.local_server.error)

    def _show_server(self) -> None:
        server = self.local_server
        on = server.status in (ServerStatus.ON, ServerStatus.STARTING)
        self.server_action.setText("Local server · on" if on else "Local server")
        model = self.session.ready_model
        name = model.plan.model.display_name if model is not None else None
        self.server_panel.show_status(server.status, server.address, server.error, name)
        self.server_button.setVisible(server.status is ServerStatus.ON)
        self.server_button.setText(f"API on port {server.bound_port}" if server.bound_port else "")

    # -- RPC workers -------------------------------------------------------------------

    def planning_hardware(self) -> HardwareSnapshot:
        """This machine, with the devices of the workers that answered: what plans use."""
        if self._hardware is None:
            self._hardware = take_snapshot()
        return planning_hardware(self._hardware, self.workers.workers)

    def ask_for_worker(self) -> None:
        from PySide6.QtWidgets import QInputDialog

        text, ok = QInputDialog.getText(
            self,
            "Add worker",
            "host:port of a machine running `hearth worker`\n"
            "(llama.cpp's RPC has no authentication: add only machines on a network you trust)",
            text="127.0.0.1:50052",
        )
        if ok and text.strip():
            self.add_worker(text)

    def add_worker(self, text: str) -> None:
        try:
            self.workers.add(text)
        except EngineError as exc:
            self.status_label.setText(exc.message)

    def _workers_changed(self) -> None:
        workers = self.workers.workers
        self.hardware_panel.workers.set_workers(workers)
        if self._hardware is not None:
            self.model_panel.set_hardware(self.planning_hardware())
        if self.dashboard is not None:
            self.dashboard.set_workers(workers)

    # -- dashboard ---------------------------------------------------------------------

    def _ensure_dashboard(self, visible: bool) -> None:
        if self.dashboard_dock.isVisible() != visible:
            self.dashboard_dock.setVisible(visible)
        if not visible or self.dashboard is not None:
            return
        self.dashboard = DashboardView(self._telemetry, snapshot=self._hardware)
        self.dashboard.set_owner_names(self._conversation_title)
        self.dashboard.set_workers(self.workers.workers)
        model = self.session.ready_model
        if model is not None:
            self.dashboard.set_model(model)
            self.dashboard.set_load_report(model.plan, model.reported_memory)
        self.dashboard_dock.setWidget(self.dashboard)

    def _conversation_title(self, owner: str) -> str | None:
        try:
            return self.store.get_conversation(int(owner)).title
        except (ValueError, EngineError):
            return None
