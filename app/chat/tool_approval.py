"""The bar above the composer that asks before a tool runs (issue 29): which tool, from which
server, with which arguments, and three answers — Allow once, Always for this tool, Deny.
Esc stops the reply, as it does anywhere in the chat."""

from __future__ import annotations

import enum
from collections.abc import Hashable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase, QKeyEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

ARGUMENT_LINES = 6  # shown at once; more scroll


class Decision(enum.Enum):
    ALLOW_ONCE = "allow_once"
    ALWAYS = "always"  # this tool, from now on (Settings → Tools lists and forgets it)
    DENY = "deny"


class ToolApproval(QFrame):
    """One question at a time, named by ``key``; ``decided(key, Decision)`` answers it."""

    decided = Signal(object, object)
    stop_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolApproval")
        self._key: Hashable | None = None
        self.title = QLabel()
        self.title.setTextFormat(Qt.TextFormat.RichText)
        self.title.setWordWrap(True)
        self.arguments = QPlainTextEdit()
        self.arguments.setReadOnly(True)
        self.arguments.setObjectName("toolArguments")
        self.arguments.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.arguments.setAccessibleName("Arguments")
        line = self.arguments.fontMetrics().lineSpacing()
        self.arguments.setMaximumHeight(line * ARGUMENT_LINES + 12)
        self.allow = QPushButton("Allow once")
        self.always = QPushButton("Always for this tool")
        self.deny = QPushButton("Deny")
        self.allow.clicked.connect(lambda: self._answer(Decision.ALLOW_ONCE))
        self.always.clicked.connect(lambda: self._answer(Decision.ALWAYS))
        self.deny.clicked.connect(lambda: self._answer(Decision.DENY))
        buttons = QHBoxLayout()
        buttons.addWidget(QLabel("Esc stops the reply"), 1)
        for button in (self.deny, self.always, self.allow):
            buttons.addWidget(button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 8, 12, 8)
        layout.addWidget(self.title)
        layout.addWidget(self.arguments)
        layout.addLayout(buttons)
        self.setStyleSheet(
            "QFrame#toolApproval { background: palette(alternate-base); border-top: 1px solid palette(mid); }"
        )
        self.hide()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        # Esc from any of its buttons (they leave it to their parent) stops the reply, as
        # it does in the composer.
        if event.key() == Qt.Key.Key_Escape:
            self.stop_requested.emit()
            event.accept()
            return
        super().keyPressEvent(event)

    def ask(self, key: Hashable, tool: str, server: str, arguments: str) -> None:
        """Show the question (replacing one on show). The focus stays where it is: a user
        typing in the composer must not allow a tool with the Space or Enter they meant there."""
        self._key = key
        source = f" from <i>{_escape(server)}</i>" if server else ""
        self.title.setText(f"Run the tool <b>{_escape(tool)}</b>{source}? It gets these arguments:")
        self.arguments.setPlainText(arguments)
        self.show()

    def pending(self) -> Hashable | None:
        """The question on show (None: none)."""
        return self._key

    def clear(self) -> None:
        self._key = None
        self.hide()

    def _answer(self, decision: Decision) -> None:
        key = self._key
        if key is None:
            return
        self.clear()
        self.decided.emit(key, decision)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
