"""Settings → Tools' form for one MCP server: a name, the command line that starts it (or
the URL of a Streamable HTTP server), and its environment or headers one per line. A value
shown masked (an existing secret) is kept as it was."""

from __future__ import annotations

import shlex

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine import SECRET_MASK, McpConfigError, ServerConfig


def config_from_form(
    name: str, target: str, pairs_text: str, cwd: str = "", old: ServerConfig | None = None
) -> ServerConfig:
    """What the form says, as a server; ``old``: the server being edited, whose masked
    secrets are kept."""
    name, target = name.strip(), target.strip()
    if not name:
        raise McpConfigError("Give the server a name.")
    if not target:
        raise McpConfigError("Give the command that starts the server, or its URL.")
    is_url = target.startswith(("http://", "https://"))
    kept = dict(old.headers if is_url else old.env) if old is not None else {}
    pairs: list[tuple[str, str]] = []
    for number, line in enumerate(pairs_text.splitlines(), 1):
        if not line.strip():
            continue
        separator = (
            ":" if is_url and ":" in line and ("=" not in line or line.index(":") < line.index("=")) else "="
        )
        key, found, value = line.partition(separator)
        if not found or not key.strip():
            form = "Name: value" if is_url else "NAME=value"
            raise McpConfigError(
                f"Line {number} of the {'headers' if is_url else 'environment'} is not {form}."
            )
        key, value = key.strip(), value.strip()
        pairs.append((key, kept.get(key, "") if value == SECRET_MASK else value))
    enabled = old.enabled if old is not None else True
    if is_url:
        return ServerConfig(name, url=target, headers=tuple(pairs), enabled=enabled)
    try:
        words = shlex.split(target)
    except ValueError as error:
        raise McpConfigError(f"The command line cannot be read: {error}.") from None
    return ServerConfig(
        name,
        command=words[0],
        args=tuple(words[1:]),
        env=tuple(pairs),
        cwd=cwd.strip() or None,
        enabled=enabled,
    )


def form_values(config: ServerConfig) -> tuple[str, str, str, str]:
    """A server as the form shows it: name, command line or URL, masked pairs, folder."""
    if config.url:
        pairs = "\n".join(f"{key}: {value}" for key, value in config.shown_headers())
        return config.name, config.url, pairs, ""
    target = shlex.join([config.command, *config.args])
    pairs = "\n".join(f"{key}={value}" for key, value in config.shown_env())
    return config.name, target, pairs, config.cwd or ""


class ToolServerForm(QWidget):
    """Add a server, or change the one being edited; ``submitted(config, old_name)``."""

    submitted = Signal(object, str)  # ServerConfig, the edited server's name ("" when adding)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.editing: ServerConfig | None = None
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("e.g. files")
        self.target_edit = QLineEdit()
        self.target_edit.setPlaceholderText(
            "npx -y @modelcontextprotocol/server-filesystem ~/Notes   or   http://host:port/mcp"
        )
        self.pairs_edit = QPlainTextEdit()
        self.pairs_edit.setPlaceholderText(
            "API_KEY=…  (environment, one per line; for a URL: Authorization: Bearer …)"
        )
        self.pairs_edit.setFixedHeight(56)
        self.cwd_edit = QLineEdit()
        self.cwd_edit.setPlaceholderText("optional: the folder the command runs in")
        self.submit_button = QPushButton("Add server")
        self.submit_button.setObjectName("addToolServer")
        self.submit_button.clicked.connect(self.submit)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.clear)
        self.cancel_button.setVisible(False)
        self.target_edit.returnPressed.connect(self.submit)
        self.error_label = QLabel()
        self.error_label.setObjectName("toolServerError")
        self.error_label.setStyleSheet("color: #d62728;")
        self.error_label.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Name", self.name_edit)
        form.addRow("Command or URL", self.target_edit)
        form.addRow("Environment", self.pairs_edit)
        form.addRow("Folder", self.cwd_edit)
        row = QHBoxLayout()
        row.addWidget(self.error_label, 1)
        row.addWidget(self.cancel_button, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(self.submit_button, 0, Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(form)
        layout.addLayout(row)

    def edit(self, config: ServerConfig) -> None:
        self.editing = config
        name, target, pairs, cwd = form_values(config)
        self.name_edit.setText(name)
        self.target_edit.setText(target)
        self.pairs_edit.setPlainText(pairs)
        self.cwd_edit.setText(cwd)
        self.submit_button.setText("Save")
        self.cancel_button.setVisible(True)
        self.error_label.clear()

    def clear(self) -> None:
        self.editing = None
        for edit in (self.name_edit, self.target_edit, self.cwd_edit):
            edit.clear()
        self.pairs_edit.clear()
        self.submit_button.setText("Add server")
        self.cancel_button.setVisible(False)

    def show_error(self, message: str) -> None:
        self.error_label.setText(message)

    def submit(self) -> None:
        try:
            config = config_from_form(
                self.name_edit.text(),
                self.target_edit.text(),
                self.pairs_edit.toPlainText(),
                self.cwd_edit.text(),
                self.editing,
            )
        except McpConfigError as error:
            self.show_error(error.message)
            return
        self.error_label.clear()
        self.submitted.emit(config, self.editing.name if self.editing else "")
