"""One row of Discover's downloads: its progress, and pause, resume, cancel and load."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
)

from app.services.discover import DiscoverController
from app.widgets.styles import ERROR_STYLE
from engine import (
    DownloadProgress,
    DownloadState,
    format_bytes,
)

__all__ = ["DownloadRow"]


class DownloadRow(QFrame):
    """One download: title, bar, speed and time left, and what can be done with it."""

    def __init__(self, controller: DiscoverController, progress: DownloadProgress,
                 load: Signal) -> None:  # fmt: skip
        super().__init__()
        self.setObjectName(f"download-{progress.key}")
        self.key = progress.key
        self.controller = controller
        self._load = load
        self.target: Path | None = None
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 2)
        self.title = QLabel(progress.title)
        self.title.setMinimumWidth(220)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.detail = QLabel()
        self.detail.setMinimumWidth(220)
        self.pause_button = QPushButton("Pause")
        self.pause_button.setObjectName("pauseDownload")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("cancelDownload")
        self.load_button = QPushButton("Load")
        self.load_button.setObjectName("loadDownload")
        self.load_button.setVisible(False)
        for w in (self.title, self.bar, self.detail, self.pause_button, self.cancel_button, self.load_button):
            layout.addWidget(w)
        layout.setStretch(1, 1)
        self.pause_button.clicked.connect(self._pause_or_resume)
        self.cancel_button.clicked.connect(lambda: self.controller.cancel(self.key))
        self.load_button.clicked.connect(lambda: self.target and self._load.emit(self.target))
        self.state = progress.state
        self.update_progress(progress)

    def _pause_or_resume(self) -> None:
        if self.state in (DownloadState.PAUSED, DownloadState.FAILED):
            self.controller.resume(self.key)
        else:
            self.controller.pause(self.key)

    def update_progress(self, p: DownloadProgress) -> None:
        self.state = p.state
        self.bar.setValue(int(p.fraction * 1000))
        text = f"{format_bytes(p.done_bytes)} of {format_bytes(p.total_bytes)}"
        if p.state is DownloadState.RUNNING:
            text += f" · {format_bytes(p.speed)}/s"
            if p.eta_s is not None:
                s = int(p.eta_s)
                text += f" · {s // 60}:{s % 60:02d} left"
        else:
            text += f" · {p.state.value}"
        if p.error:
            text = p.error
        self.detail.setText(text)
        self.detail.setToolTip(text)
        self.detail.setStyleSheet(ERROR_STYLE if p.state is DownloadState.FAILED else "")
        active = not p.state.finished
        self.pause_button.setVisible(active or p.state is DownloadState.FAILED)
        self.pause_button.setText(
            "Resume" if p.state in (DownloadState.PAUSED, DownloadState.FAILED) else "Pause"
        )
        self.cancel_button.setVisible(active or p.state is DownloadState.FAILED)
        if p.state is DownloadState.DONE and p.target is not None:
            self.target = Path(p.target)
            self.load_button.setVisible(True)
