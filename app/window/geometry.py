"""Where the main window opens: its preferred size, at most the screen's available room,
centred there; a saved geometry from a larger screen (or a screen gone) pulled back inside."""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget

PREFERRED_SIZE = QSize(1320, 840)


def first_geometry(preferred: QSize, available: QRect) -> QRect:
    """A first window: ``preferred``, shrunk to ``available`` where it is smaller, centred."""
    size = preferred.boundedTo(available.size())
    rect = QRect(0, 0, size.width(), size.height())
    rect.moveCenter(available.center())
    return clamp_geometry(rect, available)


def clamp_geometry(rect: QRect, available: QRect) -> QRect:
    """``rect`` made to fit ``available``: no larger, moved in where it hangs out; one that
    already fits is returned as it is."""
    size = rect.size().boundedTo(available.size())
    left = min(max(rect.left(), available.left()), available.right() - size.width() + 1)
    top = min(max(rect.top(), available.top()), available.bottom() - size.height() + 1)
    return QRect(left, top, size.width(), size.height())


def screen_room(window: QWidget) -> QRect:
    """The room a window's client area has on its screen: the available geometry (no
    panels, no docks of the desktop) less the frame the window manager adds (none is
    known before the window shows)."""
    screen = window.screen() or QGuiApplication.primaryScreen()
    frame, client = window.frameGeometry(), window.geometry()
    return screen.availableGeometry().adjusted(
        client.left() - frame.left(),
        client.top() - frame.top(),
        client.right() - frame.right(),
        client.bottom() - frame.bottom(),
    )


def fit_to_screen(window: QWidget) -> None:
    """Pull ``window`` back inside its screen where it hangs out or is larger (a maximized
    or full-screen window is the window manager's)."""
    if window.isMaximized() or window.isFullScreen():
        return
    fitted = clamp_geometry(window.geometry(), screen_room(window))
    if fitted != window.geometry():
        window.setGeometry(fitted)
