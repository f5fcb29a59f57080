"""A compact, always-visible summary of this machine."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.widgets.workers_panel import WorkersPanel
from engine import HardwareSnapshot, describe_hardware


class HardwarePanel(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.heading = QLabel("This machine")
        font = self.heading.font()
        font.setBold(True)
        self.heading.setFont(font)
        self.body = QLabel("Looking at this machine…")
        self.body.setWordWrap(True)
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #e69500;")
        self.note.setVisible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.addWidget(self.heading)
        layout.addWidget(self.body)
        layout.addWidget(self.note)
        self.workers = WorkersPanel(can_add=True)  # RPC workers: Add worker… and their state
        layout.addWidget(self.workers)
        layout.addStretch(1)

    def set_snapshot(self, snapshot: HardwareSnapshot) -> None:
        self.body.setText("\n".join(describe_hardware(snapshot)))
        note = snapshot.offload_note
        self.note.setText(note or "")
        self.note.setVisible(bool(note))
