"""An indexing run as the Documents page shows it: files done of total on a bar, chunks per
second and the time left, the file being read, Pause/Resume and Cancel. Fed ``IndexProgress``
values; it says what the user asked through signals."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from app.widgets.styles import NOTE_STYLE

if TYPE_CHECKING:
    from engine import IndexProgress


def time_left_text(seconds: float | None) -> str:
    """ "about 40 s left", "about 3 min left"; "" while there is no rate to go by."""
    if seconds is None:
        return ""
    if seconds < 90:
        return f"about {max(1, round(seconds))} s left"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60)} min left"
    return f"about {seconds / 3600:.1f} h left"


def rate_text(event: IndexProgress) -> str:
    """ "12.5 chunks/s · about 40 s left" (what is known of it)."""
    parts = []
    if event.chunks_per_s > 0:
        rate = event.chunks_per_s
        parts.append(f"{rate:.1f} chunks/s" if rate < 100 else f"{rate:.0f} chunks/s")
    left = time_left_text(event.seconds_left)
    if left:
        parts.append(left)
    return " · ".join(parts)


class IndexProgressView(QFrame):
    pause_requested = Signal()
    resume_requested = Signal()
    cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("indexProgress")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title = QLabel()
        self.title.setObjectName("indexTitle")
        self.title.setStyleSheet("font-weight: 600;")
        self.bar = QProgressBar()
        self.bar.setObjectName("indexBar")
        self.bar.setTextVisible(True)
        self.rate = QLabel()
        self.rate.setObjectName("indexRate")
        self.current = QLabel()
        self.current.setObjectName("indexCurrent")
        self.current.setStyleSheet(NOTE_STYLE)
        self.current.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.pause_button = QPushButton("Pause")
        self.pause_button.setObjectName("indexPause")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("indexCancel")
        self.pause_button.clicked.connect(self._pause_clicked)
        self.cancel_button.clicked.connect(self.cancel_requested)
        top = QHBoxLayout()
        top.addWidget(self.title, 1)
        top.addWidget(self.pause_button)
        top.addWidget(self.cancel_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 8, 10, 8)
        layout.addLayout(top)
        layout.addWidget(self.bar)
        line = QHBoxLayout()
        line.addWidget(self.rate)
        line.addStretch(1)
        layout.addLayout(line)
        layout.addWidget(self.current)
        self._paused = False
        self.setVisible(False)

    @property
    def paused(self) -> bool:
        return self._paused

    def start(self, collection: str) -> None:
        """A run of ``collection`` began: the bar waits for the scan."""
        self.title.setText(f"Indexing “{collection}”")
        self.bar.setRange(0, 0)
        self.rate.setText("Looking for files…")
        self.current.setText("")
        self._set_paused(False)
        self.cancel_button.setEnabled(True)
        self.setVisible(True)

    def set_progress(self, event: IndexProgress) -> None:
        phase = event.phase.value
        if event.files_total > 0:
            self.bar.setRange(0, event.files_total)
            self.bar.setValue(event.files_done)
            self.bar.setFormat(f"{event.files_done} / {event.files_total} files")
        if phase == "scanning":
            self.rate.setText("Looking for files…")
        elif phase == "switching":
            self.rate.setText("Switching to the new index…")
        else:
            self.rate.setText(rate_text(event) or "Reading…")
        self.current.setText(event.current.name if event.current is not None else "")
        self.current.setToolTip(str(event.current) if event.current is not None else "")
        self._set_paused(phase == "paused")
        if phase == "paused":
            self.rate.setText(" · ".join(p for p in ("Paused", rate_text(event)) if p))

    def stop(self) -> None:
        self.setVisible(False)

    def _set_paused(self, paused: bool) -> None:
        self._paused = paused
        self.pause_button.setText("Resume" if paused else "Pause")

    def _pause_clicked(self) -> None:
        if self._paused:
            self.resume_requested.emit()
        else:
            self.pause_requested.emit()
