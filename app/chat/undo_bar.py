"""A bar that offers to undo the last delete for a few seconds: "Deleted “Trip to Lisbon” [Undo]"."""

from __future__ import annotations

from collections.abc import Hashable

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QHideEvent, QResizeEvent, QShowEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QWidget

UNDO_SECONDS = 8


class ElidedLabel(QLabel):
    """One line that gives way to its neighbours: cut with "…" to its width, whole in its
    tooltip (a label as wide as its text would push the Undo button out of a narrow bar)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(0)

    def set_full_text(self, text: str) -> None:
        self._full = text
        self._elide()

    def full_text(self) -> str:
        return self._full

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideMiddle, max(0, self.width()))
        self.setText(shown)
        self.setToolTip(self._full if shown != self._full else "")


class UndoBar(QFrame):
    """One undo offer at a time, for whatever the owner deleted (named by ``key``).

    ``offer`` shows the bar; the Undo button emits ``undo_requested(key)``; the offer ends
    (``expired(key)``) after UNDO_SECONDS, on ``dismiss``, or when the next ``offer`` comes,
    which makes the earlier delete final.
    """

    undo_requested = Signal(object)
    expired = Signal(object)
    visibility_changed = Signal()  # shown or hidden: an owner that makes room for it moves things

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("undoBar")
        self._key: Hashable | None = None
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 4, 4, 4)
        self.label = ElidedLabel()
        self.button = QPushButton("Undo")
        self.button.clicked.connect(self.undo)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.button)
        self.setStyleSheet(
            "QFrame#undoBar { background: palette(alternate-base); border-top: 1px solid palette(mid); }"
        )
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(UNDO_SECONDS * 1000)
        self.timer.timeout.connect(self.dismiss)
        self.hide()

    def offer(self, key: Hashable, text: str) -> None:
        if self._key is not None:
            self.dismiss()
        self._key = key
        self.label.set_full_text(text)
        self.show()
        self.timer.start()

    def text(self) -> str:
        """The whole text of the offer (the label may show it cut)."""
        return self.label.full_text()

    def pending(self) -> Hashable | None:
        """What the offer on show would bring back (None: no offer)."""
        return self._key

    def undo(self) -> None:
        key = self._end()
        if key is not None:
            self.undo_requested.emit(key)

    def dismiss(self) -> None:
        """End the offer: the delete is final."""
        key = self._end()
        if key is not None:
            self.expired.emit(key)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.visibility_changed.emit()

    def hideEvent(self, event: QHideEvent) -> None:
        super().hideEvent(event)
        self.visibility_changed.emit()

    def _end(self) -> Hashable | None:
        key, self._key = self._key, None
        self.timer.stop()
        self.hide()
        return key
