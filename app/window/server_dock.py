"""The Local server in the window: its dock (the panel with its switch, port, address and
recent requests), the status bar's button while it serves, and the toolbar action's text,
each following the server's status and the model it serves."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QDockWidget, QToolButton, QWidget

from app.services.local_server import LocalServer
from app.services.model_session import ModelSession
from app.state.serving import ServerStatus
from app.widgets.server_panel import ServerPanel


class ServerDock(QDockWidget):
    """``say``: a line for the status bar (why the server could not listen)."""

    def __init__(
        self,
        server: LocalServer,
        session: ModelSession,
        say: Callable[[str], None],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__("Local server", parent)
        self.server = server
        self.session = session
        self._say = say
        self.setObjectName("serverDock")
        self.panel = ServerPanel()
        self.setWidget(self.panel)
        self.setVisible(False)
        # While the server is on: its port, one click from its panel.
        self.button = QToolButton()
        self.button.setAutoRaise(True)
        self.button.setToolTip("The local API server: show its panel")
        self.button.clicked.connect(self.show_panel)
        self.button.setVisible(False)
        # Opens the panel (its switch serves): looking at the server does not start it.
        self.action = self.toggleViewAction()
        self.action.setText("Local server")
        self.action.setToolTip(
            "The OpenAI-compatible API for other programs on this machine: its switch, address "
            "and recent requests"
        )
        server.status_changed.connect(self._on_status)
        server.request_logged.connect(self.panel.add_record)
        self.panel.enabled_toggled.connect(self.set_serving)
        self.panel.port_changed.connect(server.set_port)

    def set_serving(self, on: bool) -> None:
        """The switch (toolbar or panel): serve the loaded model over the API, or stop."""
        self.server.set_enabled(on)
        if on:
            self.show_panel()
        self.show_status()

    def show_panel(self) -> None:
        self.setVisible(True)
        self.raise_()

    def _on_status(self, status: ServerStatus) -> None:
        self.show_status()
        if status is ServerStatus.FAILED:
            self._say(self.server.error)

    def show_status(self) -> None:
        server = self.server
        on = server.status in (ServerStatus.ON, ServerStatus.STARTING)
        self.action.setText("Local server · on" if on else "Local server")
        model = self.session.ready_model
        name = model.plan.model.display_name if model is not None else None
        self.panel.show_status(server.status, server.address, server.error, name)
        self.button.setVisible(server.status is ServerStatus.ON)
        self.button.setText(f"API on port {server.bound_port}" if server.bound_port else "")
