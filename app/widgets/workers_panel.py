"""RPC workers as the window shows them: address, online or offline (with the reason), the
devices and their memory, and the round-trip time. Used in the hardware view (with
**Add worker…**) and on the dashboard."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from engine import WorkerInfo, format_bytes


def describe_worker(info: WorkerInfo) -> str:
    """One line: "127.0.0.1:50052 — online · 1 device · 23.5 GiB free of 23.5 GiB · 0.4 ms"."""
    if not info.online:
        return f"{info.address} — offline: {info.reason or 'no answer'}"
    devices = len(info.devices)
    parts = [
        "online",
        f"{devices} device{'s' if devices != 1 else ''}",
        f"{format_bytes(info.memory_free)} free of {format_bytes(info.memory_total)}",
    ]
    if info.rtt_ms is not None:
        parts.append(f"{info.rtt_ms:.1f} ms round trip")
    return f"{info.address} — " + " · ".join(parts)


class WorkersPanel(QWidget):
    """A line per worker; with ``can_add``, an **Add worker…** button (``add_requested``)."""

    add_requested = Signal()

    def __init__(self, *, can_add: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.heading = QLabel("Workers")
        font = self.heading.font()
        font.setBold(True)
        self.heading.setFont(font)
        self.empty = QLabel("No workers. Run `hearth worker` on another machine to lend this one its memory.")
        self.empty.setWordWrap(True)
        self.rows = QVBoxLayout()
        self.rows.setSpacing(2)
        self.add_button = QPushButton("Add worker…")
        self.add_button.setToolTip(
            "Use another machine's devices for a model: host:port of its `hearth worker`"
        )
        self.add_button.clicked.connect(self.add_requested)
        self.add_button.setVisible(can_add)
        top = QHBoxLayout()
        top.addWidget(self.heading)
        top.addStretch(1)
        top.addWidget(self.add_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.empty)
        layout.addLayout(self.rows)
        self.labels: list[QLabel] = []

    def set_workers(self, workers: tuple[WorkerInfo, ...]) -> None:
        for label in self.labels:
            label.deleteLater()
        self.labels = []
        for info in workers:
            label = QLabel(describe_worker(info))
            label.setWordWrap(True)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            label.setProperty("online", info.online)
            if not info.online:
                label.setStyleSheet("color: #b35c00;")
            self.rows.addWidget(label)
            self.labels.append(label)
        self.empty.setVisible(not workers)
