"""Where the main window opens: its preferred size, at most the screen's available room,
centred there; a saved geometry from a larger screen (or a screen gone) pulled back inside."""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize

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


def frame_margins(frame: QRect, client: QRect) -> QSize:
    """What the window manager's frame adds around the client area (none before it shows)."""
    return QSize(max(0, frame.width() - client.width()), max(0, frame.height() - client.height()))
