"""A conversation's row in the side list: how it is drawn (the title, then when it was
last used or what it is doing now), renaming it in place, and "5 min ago"."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from PySide6.QtCore import (
    QAbstractItemModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QRect,
    QRectF,
    QSize,
    Qt,
)
from PySide6.QtGui import QFont, QFontMetrics, QPainter, QPalette
from PySide6.QtWidgets import (
    QLineEdit,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from app.chat.data import ConversationId, ConversationSummary
from app.chat.theme import ChatColors, mix

__all__ = ["ID_ROLE", "SUMMARY_ROLE", "ConversationDelegate", "RowOwner", "relative_time"]

ID_ROLE = Qt.ItemDataRole.UserRole
SUMMARY_ROLE = Qt.ItemDataRole.UserRole + 1
ROW_PAD_X = 10
ROW_PAD_Y = 7


def relative_time(when: datetime, now: datetime | None = None) -> str:
    """``just now``, ``5 min ago``, ``3 h ago``, ``yesterday``, ``Monday``, ``12 Mar``,
    ``12 Mar 2023``: precise when recent, a date when not."""
    now = now or datetime.now(when.tzinfo)
    delta = now - when
    if delta < timedelta(minutes=1):
        return "just now"
    if delta < timedelta(hours=1):
        return f"{int(delta.total_seconds() // 60)} min ago"
    if when.date() == now.date():
        return f"{int(delta.total_seconds() // 3600)} h ago"
    if when.date() == (now - timedelta(days=1)).date():
        return "yesterday"
    if delta < timedelta(days=7):
        return when.strftime("%A")
    if when.year == now.year:
        return f"{when.day} {when.strftime('%b')}"
    return f"{when.day} {when.strftime('%b')} {when.year}"


class RowOwner(Protocol):
    """What a row asks of the list it is in."""

    def busy_text(self, conversation_id: ConversationId) -> str | None: ...
    def now(self) -> datetime: ...
    def search_text(self) -> str: ...
    def rename(self, conversation_id: ConversationId, title: str) -> None: ...


class ConversationDelegate(QStyledItemDelegate):
    """Two lines per conversation: the title, then when it was last used, or what it is
    doing right now (a dot and "reading 42%")."""

    def __init__(self, owner: RowOwner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._owner = owner

    def _fonts(self, option: QStyleOptionViewItem) -> tuple[QFont, QFont]:
        title = QFont(option.font)
        small = QFont(option.font)
        small.setPointSizeF(max(7.0, option.font.pointSizeF() * 0.86))
        return title, small

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        title, small = self._fonts(option)
        height = QFontMetrics(title).height() + QFontMetrics(small).height() + 2 * ROW_PAD_Y + 2
        return QSize(160, height)

    def paint(
        self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        summary: ConversationSummary = index.data(SUMMARY_ROLE)
        if summary is None:
            return
        colors = ChatColors.from_palette(option.palette)
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        hovered = bool(option.state & QStyle.StateFlag.State_MouseOver)
        rect = QRect(option.rect).adjusted(6, 1, -6, -1)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if selected or hovered:
            base = option.palette.color(QPalette.ColorRole.Base)
            accent = option.palette.color(QPalette.ColorRole.Highlight)
            fill = mix(base, accent, 0.28 if colors.dark else 0.16) if selected else colors.hover
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(fill)
            painter.drawRoundedRect(QRectF(rect), 8, 8)
        title_font, small_font = self._fonts(option)
        if selected:
            title_font.setWeight(QFont.Weight.DemiBold)
        inner = rect.adjusted(ROW_PAD_X, ROW_PAD_Y, -ROW_PAD_X, -ROW_PAD_Y)
        title_fm = QFontMetrics(title_font)
        painter.setFont(title_font)
        painter.setPen(colors.text)
        title_rect = QRect(inner.x(), inner.y(), inner.width(), title_fm.height())
        painter.drawText(
            title_rect,
            int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
            title_fm.elidedText(summary.title or "New chat", Qt.TextElideMode.ElideRight, inner.width()),
        )
        small_fm = QFontMetrics(small_font)
        painter.setFont(small_font)
        line = QRect(inner.x(), title_rect.bottom() + 3, inner.width(), small_fm.height())
        busy = self._owner.busy_text(summary.id)
        if busy is not None:
            radius = 3.0
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(colors.accent)
            painter.drawEllipse(QRectF(line.x(), line.center().y() - radius + 1, 2 * radius, 2 * radius))
            painter.setPen(colors.accent)
            text_rect = line.adjusted(int(2 * radius + 6), 0, 0, 0)
            text = small_fm.elidedText(busy or "generating…", Qt.TextElideMode.ElideRight, text_rect.width())
            painter.drawText(text_rect, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), text)
        else:
            painter.setPen(colors.muted)
            text = relative_time(summary.updated_at, self._owner.now())
            if summary.preview and self._owner.search_text():
                text = f"{text} · {summary.preview}"
            text = small_fm.elidedText(text, Qt.TextElideMode.ElideRight, line.width())
            painter.drawText(line, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), text)
        painter.restore()

    def createEditor(
        self, parent: QWidget, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> QWidget:
        editor = QLineEdit(parent)
        editor.setFrame(True)
        return editor

    def setEditorData(self, editor: QWidget, index: QModelIndex | QPersistentModelIndex) -> None:
        assert isinstance(editor, QLineEdit)
        summary: ConversationSummary = index.data(SUMMARY_ROLE)
        editor.setText(summary.title)
        editor.selectAll()

    def setModelData(
        self, editor: QWidget, model: QAbstractItemModel, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        assert isinstance(editor, QLineEdit)
        summary: ConversationSummary = index.data(SUMMARY_ROLE)
        self._owner.rename(summary.id, editor.text())

    def updateEditorGeometry(
        self, editor: QWidget, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        rect = QRect(option.rect).adjusted(8, 4, -8, -4)
        editor.setGeometry(rect.x(), rect.y(), rect.width(), min(rect.height(), editor.sizeHint().height()))
