"""Settings: General, Hardware, Appearance, Remote servers, Tools, Hub; one tab each. Changes apply
as they are made (the Hub's, checked first, when saved)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.settings.preferences import Preferences
from app.widgets.remote_servers_page import RemoteServersPage, ServerList
from app.widgets.settings_appearance import AppearancePage
from app.widgets.settings_general import GeneralPage, ModelsFolder
from app.widgets.settings_hardware import HardwarePage
from app.widgets.settings_hub import HubConfig, HubSettingsPage
from app.widgets.settings_tools import ToolServerList, ToolsPage
from engine import HardwareSnapshot


class SettingsPage(enum.Enum):
    GENERAL = "General"
    HARDWARE = "Hardware"
    APPEARANCE = "Appearance"
    REMOTE = "Remote servers"
    TOOLS = "Tools"
    HUB = "Hub"


@dataclass(frozen=True)
class SettingsContext:
    """What the pages change."""

    preferences: Preferences
    servers: ServerList
    hub: HubConfig
    models_folder: ModelsFolder
    hardware: HardwareSnapshot | None = None
    tools: ToolServerList | None = None  # MCP servers; no tab without them


class SettingsDialog(QDialog):
    def __init__(self, context: SettingsContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.setObjectName("settingsDialog")
        self.resize(780, 640)  # with its title bar, within a 1366×768 screen
        self.tabs = QTabWidget()
        self.general_page = GeneralPage(context.preferences, context.models_folder)
        self.hardware_page = HardwarePage(context.preferences, context.hardware)
        self.appearance_page = AppearancePage(context.preferences)
        self.remote_page = RemoteServersPage(context.servers)
        self.hub_page = HubSettingsPage(context.hub)
        self.tools_page = ToolsPage(context.tools) if context.tools is not None else None
        self.hub_save = QPushButton("Save")
        self.hub_save.setObjectName("saveHubSettings")
        self.hub_save.clicked.connect(self.hub_page.save)
        hub_tab = QWidget()
        hub_layout = QVBoxLayout(hub_tab)
        hub_layout.addWidget(self.hub_page)
        save_row = QHBoxLayout()
        save_row.addStretch(1)
        save_row.addWidget(self.hub_save)
        hub_layout.addLayout(save_row)
        hub_layout.addStretch(1)
        self.hub_page.layout().setContentsMargins(0, 0, 0, 0)
        self._tabs: dict[SettingsPage, QWidget] = {
            SettingsPage.GENERAL: self.general_page,
            SettingsPage.HARDWARE: self.hardware_page,
            SettingsPage.APPEARANCE: self.appearance_page,
            SettingsPage.REMOTE: self.remote_page,
            **({SettingsPage.TOOLS: self.tools_page} if self.tools_page is not None else {}),
            SettingsPage.HUB: hub_tab,
        }
        for page, tab in self._tabs.items():
            self.tabs.addTab(tab, page.value)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs, 1)
        layout.addWidget(buttons)

    def show_page(self, page: SettingsPage) -> None:
        self.tabs.setCurrentWidget(self._tabs[page])

    def current_page(self) -> SettingsPage:
        return next(p for p, tab in self._tabs.items() if tab is self.tabs.currentWidget())

    def showEvent(self, event: QShowEvent) -> None:
        # What changed elsewhere since it was last open (Discover's Hub settings, a folder).
        for page in (self.general_page, self.hardware_page, self.appearance_page, self.hub_page):
            page.show_settings()
        super().showEvent(event)
