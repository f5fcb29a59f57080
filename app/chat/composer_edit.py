"""The composer's text box: Enter, Shift+Enter, Ctrl+Enter and Esc, images by paste or
drop, and a height that grows with the text."""

from __future__ import annotations

import math
from typing import Protocol

from PySide6.QtCore import QMimeData, Qt
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent, QKeyEvent, QResizeEvent
from PySide6.QtWidgets import QFrame, QPlainTextEdit, QWidget

__all__ = ["MAX_LINES", "MIN_LINES", "ComposerEdit", "EditOwner"]

MIN_LINES = 2
MAX_LINES = 10


class EditOwner(Protocol):
    """What the text box asks of the composer around it."""

    def send_on_enter(self) -> bool: ...
    def submit(self) -> bool: ...
    def escape(self) -> None: ...
    def can_take(self, mime: QMimeData) -> bool: ...
    def take(self, mime: QMimeData) -> bool: ...


class ComposerEdit(QPlainTextEdit):
    """The text box: Enter/Shift+Enter/Ctrl+Enter/Esc, and images by paste or drop."""

    def __init__(self, composer: EditOwner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._composer = composer
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setTabChangesFocus(True)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.viewport().setAutoFillBackground(False)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            self.fit_height()  # wrapping changed

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        mods = event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            ctrl = bool(mods & Qt.KeyboardModifier.ControlModifier)
            shift = bool(mods & Qt.KeyboardModifier.ShiftModifier)
            plain = mods == Qt.KeyboardModifier.NoModifier
            if ctrl or (self._composer.send_on_enter() and plain):
                self._composer.submit()
                return
            if shift or plain:
                # Always a newline (Qt would insert a line separator for Shift+Enter).
                self.textCursor().insertText("\n")
                self.ensureCursorVisible()
                return
        if key == Qt.Key.Key_Escape:
            self._composer.escape()
            return
        super().keyPressEvent(event)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return self._composer.can_take(source) or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        if not self._composer.take(source):
            super().insertFromMimeData(source)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if self._composer.can_take(event.mimeData()):
            event.acceptProposedAction()
        else:
            super().dragEnterEvent(event)

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        if self._composer.can_take(event.mimeData()):
            event.acceptProposedAction()
        else:
            super().dragMoveEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        if self._composer.take(event.mimeData()):
            event.acceptProposedAction()
        else:
            super().dropEvent(event)

    def fit_height(self) -> None:
        """Grow with the text (wrapped lines included) from MIN_LINES to MAX_LINES, then
        scroll."""
        doc = self.document()
        layout = doc.documentLayout()
        line = self.fontMetrics().lineSpacing()
        limit = MAX_LINES * line
        content = 0.0
        block = doc.begin()
        # blockBoundingRect lays a block out on demand; stop once past the limit so a
        # huge paste does not lay out the whole text here.
        while block.isValid() and content <= limit:
            content += layout.blockBoundingRect(block).height()
            block = block.next()
        text_height = max(MIN_LINES * line, min(limit, math.ceil(content)))
        margins = self.contentsMargins()
        height = text_height + 2 * int(doc.documentMargin()) + margins.top() + margins.bottom()
        if self.height() != height:
            self.setFixedHeight(height)
