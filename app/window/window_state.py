"""What the window remembers between runs in ``window.ini`` (Qt's own format, beside the
database): its geometry and docks, the Chats and Models pages' splits, and the page shown."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings
from PySide6.QtWidgets import QMainWindow, QSplitter

from app.widgets.nav_rail import Page
from app.window.geometry import PREFERRED_SIZE, first_geometry, screen_room


class WindowState:
    """``pages`` (to restore and save): the splitters whose state is kept, by key."""

    def __init__(self, data_dir: Path) -> None:
        self._file = str(data_dir / "window.ini")

    def _settings(self) -> QSettings:
        return QSettings(self._file, QSettings.Format.IniFormat)

    def restore(self, window: QMainWindow, pages: dict[str, QSplitter]) -> None:
        """The saved geometry (else the first one, centred), docks and splits."""
        settings = self._settings()
        saved = settings.value("geometry")
        if not (isinstance(saved, QByteArray) and window.restoreGeometry(saved)):
            window.setGeometry(first_geometry(PREFERRED_SIZE, screen_room(window)))
        restores = {"state": window.restoreState, **{key: page.restoreState for key, page in pages.items()}}
        for key, restore in restores.items():
            value = settings.value(key)
            if isinstance(value, QByteArray):
                restore(value)

    def saved_page(self) -> Page:
        page = self._settings().value("page")
        return Page(page) if page in {p.value for p in Page} else Page.CHATS

    def save(self, window: QMainWindow, pages: dict[str, QSplitter], page: Page) -> None:
        settings = self._settings()
        settings.setValue("geometry", window.saveGeometry())
        settings.setValue("state", window.saveState())
        for key, splitter in pages.items():
            settings.setValue(key, splitter.saveState())
        settings.setValue("page", page.value)
