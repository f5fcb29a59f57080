"""Settings: one tab per part (Remote servers, for now)."""

from __future__ import annotations

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTabWidget, QVBoxLayout, QWidget

from app.remote_servers import RemoteServers
from app.widgets.remote_servers_page import RemoteServersPage


class SettingsDialog(QDialog):
    def __init__(self, servers: RemoteServers, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.setObjectName("settingsDialog")
        self.resize(720, 520)
        self.tabs = QTabWidget()
        self.remote_page = RemoteServersPage(servers)
        self.tabs.addTab(self.remote_page, "Remote servers")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs, 1)
        layout.addWidget(buttons)
