"""Item text with a small rounded tag at its right end ("base model"), for list rows."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

BADGE_ROLE = Qt.ItemDataRole.UserRole + 10
"""The tag's text on an item; no tag when unset."""

BADGE_BACKGROUND = QColor("#f6e3b4")
BADGE_TEXT = QColor("#6b4a00")
_PAD = 6  # inside the tag, left and right
_GAP = 6  # between the text and the tag, and after the tag
# Text narrower than this beside the tag is unreadable: the tag shortens to its first word,
# and goes when even that leaves too little (the item's tooltip still says it).
MIN_TEXT_WIDTH = 120

Index = QModelIndex | QPersistentModelIndex


class BadgeDelegate(QStyledItemDelegate):
    """Draws the item as usual in what is left of its cell, then the tag.

    The item's text keeps the view's elide mode, so a long name gives way to the tag.
    """

    def _badge_width(self, option: QStyleOptionViewItem, badge: str) -> int:
        return option.fontMetrics.horizontalAdvance(badge) + 2 * _PAD

    def fitted_badge(self, option: QStyleOptionViewItem, badge: str) -> str:
        """The tag as it fits a cell ``option.rect`` wide: whole, its first word, or ""."""
        for text in (badge, badge.split(" ", 1)[0]):
            if option.rect.width() - self._badge_width(option, text) - 2 * _GAP >= MIN_TEXT_WIDTH:
                return text
        return ""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        badge = self.fitted_badge(option, index.data(BADGE_ROLE) or "")
        if not badge:
            super().paint(painter, option, index)
            return
        width = self._badge_width(option, badge)
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        style = opt.widget.style() if opt.widget is not None else None
        if style is None:
            super().paint(painter, option, index)
            return
        # The selection background spans the whole cell, under the tag too.
        style.drawPrimitive(QStyle.PrimitiveElement.PE_PanelItemViewItem, opt, painter, opt.widget)
        text_opt = QStyleOptionViewItem(opt)
        text_opt.rect = opt.rect.adjusted(0, 0, -(width + 2 * _GAP), 0)
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, text_opt, painter, opt.widget)
        height = option.fontMetrics.height()
        rect = QRectF(
            opt.rect.right() - _GAP - width, opt.rect.center().y() - height / 2 + 0.5, width, height
        )
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(BADGE_BACKGROUND)
        painter.drawRoundedRect(rect, height / 2, height / 2)
        painter.setPen(BADGE_TEXT)
        painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, badge)
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:
        hint = super().sizeHint(option, index)
        badge = index.data(BADGE_ROLE)
        if badge:
            hint.setWidth(hint.width() + self._badge_width(option, badge) + 2 * _GAP)
        return hint
