"""The window's one navigation: a slim column of pages (Chats, Models, Discover, Documents) at the left."""

from __future__ import annotations

import enum

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import (
    QButtonGroup,
    QFrame,
    QHBoxLayout,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)


class Page(enum.Enum):
    """A page of the main window, in the order the rail shows them."""

    CHATS = "chats"
    MODELS = "models"
    DISCOVER = "discover"
    DOCUMENTS = "documents"


PAGE_LABELS = {
    Page.CHATS: "Chats",
    Page.MODELS: "Models",
    Page.DISCOVER: "Discover",
    Page.DOCUMENTS: "Documents",
}
PAGE_TIPS = {
    Page.CHATS: "Conversations with the loaded model (Ctrl+1)",
    Page.MODELS: "Your models: what fits this machine, load and unload (Ctrl+2)",
    Page.DISCOVER: "Find models on the Hugging Face Hub: see what fits before downloading (Ctrl+3)",
    Page.DOCUMENTS: "Collections of your files that chats can search and cite (Ctrl+4)",
}
RAIL_WIDTH = 76


class NavRail(QFrame):
    """One checkable button per page; exactly one is checked."""

    page_selected = Signal(object)  # Page, when the user picks one

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("navRail")
        self._group = QButtonGroup(self)
        self._group.setExclusive(True)
        self.buttons: dict[Page, QToolButton] = {}
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 8, 6, 8)
        layout.setSpacing(4)
        for page in Page:
            button = QToolButton()
            button.setObjectName(f"nav-{page.value}")
            button.setText(PAGE_LABELS[page])
            button.setToolTip(PAGE_TIPS[page])
            button.setCheckable(True)
            button.setAutoRaise(True)
            button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
            button.setMinimumHeight(40)
            button.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
            button.clicked.connect(lambda _checked=False, p=page: self._clicked(p))
            self._group.addButton(button)
            self.buttons[page] = button
            layout.addWidget(button)
        layout.addStretch(1)
        # Wide enough for the longest label in the bold face the buttons use (the margins,
        # the buttons' padding and a little air beside it): never cut to "Doc…nts".
        bold = QFont(self.font())
        bold.setWeight(QFont.Weight.DemiBold)
        widest = max(QFontMetrics(bold).horizontalAdvance(label) for label in PAGE_LABELS.values())
        self.setFixedWidth(max(RAIL_WIDTH, widest + 2 * 6 + 2 * 2 + 12))
        self.setStyleSheet(
            "QFrame#navRail { background: palette(alternate-base); border-right: 1px solid palette(mid); }"
            "QFrame#navRail QToolButton { border: none; border-radius: 6px; padding: 6px 2px;"
            " font-weight: 600; }"
            "QFrame#navRail QToolButton:hover { background: palette(midlight); }"
            "QFrame#navRail QToolButton:checked { background: palette(highlight);"
            " color: palette(highlighted-text); }"
        )
        self.set_page(Page.CHATS)

    def page(self) -> Page:
        return next(p for p, b in self.buttons.items() if b.isChecked())

    def set_page(self, page: Page) -> None:
        """Check ``page``'s button (no signal: the window switches the page itself)."""
        self.buttons[page].setChecked(True)

    def _clicked(self, page: Page) -> None:
        self.page_selected.emit(page)


def beside_rail(rail: NavRail, pages: QWidget) -> QWidget:
    """The window's middle: the rail at the left edge, the pages taking the rest."""
    middle = QWidget()
    layout = QHBoxLayout(middle)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(0)
    layout.addWidget(rail)
    layout.addWidget(pages, 1)
    return middle
