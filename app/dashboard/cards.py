"""How the dashboard lays its cards out: a grid that reflows into one to three columns,
and a titled section (heading, an optional note, a grid)."""

from __future__ import annotations

from PySide6.QtWidgets import QGridLayout, QLabel, QVBoxLayout, QWidget

from app.dashboard.hardware_view import NOTE_STYLE

__all__ = ["CardGrid", "Section"]


class CardGrid(QWidget):
    """Cards in rows of ``columns``; a wide card takes a row of its own. Hidden cards leave no hole."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setSpacing(8)
        self._cards: list[tuple[QWidget, bool]] = []
        self.hidden: set[QWidget] = set()
        self._columns = 2

    def add(self, card: QWidget, wide: bool = False, visible: bool = True) -> None:
        card.setParent(self)  # a child even while hidden: showing it later must not make a window
        self._cards.append((card, wide))
        if not visible:
            self.hidden.add(card)
        self.reflow()

    def set_card_visible(self, card: QWidget, visible: bool) -> None:
        if visible == (card not in self.hidden):
            return
        if visible:
            self.hidden.discard(card)
        else:
            self.hidden.add(card)
        self.reflow()

    def shows(self, card: QWidget) -> bool:
        return any(c is card for c, _ in self._cards) and card not in self.hidden

    def set_columns(self, columns: int) -> None:
        if columns != self._columns:
            self._columns = columns
            self.reflow()

    def reflow(self) -> None:
        for card, _ in self._cards:
            self.grid.removeWidget(card)
        for c in range(self.grid.columnCount()):
            self.grid.setColumnStretch(c, 0)
        row = col = 0
        for card, wide in self._cards:
            card.setVisible(card not in self.hidden)
            if card in self.hidden:
                continue
            if wide:
                if col:
                    row, col = row + 1, 0
                self.grid.addWidget(card, row, 0, 1, self._columns)
                row += 1
                continue
            self.grid.addWidget(card, row, col)
            col += 1
            if col == self._columns:
                row, col = row + 1, 0
        for c in range(self._columns):
            self.grid.setColumnStretch(c, 1)


class Section(QWidget):
    """A heading, a note shown only when there is something to say, and the cards."""

    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.heading = QLabel(title)
        font = self.heading.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.15)
        self.heading.setFont(font)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet(NOTE_STYLE)
        self.note.setVisible(False)
        self.cards = CardGrid()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 4)
        layout.setSpacing(6)
        layout.addWidget(self.heading)
        layout.addWidget(self.note)
        layout.addWidget(self.cards)
