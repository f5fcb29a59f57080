"""Settings → Tools: the MCP servers in ``mcp.json``, each with its state and tools or why it
failed; a server switched on or off, restarted, edited, removed, or imported from another
app's config; its Details (tools, stderr, environment with secrets masked); and the tools
the user trusts to run without asking."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from PySide6.QtCore import Qt, SignalInstance
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.settings.tool_settings import ToolTrust
from app.widgets.tool_server_form import ToolServerForm
from engine import EngineError, ServerConfig, ServerState, ServerStatus, plural

NAME_ROLE = Qt.ItemDataRole.UserRole + 1
STATE_COLORS = {ServerState.FAILED: QColor("#d62728"), ServerState.READY: QColor("#2ca02c")}


class ToolServerList(Protocol):
    """What the page needs of the servers (the service ``ToolsService``)."""

    changed: SignalInstance
    trust: ToolTrust
    path: Path

    def configs(self) -> tuple[ServerConfig, ...]: ...
    def statuses(self) -> tuple[ServerStatus, ...]: ...
    def config_error(self) -> str: ...
    def add(self, config: ServerConfig) -> None: ...
    def update(self, old_name: str, config: ServerConfig) -> None: ...
    def remove(self, name: str) -> None: ...
    def set_enabled(self, name: str, on: bool) -> None: ...
    def restart(self, name: str) -> None: ...
    def import_file(self, path: Path) -> int: ...


def state_text(config: ServerConfig, status: ServerStatus | None) -> str:
    if not config.enabled:
        return "off"
    if status is None or status.state is ServerState.STOPPED:
        return "stopped"
    if status.state is ServerState.READY:
        return f"ready · {plural(len(status.tools), 'tool')}"
    if status.state is ServerState.STARTING:
        return "starting…"
    return f"failed: {status.error}"


class ToolsPage(QWidget):
    def __init__(self, servers: ToolServerList, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.servers = servers
        intro = QLabel(
            "MCP servers give the model tools: files, the time, the web, your apps. Hearth asks "
            f"before each call unless you trust the tool. Kept in {servers.path}."
        )
        intro.setWordWrap(True)
        intro.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.config_error = QLabel()
        self.config_error.setObjectName("mcpConfigError")
        self.config_error.setStyleSheet("color: #d62728;")
        self.config_error.setWordWrap(True)
        self.tree = QTreeWidget()
        self.tree.setObjectName("toolServers")
        self.tree.setHeaderLabels(["Server", "State", "Command or URL"])
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.currentItemChanged.connect(lambda *_: self._selection_changed())
        self.tree.itemChanged.connect(self._item_changed)
        self.details = QPlainTextEdit()
        self.details.setObjectName("toolServerDetails")
        self.details.setReadOnly(True)
        self.details.setPlaceholderText("Select a server to see its tools and what it wrote on stderr.")
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.tree)
        split.addWidget(self.details)
        split.setSizes([160, 140])

        self.restart_button = QPushButton("Restart")
        self.restart_button.clicked.connect(lambda: self._on_selected(self.servers.restart))
        self.edit_button = QPushButton("Edit")
        self.edit_button.clicked.connect(self._edit_selected)
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(lambda: self._on_selected(self.servers.remove))
        self.import_button = QPushButton("Import…")
        self.import_button.setToolTip("Add the servers of a Claude Desktop, LM Studio or Cursor mcp.json")
        self.import_button.clicked.connect(self.choose_import)
        row = QHBoxLayout()
        row.addWidget(self.import_button)
        row.addStretch(1)
        for button in (self.restart_button, self.edit_button, self.remove_button):
            row.addWidget(button)

        self.form = ToolServerForm()
        self.form.submitted.connect(self._submitted)

        self.trusted = QListWidget()
        self.trusted.setObjectName("trustedTools")
        self.trusted.setMaximumHeight(64)
        self.forget_button = QPushButton("Ask again")
        self.forget_button.setToolTip("This tool's calls wait for your allow again")
        self.forget_button.clicked.connect(self._forget_selected)
        trust_row = QHBoxLayout()
        trust_row.addWidget(QLabel("Run without asking:"), 0, Qt.AlignmentFlag.AlignTop)
        trust_row.addWidget(self.trusted, 1)
        trust_row.addWidget(self.forget_button, 0, Qt.AlignmentFlag.AlignTop)

        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.config_error)
        layout.addWidget(split, 1)
        layout.addLayout(row)
        layout.addWidget(self.form)
        layout.addLayout(trust_row)
        servers.changed.connect(self.show_servers)
        self.show_servers()

    def show_servers(self) -> None:
        selected = self.selected_name()
        statuses = {status.name: status for status in self.servers.statuses()}
        self.tree.blockSignals(True)
        self.tree.clear()
        for config in self.servers.configs():
            status = statuses.get(config.name)
            text = state_text(config, status)
            item = QTreeWidgetItem([config.name, text, config.summary()])
            item.setData(0, NAME_ROLE, config.name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(0, Qt.CheckState.Checked if config.enabled else Qt.CheckState.Unchecked)
            item.setToolTip(0, "On: started with Hearth, its tools offered to the model")
            item.setToolTip(1, text)
            if config.enabled and status is not None and status.state in STATE_COLORS:
                item.setForeground(1, QBrush(STATE_COLORS[status.state]))
            self.tree.addTopLevelItem(item)
            if config.name == selected:
                self.tree.setCurrentItem(item)
        self.tree.blockSignals(False)
        self.tree.resizeColumnToContents(0)
        self.tree.setColumnWidth(0, self.tree.columnWidth(0) + 16)
        self.tree.setColumnWidth(1, max(160, min(320, self.tree.sizeHintForColumn(1) + 16)))
        error = self.servers.config_error()
        self.config_error.setText(error)
        self.config_error.setVisible(bool(error))
        self.trusted.clear()
        self.trusted.addItems(sorted(self.servers.trust.trusted()))
        self._selection_changed()

    def selected_name(self) -> str | None:
        item = self.tree.currentItem()
        return item.data(0, NAME_ROLE) if item is not None else None

    def details_text(self, name: str) -> str:
        config = next((c for c in self.servers.configs() if c.name == name), None)
        if config is None:
            return ""
        status = next((s for s in self.servers.statuses() if s.name == name), None)
        lines = [f"{config.name}: {state_text(config, status)}", config.summary()]
        lines += [f"{key}={value}" for key, value in config.shown_env()]
        lines += [f"{key}: {value}" for key, value in config.shown_headers()]
        if config.cwd:
            lines.append(f"in {config.cwd}")
        if status is not None and status.tools:
            lines += ["", "Tools:"]
            lines += [
                f"  {tool.name}: {tool.description.splitlines()[0] if tool.description else ''}"
                for tool in status.tools
            ]
        if status is not None and status.stderr.strip():
            lines += ["", "stderr (last lines):", status.stderr.rstrip()]
        return "\n".join(lines)

    def _selection_changed(self) -> None:
        name = self.selected_name()
        for button in (self.restart_button, self.edit_button, self.remove_button):
            button.setEnabled(name is not None)
        self.details.setPlainText(self.details_text(name) if name else "")
        self.forget_button.setEnabled(self.trusted.count() > 0)

    def _item_changed(self, item: QTreeWidgetItem, column: int) -> None:
        if column == 0:
            self._guarded(
                self.servers.set_enabled, item.data(0, NAME_ROLE), item.checkState(0) == Qt.CheckState.Checked
            )

    def _on_selected(self, action) -> None:
        name = self.selected_name()
        if name is not None:
            self._guarded(action, name)

    def _edit_selected(self) -> None:
        name = self.selected_name()
        config = next((c for c in self.servers.configs() if c.name == name), None)
        if config is not None:
            self.form.edit(config)

    def _submitted(self, config: ServerConfig, old_name: str) -> None:
        if self._guarded(
            self.servers.update if old_name else self.servers.add, *((old_name,) if old_name else ()), config
        ):
            self.form.clear()

    def choose_import(self) -> None:
        path, _filter = QFileDialog.getOpenFileName(
            self, "Import MCP servers", str(Path.home()), "MCP config (*.json)"
        )
        if path:
            self.import_from(Path(path))

    def import_from(self, path: Path) -> int:
        try:
            added = self.servers.import_file(path)
        except EngineError as error:
            self.form.show_error(error.message)
            return 0
        self.form.show_error("" if added else f"{path.name} has no servers Hearth does not have already.")
        return added

    def _forget_selected(self) -> None:
        item = self.trusted.currentItem() or self.trusted.item(0)
        if item is not None:
            self.servers.trust.distrust(item.text())
            self.show_servers()

    def _guarded(self, action, *args) -> bool:
        try:
            action(*args)
        except EngineError as error:
            self.form.show_error(error.message)
            return False
        return True
