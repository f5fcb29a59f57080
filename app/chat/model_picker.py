"""The model picker atop the chat: the button naming the model that answers, the list it
opens (the library's models with their fit verdicts, the remote servers' models), and the
load's phases shown on one line under it while a model loads."""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QPoint, QSize, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QHideEvent, QKeyEvent, QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.state.choices import ModelChoice
from engine import Verdict

PICKER_SHORTCUT = "Ctrl+M"  # Ctrl+L (LM Studio's) focuses the composer here
CHOICE_ROLE = Qt.ItemDataRole.UserRole + 1
ARROW = " ▾"
POPUP_WIDTH = 460
VERDICT_COLORS = {
    Verdict.FITS: "#2ca02c",
    Verdict.PARTIAL_OFFLOAD: "#b36b00",
    Verdict.TIGHT: "#b36b00",
    Verdict.DOES_NOT_FIT: "#d62728",
}


def choice_text(choice: ModelChoice) -> str:
    mark = "  ● answering" if choice.current else ""
    return f"{choice.name}{mark}\n{choice.detail}"


class PickerButton(QToolButton):
    """The answering model's name; a click (or Ctrl+M) opens the picker."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelPicker")
        self.setAutoRaise(True)
        self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.setStyleSheet("QToolButton#modelPicker { text-align: left; padding: 0 2px; }")
        self._full = ""

    def set_full_text(self, text: str) -> None:
        self._full = text
        self.updateGeometry()
        self._elide()

    def sizeHint(self) -> QSize:
        # As wide as the whole name (the layout gives less where there is less: it elides).
        hint = super().sizeHint()
        return QSize(self.fontMetrics().horizontalAdvance(self._full + ARROW) + 16, hint.height())

    def minimumSizeHint(self) -> QSize:
        return QSize(60, super().minimumSizeHint().height())

    def full_text(self) -> str:
        return self._full

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        width = max(40, self.width() - 12 - self.fontMetrics().horizontalAdvance(ARROW))
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, width)
        self.setText(shown + ARROW)
        tip = f"Choose the model that answers ({PICKER_SHORTCUT})"
        self.setToolTip(tip if shown == self._full else f"{self._full}\n{tip}")


POPUP_MAX_HEIGHT = 460


class ModelPickerPopup(QFrame):
    """The list the picker opens: type to filter, choose with a click or the arrows and
    Enter; Esc closes."""

    chosen = Signal(object)  # ModelChoice

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Popup)
        self.setObjectName("modelPickerPopup")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.filter = QLineEdit()
        self.filter.setObjectName("modelPickerFilter")
        self.filter.setPlaceholderText("Filter models…")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self._apply_filter)
        self.list = QListWidget()
        self.list.setObjectName("modelPickerList")
        self.list.setWordWrap(True)
        self.list.setUniformItemSizes(False)
        self.list.setStyleSheet("QListWidget#modelPickerList::item { padding: 4px 8px; }")
        self.list.itemActivated.connect(self._activated)
        self.list.itemClicked.connect(self._activated)
        self.empty = QLabel(
            "No models yet: add GGUF files under Models, find one in Discover, or add a remote "
            "server in Settings."
        )
        self.empty.setWordWrap(True)
        self.empty.setContentsMargins(10, 10, 10, 10)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.filter)
        layout.addWidget(self.list)
        layout.addWidget(self.empty)

    def set_choices(self, choices: Iterable[ModelChoice]) -> None:
        self.filter.blockSignals(True)
        self.filter.clear()
        self.filter.blockSignals(False)
        self.list.clear()
        current_row = -1
        sections = (("On this computer", False), ("Remote servers", True))
        choices = list(choices)
        for title, remote in sections:
            group = [c for c in choices if c.is_remote is remote]
            if not group:
                continue
            header = QListWidgetItem(title)
            header.setFlags(Qt.ItemFlag.NoItemFlags)
            font = header.font()
            font.setBold(True)
            header.setFont(font)
            self.list.addItem(header)
            for choice in group:
                item = QListWidgetItem(choice_text(choice))
                item.setData(CHOICE_ROLE, choice)
                if choice.verdict is not None:
                    item.setForeground(QBrush(QColor(VERDICT_COLORS[choice.verdict])))
                    item.setToolTip(f"{choice.name}: {choice.detail}, with its last load settings")
                self.list.addItem(item)
                if choice.current or current_row < 0:  # the answering model, else the first
                    current_row = self.list.count() - 1
        self.empty.setVisible(self.list.count() == 0)
        self.list.setVisible(self.list.count() > 0)
        if current_row >= 0:
            self.list.setCurrentRow(current_row)

    def _apply_filter(self, text: str) -> None:
        """Rows whose name holds ``text`` (any case); a section without one is hidden too."""
        needle = text.strip().casefold()
        header: QListWidgetItem | None = None
        header_used = False
        first: QListWidgetItem | None = None
        for row in range(self.list.count()):
            item = self.list.item(row)
            choice = item.data(CHOICE_ROLE)
            if choice is None:
                if header is not None:
                    header.setHidden(not header_used)
                header, header_used = item, False
                continue
            shown = needle in choice.name.casefold()
            item.setHidden(not shown)
            header_used = header_used or shown
            if shown and first is None:
                first = item
        if header is not None:
            header.setHidden(not header_used)
        current = self.list.currentItem()
        if first is not None and (current is None or current.isHidden()):
            self.list.setCurrentItem(first)

    def _step(self, offset: int) -> None:
        """The arrows, from the filter: the next shown choice up or down."""
        row = self.list.currentRow()
        while 0 <= row + offset < self.list.count():
            row += offset
            item = self.list.item(row)
            if not item.isHidden() and item.data(CHOICE_ROLE) is not None:
                self.list.setCurrentItem(item)
                return

    def choices(self) -> list[ModelChoice]:
        items = (self.list.item(row) for row in range(self.list.count()))
        return [item.data(CHOICE_ROLE) for item in items if item.data(CHOICE_ROLE) is not None]

    def row_of(self, name: str) -> QListWidgetItem:
        """The row of the choice named ``name`` (tests, and the keyboard's first row)."""
        for row in range(self.list.count()):
            choice = self.list.item(row).data(CHOICE_ROLE)
            if choice is not None and choice.name == name:
                return self.list.item(row)
        raise KeyError(name)

    def open_under(self, anchor: QWidget) -> None:
        shown = [r for r in range(self.list.count()) if not self.list.isRowHidden(r)]
        rows = sum(self.list.sizeHintForRow(r) for r in shown)
        margins = self.layout().contentsMargins()
        # Every row shown (up to a limit) under the filter: the list's own frame, the filter
        # and the layout's margins and spacing come on top of the rows.
        chrome = (
            self.filter.sizeHint().height()
            + self.layout().spacing()
            + margins.top()
            + margins.bottom()
            + 2 * self.list.frameWidth()
            + 2 * self.frameWidth()
            + 4
        )
        self.resize(max(POPUP_WIDTH, anchor.width()), min(POPUP_MAX_HEIGHT, chrome + max(40, rows)))
        self.move(anchor.mapToGlobal(QPoint(0, anchor.height())))
        self.show()
        self.filter.setFocus()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        current = self.list.currentItem()
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and current and not current.isHidden():
            self._activated(current)
            return
        if event.key() in (Qt.Key.Key_Up, Qt.Key.Key_Down) and self.filter.hasFocus():
            self._step(-1 if event.key() == Qt.Key.Key_Up else 1)
            return
        super().keyPressEvent(event)

    def hideEvent(self, event: QHideEvent) -> None:
        super().hideEvent(event)
        # The window's shortcuts work again at once (a platform without a window manager
        # leaves the closed popup the active window).
        owner = self.parentWidget()
        if owner is not None:
            owner.window().activateWindow()

    def _activated(self, item: QListWidgetItem) -> None:
        choice = item.data(CHOICE_ROLE)
        if choice is None or not self.isVisible():  # a header; or Enter seen twice
            return
        self.hide()
        self.chosen.emit(choice)


class LoadLine(QWidget):
    """A model's load, inline under the picker: the phase and its progress, or why it failed."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatLoadLine")
        self.label = QLabel()
        self.label.setObjectName("loadPhase")
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(False)
        self.bar.setMaximumHeight(8)
        self.bar.setMaximumWidth(160)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.bar)
        self.hide()

    def show_phase(self, model_name: str, phase_label: str, fraction: float) -> None:
        self.label.setStyleSheet("")
        self.label.setText(f"Loading {model_name}: {phase_label}…")
        self.bar.setValue(int(1000 * max(0.0, min(1.0, fraction))))
        self.bar.show()
        self.show()

    def show_error(self, text: str) -> None:
        self.label.setStyleSheet("color: #d62728;")
        self.label.setText(text)
        self.label.setToolTip(text)
        self.bar.hide()
        self.show()

    def clear(self) -> None:
        self.label.setText("")
        self.label.setToolTip("")
        self.hide()
