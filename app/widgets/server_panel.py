"""The Local server panel: the switch, the port, the address to copy, the recent requests."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.api import RequestRecord
from app.state.serving import ServerStatus

MAX_ROWS = 100
COLUMNS = ("Time", "Client", "Tokens", "Tok/s", "Status")


def token_text(record: RequestRecord) -> str:
    if not (record.prompt_tokens or record.completion_tokens):
        return "—"
    cached = f" ({record.cached_tokens:,} cached)" if record.cached_tokens else ""
    return f"{record.prompt_tokens:,} + {record.completion_tokens:,}{cached}"


def client_text(record: RequestRecord) -> str:
    """The program that asked (its User-Agent's name); the address when it does not say: on
    127.0.0.1 the address is always the same."""
    return record.client.split(" · ", 1)[-1]


def record_row(record: RequestRecord) -> tuple[str, str, str, str, str]:
    return (
        time.strftime("%H:%M:%S", time.localtime(record.time)),
        client_text(record),
        token_text(record),
        f"{record.tokens_per_second:.1f}" if record.tokens_per_second else "—",
        record.status_text,
    )


class ServerPanel(QWidget):
    enabled_toggled = Signal(bool)
    port_changed = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.switch = QCheckBox("Serve the loaded model to other programs")
        self.switch.setToolTip(
            "An OpenAI-compatible API on this machine only (127.0.0.1): editors and scripts use the "
            "model loaded here, sharing its batches and its prompt cache with your chats."
        )
        self.switch.toggled.connect(self.enabled_toggled)
        self.port_spin = QSpinBox()
        self.port_spin.setRange(1024, 65535)
        self.port_spin.setPrefix("Port ")
        self.port_spin.setKeyboardTracking(False)  # a port is taken when typed, not per digit
        self.port_spin.valueChanged.connect(self.port_changed)
        self.address = QLineEdit()
        self.address.setReadOnly(True)
        self.address.setPlaceholderText("Off")
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy the base URL for an OpenAI client")
        self.copy_button.clicked.connect(self.copy_address)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setObjectName("serverStatus")
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)

        top = QHBoxLayout()
        top.addWidget(self.switch, 1)
        top.addWidget(self.port_spin)
        address_row = QHBoxLayout()
        address_row.addWidget(self.address, 1)
        address_row.addWidget(self.copy_button)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addLayout(address_row)
        layout.addWidget(self.status)
        layout.addWidget(QLabel("Recent requests"))
        layout.addWidget(self.table, 1)
        self.table.setMinimumHeight(120)  # a few rows, even stacked under the dashboard
        self.show_status(ServerStatus.OFF, "", "", None)

    def set_port(self, port: int) -> None:
        self.port_spin.blockSignals(True)
        self.port_spin.setValue(port)
        self.port_spin.blockSignals(False)

    def show_status(self, status: ServerStatus, address: str, error: str, model_name: str | None) -> None:
        self.switch.blockSignals(True)
        self.switch.setChecked(status in (ServerStatus.ON, ServerStatus.STARTING))
        self.switch.blockSignals(False)
        self.address.setText(address)
        self.copy_button.setEnabled(bool(address))
        if status is ServerStatus.FAILED:
            text, color = error, "#d62728"
        elif status is ServerStatus.STARTING:
            text, color = "Starting…", ""
        elif status is ServerStatus.ON:
            serving = (
                f"Serving {model_name}."
                if model_name
                else "No model is loaded: requests get a 503 until one is."
            )
            text, color = f"{serving} Use {address} as the base URL, with any API key.", ""
        else:
            text, color = "Off. Other programs cannot reach Hearth.", ""
        self.status.setText(text)
        self.status.setStyleSheet(f"color: {color};" if color else "")

    def copy_address(self) -> None:
        if self.address.text():
            QGuiApplication.clipboard().setText(self.address.text())
            self.copy_button.setText("Copied")
            # With the button as context: a window closed within the 1.5 s cancels the timer.
            QTimer.singleShot(1500, self.copy_button, lambda: self.copy_button.setText("Copy"))

    def add_record(self, record: RequestRecord) -> None:
        """Newest first; at most MAX_ROWS."""
        self.table.insertRow(0)
        for column, text in enumerate(record_row(record)):
            item = QTableWidgetItem(text)
            if column in (2, 3, 4):
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            if column == 1:
                item.setToolTip(f"{record.client}\n{record.method} {record.path}")
            if column == 4 and record.error:
                item.setToolTip(record.error)
            self.table.setItem(0, column, item)
        while self.table.rowCount() > MAX_ROWS:
            self.table.removeRow(self.table.rowCount() - 1)
