"""How the window's actions and toolbar are made: an action's shortcut works wherever the
focus is in the window (each is added to it), and the toolbar keeps a fixed order."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QToolBar, QWidget

Shortcut = str | QKeySequence.StandardKey | None


def window_action(
    window: QWidget, text: str, shortcut: Shortcut, slot: Callable[[], object], tip: str = ""
) -> QAction:
    act = QAction(text, window)
    if shortcut is not None:
        act.setShortcut(QKeySequence(shortcut))
    if tip:
        act.setToolTip(tip)
    act.triggered.connect(slot)
    window.addAction(act)
    return act


def main_toolbar(items: Iterable[QAction | QWidget | None]) -> QToolBar:
    """The toolbar with ``items`` in order (None: a separator); it stays where it is."""
    toolbar = QToolBar("Main")
    toolbar.setObjectName("mainToolbar")
    toolbar.setMovable(False)
    for item in items:
        if item is None:
            toolbar.addSeparator()
        elif isinstance(item, QAction):
            toolbar.addAction(item)
        else:
            toolbar.addWidget(item)
    return toolbar
