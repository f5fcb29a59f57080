"""Settings → Hub: the endpoint (a mirror), the token (into the system keyring, never a
file) and how many downloads run at once. Also the body of Discover's "Hub settings…"."""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFormLayout, QHBoxLayout, QLabel, QLineEdit, QPushButton, QSpinBox, QWidget

from app.platform.paths import AppPaths
from app.settings.hub_settings import (
    MAX_PARALLEL_DOWNLOADS,
    HubSettings,
    KeyringUnavailable,
    read_token,
    save_settings,
    store_token,
    with_endpoint,
)
from app.widgets.styles import ERROR_STYLE
from engine import EngineError, HubAccess

NO_TOKEN = "none (needed for gated models)"


class HubConfig(Protocol):
    """What the form needs of Discover (the Discover service, ``DiscoverController``): the settings in
    effect, where they are saved, and a way to apply them at once."""

    settings: HubSettings
    access: HubAccess
    paths: AppPaths

    def reconfigure(self) -> None: ...


class HubSettingsPage(QWidget):
    """The form; ``save`` applies it (the controller reconfigures at once) or shows why not."""

    saved = Signal()

    def __init__(self, controller: HubConfig, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        form = QFormLayout(self)
        self.endpoint = QLineEdit(controller.settings.endpoint or "")
        self.endpoint.setObjectName("hubEndpoint")
        self.endpoint.setPlaceholderText(controller.access.endpoint)
        self.token = QLineEdit()
        self.token.setObjectName("hubToken")
        self.token.setEchoMode(QLineEdit.EchoMode.Password)
        self.error = QLabel()
        self.error.setObjectName("hubSettingsError")
        self.error.setStyleSheet(ERROR_STYLE)
        self.error.setWordWrap(True)
        self.error.setVisible(False)
        self.forget = QPushButton("Forget the token")
        self.forget.setObjectName("forgetToken")
        self.forget.clicked.connect(self._forget)
        token_row = QHBoxLayout()
        token_row.addWidget(self.token, 1)
        token_row.addWidget(self.forget)
        self.parallel = QSpinBox()
        self.parallel.setObjectName("downloadsAtOnce")
        self.parallel.setRange(1, MAX_PARALLEL_DOWNLOADS)
        self.parallel.setToolTip("More at once share the same connection; the rest wait in the queue.")
        form.addRow("Endpoint", self.endpoint)
        form.addRow("Token", token_row)
        form.addRow("Downloads at once", self.parallel)
        form.addRow(self.error)
        self.show_settings()

    def show_settings(self) -> None:
        """What is in effect now (after an edit elsewhere, or to undo unsaved edits)."""
        settings = self.controller.settings
        self.endpoint.setText(settings.endpoint or "")
        self.endpoint.setPlaceholderText(self.controller.access.endpoint)
        self.token.clear()
        has_token = bool(read_token())
        self.token.setPlaceholderText("set" if has_token else NO_TOKEN)
        self.forget.setEnabled(has_token)
        self.parallel.setValue(settings.max_parallel)
        self._say("")

    def save(self) -> bool:
        try:
            settings = with_endpoint(self.controller.settings, self.endpoint.text())
            save_settings(self.controller.paths, replace(settings, max_parallel=self.parallel.value()))
            if self.token.text().strip():
                store_token(self.token.text())
        except EngineError as exc:  # a malformed endpoint, KeyringUnavailable
            self._say(exc.message)
            return False
        self.controller.reconfigure()
        self.show_settings()
        self.saved.emit()
        return True

    def _forget(self) -> None:
        try:
            store_token(None)
        except KeyringUnavailable as exc:
            self._say(exc.message)
            return
        self.token.clear()
        self.token.setPlaceholderText(NO_TOKEN)
        self.forget.setEnabled(False)
        self.controller.reconfigure()

    def _say(self, error: str) -> None:
        self.error.setText(error)
        self.error.setVisible(bool(error))
