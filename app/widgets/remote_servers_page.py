"""Settings → Remote servers: the servers added, each with what it lists or why it is
offline, and a form to add one (name, base URL, API key)."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import Qt, SignalInstance
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.settings.key_vault import KeyVault
from app.state.remote import ListingState, RemoteServer, ServerListing
from engine import RemoteError

URL_ROLE = Qt.ItemDataRole.UserRole + 1
OFFLINE_COLOR = QColor("#d62728")


class ServerList(Protocol):
    """What the page needs of the remote servers (the service ``RemoteServers``)."""

    changed: SignalInstance
    keys: KeyVault

    def servers(self) -> tuple[RemoteServer, ...]: ...
    def listings(self) -> tuple[ServerListing, ...]: ...
    def add(self, url: str, api_key: str = "", name: str = "") -> RemoteServer: ...
    def remove(self, base_url: str) -> None: ...
    def refresh(self, base_url: str | None = None, new_key: str | None = None) -> None: ...


class RemoteServersPage(QWidget):
    def __init__(self, servers: ServerList, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.servers = servers
        intro = QLabel(
            "Chat with models on other machines: any server that speaks OpenAI's API "
            "(llama-server, vLLM, Ollama, another Hearth). Their models appear under Models."
        )
        intro.setWordWrap(True)
        self.tree = QTreeWidget()
        self.tree.setObjectName("remoteServers")
        self.tree.setColumnCount(3)
        self.tree.setHeaderLabels(["Server", "Base URL", "Status"])
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.currentItemChanged.connect(lambda *_: self._update_buttons())
        self.remove_button = QPushButton("Remove")
        self.remove_button.setToolTip("Forget this server and its key")
        self.remove_button.clicked.connect(self.remove_selected)
        self.refresh_button = QPushButton("Check again")
        self.refresh_button.setToolTip("List the servers' models again")
        self.refresh_button.clicked.connect(lambda: self.servers.refresh())
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.refresh_button)
        row.addWidget(self.remove_button)

        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("optional, e.g. Closet box")
        self.url_edit = QLineEdit()
        self.url_edit.setPlaceholderText("http://192.168.1.20:8080/v1")
        self.key_edit = QLineEdit()
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_edit.setPlaceholderText("optional")
        self.add_button = QPushButton("Add server")
        self.add_button.setDefault(True)
        self.add_button.clicked.connect(self.add_server)
        self.url_edit.returnPressed.connect(self.add_server)
        self.error_label = QLabel()
        self.error_label.setObjectName("remoteError")
        self.error_label.setStyleSheet("color: #d62728;")
        self.error_label.setWordWrap(True)  # empty, not hidden: it keeps Add server at the right
        self.key_note = QLabel()
        self.key_note.setWordWrap(True)
        self.key_note.setEnabled(False)  # the quiet colour
        form = QFormLayout()
        form.addRow("Name", self.name_edit)
        form.addRow("Base URL", self.url_edit)
        form.addRow("API key", self.key_edit)
        add_row = QHBoxLayout()
        add_row.addWidget(self.error_label, 1)
        add_row.addWidget(self.add_button, 0, Qt.AlignmentFlag.AlignTop)

        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.tree, 1)
        layout.addLayout(row)
        layout.addLayout(form)
        layout.addLayout(add_row)
        layout.addWidget(self.key_note)
        servers.changed.connect(self.show_servers)
        self.show_servers()

    def show_servers(self) -> None:
        selected = self.selected_url()
        self.tree.clear()
        for listing in self.servers.listings():
            item = QTreeWidgetItem([listing.title, listing.server.base_url, listing.status_text()])
            item.setData(0, URL_ROLE, listing.server.base_url)
            item.setToolTip(2, listing.status_text())
            if listing.state is ListingState.OFFLINE:
                item.setForeground(2, QBrush(OFFLINE_COLOR))
            self.tree.addTopLevelItem(item)
            if listing.server.base_url == selected:
                self.tree.setCurrentItem(item)
        for column in range(2):
            self.tree.resizeColumnToContents(column)
            self.tree.setColumnWidth(column, self.tree.columnWidth(column) + 16)  # air between columns
        keys = self.servers.keys
        self.key_note.setText(
            keys.problem or "API keys are kept in the system keyring, never in Hearth's files."
        )
        self._update_buttons()

    def selected_url(self) -> str | None:
        item = self.tree.currentItem()
        return item.data(0, URL_ROLE) if item is not None else None

    def add_server(self) -> None:
        try:
            self.servers.add(self.url_edit.text(), self.key_edit.text(), self.name_edit.text())
        except RemoteError as exc:
            self.error_label.setText(exc.message)
            return
        self.error_label.clear()
        for edit in (self.name_edit, self.url_edit, self.key_edit):
            edit.clear()

    def remove_selected(self) -> None:
        url = self.selected_url()
        if url is not None:
            self.servers.remove(url)

    def _update_buttons(self) -> None:
        self.remove_button.setEnabled(self.selected_url() is not None)
        self.refresh_button.setEnabled(bool(self.servers.servers()))
