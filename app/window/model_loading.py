"""Which model answers, as the window asks for it: a load (its settings remembered for that
model, the dashboard measuring it), a remote model used, a model chosen in the chat's picker,
a load then a first message (``hearth --load --send``), and what follows a load: the chat
comes forward when it was asked for from the Models or Discover page, a failure is shown
wherever the load was."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.chat import Composer
from app.chat.model_picker import ModelPickerPopup
from app.conversation.controller import ChatController
from app.conversation.model_chooser import ModelChooser
from app.services.model_session import ModelSession
from app.settings.load_settings import request_to_dict, settings_key
from app.state.choices import ModelChoice
from app.store.history import Store
from app.widgets.model_panel import ModelPanel
from app.widgets.nav_rail import Page
from app.widgets.remote_panel import RemotePanel
from app.window.chats_page import ChatHeader
from app.window.dashboard_dock import DashboardDock
from engine import EngineError, LoadedModel, LoadPlan, RemoteModel, RemoteModelInfo, SpeculationConfig


class ModelLoading:
    """``show_page``: the window's; ``say``: a line for the status bar."""

    def __init__(
        self,
        store: Store,
        session: ModelSession,
        chat: ChatController,
        chooser: ModelChooser,
        composer: Composer,
        panels: tuple[ModelPanel, RemotePanel],
        header: ChatHeader,
        picker: ModelPickerPopup,
        dashboard: DashboardDock,
        show_page: Callable[[Page], None],
        say: Callable[[str], None],
    ) -> None:
        self.store = store
        self.session = session
        self.chat = chat
        self.chooser = chooser
        self.composer = composer
        self.model_panel, self.remote_panel = panels
        self.header = header
        self.picker = picker
        self.dashboard = dashboard
        self._show_page = show_page
        self._say = say
        self._bring_chat_when_ready = False
        session.remote_ready.connect(self._on_remote_ready)
        self.model_panel.load_requested.connect(self._load_from_page)
        session.load_failed.connect(self._on_load_failed)
        session.model_ready.connect(self._on_model_ready)

    def load(self, plan: LoadPlan, speculation: SpeculationConfig | None = None) -> None:
        if self.chat.streaming and self.session.model is not None:
            self._say(f"Replaced the model while {self.chat.streaming} reply(s) were generating.")
        self.store.set_setting(settings_key(plan.model.path), request_to_dict(plan.request, speculation))
        self.session.load(plan, speculation)
        self.dashboard.loading(self.session.model)  # measures the load's memory growth

    def load_and_send(self, model_path: Path, message: str | None = None) -> None:
        """Load ``model_path`` with its remembered (or default) settings; then, if given,
        send ``message`` in a new chat. For `hearth --load MODEL --send TEXT`."""
        error = self.chooser.load_path(model_path)
        if error is not None:
            self._say(error)
            return
        if message:

            def send_when_ready(_model: object) -> None:
                self.session.model_ready.disconnect(send_when_ready)
                self.chat.new_conversation()
                self.composer.set_text(message)
                self.composer.submit()

            self.session.model_ready.connect(send_when_ready)

    def use_remote(self, info: RemoteModelInfo) -> None:
        """The picker's Chat with this model: a remote model answers the chats."""
        if self.chat.streaming and self.session.model is not None:
            self._say(f"Replaced the model while {self.chat.streaming} reply(s) were generating.")
        self.session.use_remote(RemoteModel(info))

    def _on_remote_ready(self, model: RemoteModel) -> None:
        self._say(f"{model.label.name} on {model.info.endpoint.title} answers your chats.")
        shown = self.remote_panel.info
        self.remote_panel.set_in_use(shown == model.info)
        self._show_page(Page.CHATS)
        self.composer.focus_input()

    def _on_load_failed(self, error: EngineError) -> None:
        self._bring_chat_when_ready = False
        self.model_panel.show_load_error(error.message)
        self.header.load_line.show_error(error.message)
        self._say(error.message)

    # -- the model picker ----------------------------------------------------------------

    def open_picker(self) -> None:
        """Ctrl+M or the chat's model name: the models to choose from, each with its verdict."""
        self._show_page(Page.CHATS)
        self.picker.set_choices(self.chooser.choices())
        self.picker.open_under(self.header.model)

    def choose(self, choice: ModelChoice) -> None:
        error = self.chooser.choose(choice)
        if error is not None:
            self.header.load_line.show_error(error)
            self._say(error)

    def _on_model_ready(self, model: LoadedModel) -> None:
        self._say(f"{model.plan.model.display_name} is ready.")
        self.chooser.remember_loaded(model.plan)
        self.header.load_line.clear()
        self.dashboard.ready(model)
        # Loaded from the Models or Discover page: the chat comes forward. A load from the
        # chat, or the last model's at start, leaves the user where they are.
        if self._bring_chat_when_ready:
            self._bring_chat_when_ready = False
            self._show_page(Page.CHATS)
            self.composer.focus_input()

    def _load_from_page(self, plan: LoadPlan, speculation: SpeculationConfig | None = None) -> None:
        self._bring_chat_when_ready = True
        self.load(plan, speculation)

    def load_downloaded_from_page(self, model_path: Path) -> None:
        """Discover's Load: the chat comes forward once the model is ready."""
        self._bring_chat_when_ready = True
        self.load_and_send(model_path)
