"""The window's tools wired together (issue 29): the ToolsService's servers and tools into the
chat header's Tools button and the reply runner's tool loop, its approval bar above the
composer, and what the loaded model makes of tools."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.chat.tools_button import ToolLine
from app.conversation.tool_turns import REMOTE_NO_TOOLS
from app.settings.chat_tool_choice import ChatToolChoice
from app.widgets.settings_dialog import SettingsPage
from app.window.settings_apply import open_settings_dialog
from engine import ChatModel, RemoteModel

if TYPE_CHECKING:
    from app.services.tools import ToolsService
    from app.window.main_window import MainWindow

NO_TOOL_TEMPLATE = "This model's chat template has no tools: Hearth describes them in a system prompt"


def tool_note(model: ChatModel | None) -> str:
    """What the Tools menu says of the model that answers ("": it renders tools itself)."""
    if model is None:
        return ""
    if isinstance(model, RemoteModel):
        return REMOTE_NO_TOOLS
    return "" if model.chat_traits.renders_tools else NO_TOOL_TEMPLATE


def serve_tools(window: MainWindow, tools: ToolsService) -> None:
    """Connect the window's chat to ``tools``: the window owns both from then on."""
    choice = ChatToolChoice(window.store)
    controller, page = window.chat, window.chats_page
    button, turns = page.header.tools, controller.replies.tool_turns
    turns.attach(tools, page.approval, choice.is_on)
    page.approval.stop_requested.connect(controller.stop)

    def shown_changed() -> None:
        current = controller.current_id
        button.setEnabled(current is not None)
        button.set_on(current is not None and choice.is_on(current))
        turns.show_ask()

    def toggled(on: bool) -> None:
        if controller.current_id is not None:
            choice.set_on(controller.current_id, on)

    def tools_changed() -> None:
        lines = [ToolLine(spec.name, spec.server, spec.description) for spec in tools.tools()]
        button.set_tools(lines, len(tools.configs()))

    def model_changed(*_args: object) -> None:
        button.set_note(tool_note(window.session.chat_model))

    controller.title_changed.connect(lambda _title: shown_changed())
    button.toggled_on.connect(toggled)
    button.settings_requested.connect(lambda: open_settings_dialog(window, SettingsPage.TOOLS))
    tools.changed.connect(tools_changed)
    for signal in (window.session.model_ready, window.session.remote_ready, window.session.model_unloaded):
        signal.connect(model_changed)
    tools_changed()
    shown_changed()
    model_changed()
