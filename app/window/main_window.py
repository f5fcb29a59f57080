"""Hearth's main window: the navigation rail at the left edge (Chats: conversations, chat and
its settings; Models: the library, the hardware, the selected model's plan and load
controls; Discover), the loaded model atop, the dashboard and the local server in docks.

It is given its services (``app.application.build_services``) and wires the widgets to them;
the rest is in its parts: the chat's notice (notices.py), the Models page (models_mediator.py),
loading and choosing models (model_loading.py), the load shown everywhere (load_display.py),
the docks, the RPC workers (workers_view.py), what it remembers (window_state.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import (
    QAction,
    QCloseEvent,
    QDragEnterEvent,
    QDropEvent,
    QKeySequence,
    QShowEvent,
)
from PySide6.QtWidgets import (
    QLabel,
    QMainWindow,
    QSplitter,
    QStackedWidget,
)

from app.chat import Composer, ConversationList, MessageView, SamplingPanel
from app.chat.lexer_warmup import warm_lexers_when_idle
from app.chat.model_picker import PICKER_SHORTCUT, ModelPickerPopup
from app.conversation.controller import ChatController
from app.conversation.model_chooser import ModelChooser
from app.dashboard import DashboardView
from app.services.bundle import Services
from app.services.planning import planning_hardware
from app.settings.preferences import Preferences
from app.state.choices import ModelChoice
from app.widgets.hardware_panel import HardwarePanel
from app.widgets.library_panel import LibraryPanel
from app.widgets.model_badge import ModelBadge
from app.widgets.model_panel import ModelPanel
from app.widgets.nav_rail import PAGE_LABELS, NavRail, Page, beside_rail
from app.widgets.remote_panel import RemotePanel
from app.widgets.settings_dialog import SettingsDialog, SettingsPage
from app.window.actions import Shortcut, main_toolbar, window_action
from app.window.chat_tools import serve_tools
from app.window.chats_page import ChatsPage
from app.window.dashboard_dock import DashboardDock
from app.window.discover_page import DiscoverPage
from app.window.documents_page import DocumentsPage
from app.window.geometry import fit_to_screen
from app.window.load_display import LoadDisplay, native_error_label
from app.window.model_loading import ModelLoading
from app.window.models_mediator import ModelsMediator, dropped_paths
from app.window.models_page import ModelsPage
from app.window.notices import ChatNotices
from app.window.quit_prompt import confirm_quit
from app.window.server_dock import ServerDock
from app.window.settings_apply import install_preferences, open_settings_dialog
from app.window.window_state import WindowState
from app.window.workers_view import WorkersView
from engine import (
    EngineError,
    HardwareSnapshot,
    LoadPlan,
    RemoteModelInfo,
    SpeculationConfig,
    take_snapshot,
)

SETTINGS_COLUMN_KEY = "window.chat_settings_shown"


class MainWindow(QMainWindow):
    def __init__(self, services: Services, telemetry: object | None = None) -> None:
        """``services``: built by the start-up script (``app.application.build_services``);
        the window owns them from here on."""
        super().__init__()
        self.paths = services.paths
        self.setWindowTitle("Hearth")
        self.setAcceptDrops(True)
        self._shown_once = False
        self._close_confirmed = False
        self._hardware = services.hardware
        self.store = services.store
        self.session = services.session
        self.library = services.library
        self.recent_folder = services.recent_folder
        self.remote_servers = services.remote_servers
        self.workers = services.workers
        self.discover = services.discover
        self.local_server = services.local_server
        self.tools = services.tools  # MCP servers: started with the window, stopped when it closes
        for service in (self.session, self.library, self.remote_servers, self.workers, self.discover):
            service.setParent(self)  # they go with the window
        self.local_server.setParent(self)
        self.settings_dialog: SettingsDialog | None = None  # made when first opened

        self.library_panel = LibraryPanel(self.library)
        self.hardware_panel = HardwarePanel()
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
        self.discover_page = DiscoverPage(self.discover)
        self.documents_page = DocumentsPage(services.documents)  # it closes the service
        self.pages = QStackedWidget()
        self._page_widgets = {
            Page.CHATS: self.chats_page,
            Page.MODELS: self.models_page,
            Page.DISCOVER: self.discover_page,
            Page.DOCUMENTS: self.documents_page,
        }
        for widget in self._page_widgets.values():
            self.pages.addWidget(widget)
        self.nav = NavRail()
        self.nav.page_selected.connect(self.show_page)
        self.setCentralWidget(beside_rail(self.nav, self.pages))

        self.dashboard_dock = DashboardDock(
            self.session, self.workers, telemetry, lambda: self._hardware, self._conversation_title, self
        )
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.dashboard_dock)
        services.documents.embedder_changed.connect(self.dashboard_dock.set_embedder)
        self.workers_view = WorkersView(
            self.workers, self.hardware_panel, self.model_panel, self.dashboard_dock,
            self.planning_hardware, lambda: self._hardware is not None,
            lambda text: self.status_label.setText(text), self,
        )  # fmt: skip

        # The Local server: the OpenAI-compatible API serving whatever model is loaded.
        self.server_dock = ServerDock(
            self.local_server, self.session, lambda text: self.status_label.setText(text), self
        )
        self.server_panel = self.server_dock.panel
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.server_dock)

        self.chat = ChatController(
            self.store,
            self.session,
            self.message_view,
            self.composer,
            self.conversation_list,
            self.sampling_panel,
            parent=self,
            documents_button=self.chats_page.header.documents,
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
        self.documents_page.serve_chat(self.chat.documents)
        serve_tools(self, services.tools)
        self.picker_popup = ModelPickerPopup(self)
        self.chats_page.header.model.clicked.connect(self.open_model_picker)
        self.badge = ModelBadge()
        self._build_actions()
        self.status_label = QLabel()
        self.statusBar().addWidget(self.status_label, 1)
        # Why llama.cpp cannot run here, if so: stays while library scans update status_label.
        self.native_label = native_error_label()
        self.statusBar().addPermanentWidget(self.native_label, 2)
        # While the server is on: its port, one click from its panel.
        self.server_button = self.server_dock.button
        self.statusBar().addPermanentWidget(self.server_button)

        self.models = ModelsMediator(
            self.store, self.library, self.session, self.remote_servers,
            self.library_panel, self.model_panel, self.remote_panel, self.details_stack,
            (self.current_page, self.show_page), lambda: self.recent_folder,
            lambda text: self.status_label.setText(text), self,
        )  # fmt: skip
        self.remote_panel.use_requested.connect(self.use_remote)
        self.remote_panel.settings_requested.connect(lambda: open_settings_dialog(self, SettingsPage.REMOTE))
        self.model_panel.cancel_requested.connect(self.session.cancel_load)
        self.badge.unload_requested.connect(self.unload_model)
        self.badge.show_model_requested.connect(self.show_loaded_model)
        self.badge.pick_requested.connect(self.open_model_picker)
        self.load_display = LoadDisplay(
            self.session, self.badge, self.model_panel, self.remote_panel, self.chats_page.header,
            lambda: self.notices.update(), self.server_dock.show_status,
        )  # fmt: skip
        self.loading = ModelLoading(
            self.store, self.session, self.chat, self.chooser, self.composer,
            (self.model_panel, self.remote_panel), self.chats_page.header, self.picker_popup,
            self.dashboard_dock, self.show_page, self.status_label.setText,
        )  # fmt: skip
        self.picker_popup.chosen.connect(self.loading.choose)
        self.chat.status.connect(self.status_label.setText)
        self.chat.title_changed.connect(self.chats_page.header.set_title)
        self.notices = ChatNotices(
            self.session, self.chat, self.chooser, self.chats_page,
            self.planning_hardware, self.load_model, self.status_label.setText,
        )  # fmt: skip
        self.chat.parallel_wanted.connect(self.offer_parallel)
        self.chats_page.settings_visibility_changed.connect(self._remember_settings_column)
        # A finished download joins the library (paired with its projector there); Load loads it.
        self.discover.download_finished.connect(lambda path: self.library.add_paths([path], select=path))
        self.discover.download_failed.connect(self.status_label.setText)
        self.discover_page.load_requested.connect(self.loading.load_downloaded_from_page)
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
        # Where it was last time (window.ini), within the screen it is on now.
        self._state = WindowState(self.paths.data_dir)
        self._state.restore(self, self._splitters())
        self.fit_screen()

    def _build_actions(self) -> None:
        def action(text: str, shortcut: Shortcut, slot: Callable[[], object], tip: str = "") -> QAction:
            return window_action(self, text, shortcut, slot, tip)

        new_chat_tip = "Start a new conversation (Ctrl+N)"
        self.new_chat_action = action("New chat", "Ctrl+N", self.new_chat, new_chat_tip)
        add_tip = "Add GGUF files to the library (they stay where they are)"
        self.add_files_action = action("Add models…", "Ctrl+O", self.choose_files, add_tip)
        self.add_folder_action = action("Add folder…", None, self.choose_folder, "Add every GGUF in a folder")
        self.rescan_action = action("Rescan", QKeySequence.StandardKey.Refresh, self.library.rescan)
        self.focus_composer_action = action("Focus composer", "Ctrl+L", self.focus_composer)
        self.search_action = action("Search chats", "Ctrl+K", self.focus_search)
        picker_tip = f"Choose the model that answers ({PICKER_SHORTCUT})"
        self.picker_action = action("Choose model", PICKER_SHORTCUT, self.open_model_picker, picker_tip)
        # Ctrl+1… in the rail's order.
        self.page_actions = {
            page: action(PAGE_LABELS[page], f"Ctrl+{i}", lambda _=False, p=page: self.show_page(p))
            for i, page in enumerate(Page, 1)
        }
        self.quit_action = action("Quit", "Ctrl+Q", self.request_quit, "Quit Hearth (Ctrl+Q)")
        self.quit_action.setShortcutContext(Qt.ShortcutContext.ApplicationShortcut)
        # Esc stops the reply wherever the focus is; enabled only while one streams, so
        # Esc keeps its other meanings (cancel an edit, clear the search) the rest of the time.
        self.stop_action = action("Stop", "Esc", self.stop_generating, "Stop the reply (Esc)")
        self.stop_action.setEnabled(False)
        self.composer.generating_changed.connect(self.stop_action.setEnabled)
        self.dashboard_action = self.dashboard_dock.action  # Ctrl+D; the view is made when first shown
        self.server_action = self.server_dock.action  # opens the panel; its switch serves
        self.settings_action = action(
            "Settings…", "Ctrl+,", self.open_settings, "Defaults, theme, remote servers, Hub (Ctrl+,)"
        )
        self.addToolBar(main_toolbar((
            self.add_files_action, self.add_folder_action, None, self.badge,
            self.dashboard_action, self.server_action, self.settings_action,
        )))  # fmt: skip

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
        self.workers_view.changed()
        self.workers.start()
        self.tools.start()
        self.discover.restore_downloads()
        if self._hardware.native_error is not None:  # this llama.cpp build failed its self-check
            print(f"hearth: {self._hardware.native_error}", file=sys.stderr)
            self.native_label.setText(self._hardware.native_error)
            self.native_label.setVisible(True)
            self.model_panel.show_load_error(self._hardware.native_error)
        self.library.rescan()
        self.remote_servers.refresh()  # in the background: their models join the library
        self.chat.start()
        self.load_display.show_answering_model()
        self.chats_page.set_settings_wanted(bool(self.store.get_setting(SETTINGS_COLUMN_KEY, True)))
        self.show_page(self._state.saved_page())
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
        self._state.save(self, self._splitters(), self.current_page())
        self.chat.shutdown()
        self.tools.shutdown()  # every server's child ends (bounded wait)
        self.workers.stop()
        self.local_server.shutdown()  # API requests end before their model goes
        self.discover.shutdown()  # downloads pause; their parts resume on the next start
        self.documents_page.shutdown()  # a run stops at its next checkpoint, its files kept
        self.session.unload()
        self.dashboard_dock.shutdown()
        self.library.shutdown()
        self.remote_servers.shutdown()
        if self.settings_dialog is not None:
            self.settings_dialog.close()
        self.store.close()
        super().closeEvent(event)

    def _splitters(self) -> dict[str, QSplitter]:
        return {"chats_page": self.chats_page, "models_page": self.models_page}

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
        self.models.show_loaded_model()

    def offer_parallel(self, parallel: int) -> None:
        """A queued chat's "More parallel conversations…" (see ``ModelsMediator``)."""
        self.models.offer_parallel(parallel)

    def _remember_settings_column(self, shown: bool) -> None:
        self.store.set_setting(SETTINGS_COLUMN_KEY, shown)

    # -- models ------------------------------------------------------------------------

    def choose_files(self) -> None:
        self.models.choose_files()

    def choose_folder(self) -> None:
        self.models.choose_folder()

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
        self.models.drop(paths)

    def load_model(self, plan: LoadPlan, speculation: SpeculationConfig | None = None) -> None:
        self.loading.load(plan, speculation)

    def load_and_send(self, model_path: Path, message: str | None = None) -> None:
        """Load ``model_path`` with its remembered (or default) settings; then, if given,
        send ``message`` in a new chat. For `hearth --load MODEL --send TEXT`."""
        self.loading.load_and_send(model_path, message)

    def load_downloaded(self, model_path: Path) -> None:
        """Discover's Load: the model with its remembered (or default) settings and, the
        first time, the vision projector the library pairs with it."""
        self.load_and_send(model_path)

    def unload_model(self) -> None:
        self.session.unload()

    # -- remote servers ----------------------------------------------------------------

    def open_settings(self) -> None:
        open_settings_dialog(self)

    def use_remote(self, info: RemoteModelInfo) -> None:
        """The picker's Chat with this model: a remote model answers the chats."""
        self.loading.use_remote(info)

    def open_model_picker(self) -> None:
        """Ctrl+M or the chat's model name: the models to choose from, each with its verdict."""
        self.loading.open_picker()

    def choose_model(self, choice: ModelChoice) -> None:
        self.loading.choose(choice)

    # -- local server ------------------------------------------------------------------

    def set_serving(self, on: bool) -> None:
        """The switch (toolbar or panel): serve the loaded model over the API, or stop."""
        self.server_dock.set_serving(on)

    def show_server_panel(self) -> None:
        self.server_dock.show_panel()

    # -- RPC workers -------------------------------------------------------------------

    def planning_hardware(self) -> HardwareSnapshot:
        """This machine, with the devices of the workers that answered: what plans use."""
        if self._hardware is None:
            self._hardware = take_snapshot()
        return planning_hardware(self._hardware, self.workers.workers)

    def ask_for_worker(self) -> None:
        self.workers_view.ask()

    def add_worker(self, text: str) -> None:
        self.workers_view.add(text)

    # -- dashboard ---------------------------------------------------------------------

    @property
    def dashboard(self) -> DashboardView | None:
        """The live dashboard, once its dock has been shown."""
        return self.dashboard_dock.view

    def _ensure_dashboard(self, visible: bool) -> None:
        self.dashboard_dock.ensure(visible)

    def _conversation_title(self, owner: str) -> str | None:
        try:
            return self.store.get_conversation(int(owner)).title
        except (ValueError, EngineError):
            return None
