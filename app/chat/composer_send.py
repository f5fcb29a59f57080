"""The composer's Send button, which is Stop while a reply streams, and the hint beside it."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton, QWidget

__all__ = ["SendButton", "hint_text"]


class SendButton(QPushButton):
    """Send (enabled when there is something to send), or Stop while a reply streams."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Send", parent)
        self.setObjectName("sendButton")
        self.setCursor(Qt.CursorShape.PointingHandCursor)

    def show_state(self, generating: bool, send_on_enter: bool, can_send: bool) -> None:
        if generating:
            self.setText("Stop")
            self.setToolTip("Stop the reply (Esc)")
            self.setEnabled(True)
            self.setProperty("stop", True)
        else:
            self.setText("Send")
            self.setToolTip("Send (Enter)" if send_on_enter else "Send (Ctrl+Enter)")
            self.setEnabled(can_send)
            self.setProperty("stop", False)
        # Re-polish so the [stop="true"] style rule applies.
        self.style().unpolish(self)
        self.style().polish(self)


def hint_text(generating: bool, send_on_enter: bool) -> str:
    """What the line beside the button says the keys do now."""
    if generating:
        text = "Esc to stop"
    elif send_on_enter:
        text = "Enter to send · Shift+Enter for a new line"
    else:
        text = "Ctrl+Enter to send · Enter for a new line"
    return text
