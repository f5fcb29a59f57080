"""A token-count spin box that lowers a too-large number to its maximum and says so."""

from __future__ import annotations

import re

from PySide6.QtCore import Signal
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import QSpinBox, QWidget

_NOT_DIGITS = re.compile(r"\D")


class ContextSpinBox(QSpinBox):
    """QSpinBox drops a keystroke that would pass the maximum, so typing 1000000 into a
    box whose maximum is 32,768 silently leaves 10000. Here a number past the maximum may
    be typed; when editing ends it becomes the maximum and ``clamped`` carries what was typed.
    """

    clamped = Signal(int)  # the number typed, larger than maximum()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setGroupSeparatorShown(True)

    def _typed(self, text: str) -> int | None:
        digits = _NOT_DIGITS.sub("", text.removeprefix(self.prefix()).removesuffix(self.suffix()))
        return int(digits) if digits else None

    def validate(self, text: str, pos: int) -> object:
        typed = self._typed(text)
        if typed is not None and typed > self.maximum():
            return QValidator.State.Intermediate, text, pos
        return super().validate(text, pos)

    def fixup(self, text: str) -> str:
        typed = self._typed(text)
        if typed is None or typed <= self.maximum():
            return text
        self.clamped.emit(typed)
        return self.prefix() + self.textFromValue(self.maximum()) + self.suffix()
