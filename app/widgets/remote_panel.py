"""The Models page's details for a remote model: where it is, what its server says about
it, and the button that makes it answer the chats."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from engine import RemoteModelInfo


class RemotePanel(QWidget):
    use_requested = Signal(object)  # RemoteModelInfo
    settings_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("remotePanel")
        self.info: RemoteModelInfo | None = None
        self.title = QLabel()
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        font = self.title.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.3)
        self.title.setFont(font)
        self.facts = QLabel()
        self.facts.setTextFormat(Qt.TextFormat.PlainText)
        self.facts.setWordWrap(True)
        self.facts.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.use_button = QPushButton("Chat with this model")
        self.use_button.setObjectName("useRemote")
        self.use_button.setToolTip(
            "Your chats are answered by this server from now on (a loaded model is unloaded)"
        )
        self.use_button.clicked.connect(self._use)
        self.settings_button = QPushButton("Remote servers…")
        self.settings_button.clicked.connect(self.settings_requested)
        self.state_label = QLabel()
        self.state_label.setEnabled(False)
        buttons = QHBoxLayout()
        buttons.addWidget(self.use_button)
        buttons.addWidget(self.state_label, 1)
        buttons.addWidget(self.settings_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 12, 16, 12)
        layout.addWidget(self.title)
        layout.addWidget(self.facts)
        layout.addLayout(buttons)
        layout.addStretch(1)

    def show_model(self, info: RemoteModelInfo, in_use: bool) -> None:
        self.info = info
        endpoint = info.endpoint
        self.title.setText(info.model_id)
        context = (
            f"Context: {info.context_length:,} tokens per conversation (as the server reports)."
            if info.context_length
            else "Context: the server does not say how much it holds."
        )
        self.facts.setText(
            "\n".join(
                (
                    f"On {endpoint.title} — {endpoint.base_url}",
                    context,
                    "Replies stream from the server: it counts the prompt, and the stats under "
                    "each reply are what it reports (tokens, speed) with the time to the first "
                    "token measured here.",
                )
            )
        )
        self.set_in_use(in_use)

    def set_in_use(self, in_use: bool) -> None:
        self.use_button.setEnabled(not in_use)
        self.state_label.setText("Answers your chats" if in_use else "")

    def _use(self) -> None:
        if self.info is not None:
            self.use_requested.emit(self.info)
