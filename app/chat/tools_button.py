"""The chat header's Tools button (issue 29): whether this conversation offers the model its
tools, which tools there are and from which servers, and what the model makes of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QMenu, QToolButton, QWidget

NO_SERVERS = "No tool servers yet: add one in Settings → Tools"
USE_TOOLS = "Use tools in this chat"
NONE_READY = "No tool server is ready: see Settings → Tools"


@dataclass(frozen=True)
class ToolLine:
    """One tool as the menu lists it."""

    name: str
    server: str
    description: str = ""


class ToolsButton(QToolButton):
    """``toggled_on(bool)``: the user turned tools on or off for this chat;
    ``settings_requested``: open Settings → Tools."""

    toggled_on = Signal(bool)
    settings_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolsButton")
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.setStyleSheet("QToolButton#toolsButton::menu-indicator { image: none; width: 0px; }")
        self.menu_ = QMenu(self)
        self.setMenu(self.menu_)
        self._tools: tuple[ToolLine, ...] = ()
        self._servers = 0
        self._on = False
        self._note = ""
        self._rebuild()

    def set_tools(self, tools: Sequence[ToolLine], servers: int) -> None:
        """The tools ready now, and how many servers are configured (enabled or not)."""
        self._tools, self._servers = tuple(tools), servers
        self._rebuild()

    def set_on(self, on: bool) -> None:
        """This conversation's choice, as shown (no signal)."""
        self._on = on
        self._rebuild()

    def set_note(self, note: str) -> None:
        """What the loaded model makes of tools ("": nothing to say)."""
        self._note = note
        self._rebuild()

    def is_on(self) -> bool:
        return self._on

    def note(self) -> str:
        return self._note

    def set_use(self, on: bool) -> None:
        """Tick or untick "Use tools in this chat", as a click on it does."""
        self._use.setChecked(on)

    def _rebuild(self) -> None:
        menu = self.menu_
        menu.clear()
        self._use = use = menu.addAction(USE_TOOLS)
        use.setCheckable(True)
        use.setChecked(self._on)
        use.toggled.connect(self._toggled)
        menu.addSeparator()
        if not self._tools:
            menu.addAction(NO_SERVERS if self._servers == 0 else NONE_READY).setEnabled(False)
        for tool in self._tools:
            item = menu.addAction(f"{tool.name}  ·  {tool.server}")
            item.setToolTip(tool.description)
            item.setEnabled(False)
        if self._note:
            menu.addSeparator()
            menu.addAction(self._note).setEnabled(False)
        menu.addSeparator()
        menu.addAction("Tool servers…").triggered.connect(self.settings_requested)
        self._label()

    def _label(self) -> None:
        count = len(self._tools)
        # What the model makes of tools shows on the button itself, not only in its menu.
        mark = " ⚠" if self._on and self._note else ""
        shown = f"Tools · {count}{mark} ▾" if count else "Tools ▾"
        self.setText(shown if self._on else "Tools off ▾")
        said = "The model may call these tools; each call waits for your allow"
        self.setToolTip(
            (f"{said}.\n{self._note}." if self._note else said) if self._on else "Tools are off in this chat"
        )

    def _toggled(self, on: bool) -> None:
        # Not rebuilt here: clearing the menu would delete the action emitting this.
        self._on = on
        self._label()
        self.toggled_on.emit(on)
