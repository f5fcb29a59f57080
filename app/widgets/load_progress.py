"""Each load phase as a step with its own progress bar and duration."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGridLayout, QLabel, QProgressBar, QWidget

from app.wording.presenters import PHASE_LABELS
from engine import LoadPhase


class LoadProgress(QWidget):
    """Fed by LoadedModel's phase_started / phase_progress / phase_finished signals."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._grid = QGridLayout(self)
        self._grid.setContentsMargins(0, 0, 0, 0)
        self._rows: dict[LoadPhase, tuple[QLabel, QProgressBar, QLabel]] = {}
        self._started: dict[LoadPhase, float] = {}

    def set_phases(self, phases: tuple[LoadPhase, ...]) -> None:
        while self._grid.count():
            widget = self._grid.takeAt(0).widget()
            if widget is not None:
                # Deleted only once the event loop runs: hidden now, or the last load's
                # rows would show through this one's.
                widget.hide()
                widget.deleteLater()
        self._rows.clear()
        self._started.clear()
        for row, phase in enumerate(phases):
            name = QLabel(PHASE_LABELS.get(phase, phase.value))
            bar = QProgressBar()
            bar.setRange(0, 1000)
            bar.setValue(0)
            bar.setTextVisible(False)
            bar.setMaximumHeight(10)
            duration = QLabel("")
            duration.setMinimumWidth(70)
            duration.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self._grid.addWidget(name, row, 0)
            self._grid.addWidget(bar, row, 1)
            self._grid.addWidget(duration, row, 2)
            self._rows[phase] = (name, bar, duration)
        self._grid.setColumnStretch(1, 1)

    def phase_started(self, phase: LoadPhase) -> None:
        self._started[phase] = time.perf_counter()
        if phase in self._rows:
            self._rows[phase][2].setText("…")

    def phase_progress(self, phase: LoadPhase, fraction: float) -> None:
        if phase in self._rows:
            self._rows[phase][1].setValue(int(max(0.0, min(1.0, fraction)) * 1000))

    def phase_finished(self, phase: LoadPhase, seconds: float) -> None:
        if phase in self._rows:
            _, bar, duration = self._rows[phase]
            bar.setValue(1000)
            duration.setText(f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s")

    def mark_failed(self) -> None:
        for phase, (_, bar, duration) in self._rows.items():
            if phase in self._started and bar.value() < 1000:
                duration.setText("failed")
                duration.setStyleSheet("color: #d62728;")

    def finished_phases(self) -> list[LoadPhase]:
        return [p for p, (_, bar, _) in self._rows.items() if bar.value() == 1000]
