"""An excerpt a reply cites, opened in Hearth: its file, page and heading, its text, and the
file itself one click away."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.chat.data import Source

DIALOG_SIZE = (620, 460)


def file_url(source: Source) -> QUrl:
    """The file to open. Opened at its page nowhere: the desktop's handler for a
    ``file:`` URL (xdg-open, Launch Services, ShellExecute) drops a ``#page=`` fragment or
    fails on it, and no viewer's own flag is portable; the dialog says the page instead."""
    return QUrl.fromLocalFile(str(Path(source.path)))


def where_text(source: Source) -> str:
    """``Page 3 · Setup › Linux`` (what is known of where the excerpt is)."""
    parts = []
    if source.page is not None:
        if source.last_page is not None and source.last_page != source.page:
            parts.append(f"Pages {source.page}–{source.last_page}")
        else:
            parts.append(f"Page {source.page}")
    if source.heading:
        parts.append(source.heading)
    return " · ".join(parts)


class ExcerptDialog(QDialog):
    """One source of a reply: ``[n] file``, where in it, the excerpt, and Open file."""

    def __init__(self, source: Source, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.source = source
        self.setObjectName("excerptDialog")
        self.setWindowTitle(f"[{source.n}] {source.name}")
        self.title = QLabel(f"[{source.n}] {source.name}")
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        font = self.title.font()
        font.setBold(True)
        self.title.setFont(font)
        self.path_label = QLabel(source.path)
        self.path_label.setTextFormat(Qt.TextFormat.PlainText)
        self.path_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.path_label.setWordWrap(True)
        self.where = QLabel(where_text(source))
        self.where.setTextFormat(Qt.TextFormat.PlainText)
        self.where.setVisible(bool(self.where.text()))
        self.text = QPlainTextEdit(source.text)
        self.text.setReadOnly(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        self.open_button = QPushButton("Open file")
        self.open_button.setToolTip(f"Open {source.path} in its own application")
        self.open_button.setEnabled(Path(source.path).is_file())
        self.open_button.clicked.connect(self.open_file)
        buttons.addButton(self.open_button, QDialogButtonBox.ButtonRole.ActionRole)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.path_label)
        layout.addWidget(self.where)
        layout.addWidget(self.text, 1)
        layout.addWidget(buttons)
        self.resize(*DIALOG_SIZE)

    def file_url(self) -> QUrl:
        return file_url(self.source)

    def open_file(self) -> bool:
        return QDesktopServices.openUrl(self.file_url())
