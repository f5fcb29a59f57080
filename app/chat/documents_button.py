"""The chat header's Documents button: which collections this conversation searches."""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QMenu, QToolButton, QWidget

NO_COLLECTIONS = "No collections yet: add files on the Documents page"


class DocumentsButton(QToolButton):
    """A menu of the collections, each a checkbox; ``chosen_changed`` with the names ticked."""

    chosen_changed = Signal(list)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("documentsButton")
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        # The style's menu arrow overlaps the text at small sizes: the label says ▾ instead.
        self.setStyleSheet("QToolButton#documentsButton::menu-indicator { image: none; width: 0px; }")
        self.menu_ = QMenu(self)
        self.setMenu(self.menu_)
        self._names: list[str] = []
        self._chosen: set[str] = set()
        self._rebuild()

    def set_collections(self, names: Iterable[str], chosen: Iterable[str]) -> None:
        """The collections there are, and those this conversation searches (a chosen one no
        longer there is kept, unlisted, in case it comes back)."""
        self._names = list(names)
        self._chosen = set(chosen)
        self._rebuild()

    def chosen(self) -> list[str]:
        """The names ticked that exist, in the menu's order."""
        return [name for name in self._names if name in self._chosen]

    def set_checked_name(self, name: str, checked: bool) -> None:
        """Tick or untick one, as a click on it does."""
        for action in self.menu_.actions():
            if action.isCheckable() and action.text() == name:
                action.setChecked(checked)  # toggled → _toggled

    def _rebuild(self) -> None:
        self.menu_.clear()
        if not self._names:
            empty = self.menu_.addAction(NO_COLLECTIONS)
            empty.setEnabled(False)
        for name in self._names:
            action = self.menu_.addAction(name)
            action.setCheckable(True)
            action.setChecked(name in self._chosen)
            action.toggled.connect(lambda checked, name=name: self._toggled(name, checked))
        self._label()

    def _toggled(self, name: str, checked: bool) -> None:
        if checked:
            self._chosen.add(name)
        else:
            self._chosen.discard(name)
        self._label()
        self.chosen_changed.emit(self.chosen())

    def _label(self) -> None:
        count = len(self.chosen())
        self.setText(f"Documents · {count} ▾" if count else "Documents ▾")
        self.setToolTip(
            "Answers search: " + ", ".join(self.chosen())
            if count
            else "Collections this conversation searches before the model answers"
        )
