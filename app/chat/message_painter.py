"""Drawing one laid-out message row: header, thumbnails, bubble, documents (with the
selection), status line and progress bar, statistics or the writing dots, actions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QPoint, QPointF, QRect, QRectF, Qt
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QColor,
    QImage,
    QPainter,
    QPainterPath,
    QPalette,
    QPen,
    QPixmap,
    QTextCharFormat,
    QTextDocument,
)

from app.chat.data import ImageThumb, MessageAction, MessageId, MessageState
from app.chat.lru import LruCache
from app.chat.message_documents import selection_cursor
from app.chat.message_layout import (
    ACTION_PAD_X,
    BUBBLE_RADIUS,
    THOUGHT_CHEVRON,
    THUMB_SIZE,
    FooterItem,
    MessageLayout,
)
from app.chat.message_rows import Row
from app.chat.theme import ChatColors
from engine import Role

THUMB_CACHE_SIZE = 256


@dataclass(frozen=True)
class ThoughtPaint:
    """A reply's thinking block as it is drawn now."""

    summary: str  # "Thought for 3.2 s · 118 tokens"
    document: QTextDocument | None  # the thinking, while the block is open
    hovered: bool
    focused: bool  # the keyboard's focus is on its header


@dataclass(frozen=True)
class RowPaint:
    """What a row shows beyond its data and geometry, as the view knows it when painting."""

    name: str  # who speaks
    documents: Sequence[tuple[QTextDocument, int, int]]  # with its top and height in the body
    status: tuple[str, str]  # text, colour role
    progress: float | None  # of the prompt read, while a progress bar shows
    stats: str
    footer: Sequence[FooterItem]  # the version switcher and the actions
    hovered: MessageAction | None
    selection: tuple[int, int] | None  # anchor, position
    tick: int  # animation step of the writing dots
    thought: ThoughtPaint | None = None
    focused: MessageAction | None = None  # the action the keyboard is on


class MessagePainter:
    def __init__(self, colors: ChatColors, layout: MessageLayout, palette: QPalette) -> None:
        self.colors = colors
        self._layout = layout
        self._palette = palette
        self._thumbs: LruCache[tuple[MessageId, int], tuple[ImageThumb, QPixmap]] = LruCache(THUMB_CACHE_SIZE)

    def paint_row(self, painter: QPainter, row: Row, origin: QPoint, clip: QRect, paint: RowPaint) -> None:
        geom = row.geom
        assert geom is not None
        data = row.data
        colors = self.colors
        painter.save()
        painter.translate(origin)

        painter.setFont(self._layout.header_font)
        painter.setPen(colors.muted)
        align = Qt.AlignmentFlag.AlignRight if data.role is Role.USER else Qt.AlignmentFlag.AlignLeft
        flags = int(align | Qt.AlignmentFlag.AlignTop | Qt.TextFlag.TextDontClip)
        painter.drawText(geom.header, flags, paint.name)

        for k, rect in enumerate(geom.thumbs):
            self._paint_thumb(painter, (data.id, k), data.images[k], rect)

        if geom.bubble is not None:
            path = QPainterPath()
            bubble = QRectF(geom.bubble).adjusted(0.5, 0.5, -0.5, -0.5)
            path.addRoundedRect(bubble, BUBBLE_RADIUS, BUBBLE_RADIUS)
            painter.fillPath(path, colors.bubble)
            painter.setPen(colors.bubble_border)
            painter.drawPath(path)

        if geom.thought is not None and paint.thought is not None:
            self._paint_thought(painter, geom.thought, geom.thought_body, paint.thought, origin, clip)

        for doc, top, height in paint.documents:
            offset = geom.body.topLeft() + QPoint(0, top)
            visible = QRectF(clip.translated(-origin - offset))
            visible = visible.intersected(QRectF(0, 0, geom.body.width(), height))
            if not visible.isEmpty():
                self._paint_document(painter, doc, offset, visible, paint.selection)

        painter.setFont(self._layout.small_font)
        if geom.status is not None:
            text, role = paint.status
            painter.setPen({"muted": colors.muted, "warning": colors.warning, "error": colors.error}[role])
            painter.drawText(geom.status, int(Qt.TextFlag.TextWordWrap | Qt.AlignmentFlag.AlignLeft), text)
        if geom.progress is not None:
            self._paint_progress(painter, QRectF(geom.progress), paint.progress or 0.0)
        if geom.stats is not None:
            if data.state is MessageState.STREAMING:
                self._paint_streaming_dots(painter, geom.stats, paint.tick)
            else:
                painter.setPen(colors.muted)
                elide = Qt.TextElideMode.ElideRight
                line = self._layout.small_fm.elidedText(paint.stats, elide, geom.width)
                painter.drawText(geom.stats, int(Qt.AlignmentFlag.AlignVCenter), line)

        # Always shown, quietly (muted text, no frame); the one under the mouse lights up,
        # the one the keyboard is on lights up inside an accent ring.
        for item in paint.footer:
            focused = item.action is not None and paint.focused is item.action
            hovered = focused or (item.action is not None and paint.hovered is item.action)
            if hovered:
                painter.setPen(Qt.PenStyle.NoPen)
                painter.setBrush(colors.hover)
                painter.drawRoundedRect(QRectF(item.rect).adjusted(0, 1, 0, -1), 6, 6)
            if focused:
                self._paint_ring(painter, QRectF(item.rect).adjusted(0.5, 1.5, -0.5, -1.5), 6)
            painter.setPen(colors.text if hovered else colors.faint if item.dim else colors.muted)
            painter.drawText(item.rect, int(Qt.AlignmentFlag.AlignCenter), item.text)
        painter.restore()

    def _paint_thought(
        self,
        painter: QPainter,
        header: QRect,
        body: QRect | None,
        thought: ThoughtPaint,
        origin: QPoint,
        clip: QRect,
    ) -> None:
        """The header as the actions are drawn (muted, lit under the mouse), a chevron that
        points down while open; the open thinking in muted text right of a thin rule, as a
        quotation reads: it is the model's, but not its answer."""
        colors = self.colors
        painter.save()
        painter.setFont(self._layout.small_font)
        if thought.hovered or thought.focused:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(colors.hover)
            painter.drawRoundedRect(QRectF(header).adjusted(0, 1, 0, -1), 6, 6)
        if thought.focused:
            self._paint_ring(painter, QRectF(header).adjusted(0.5, 1.5, -0.5, -1.5), 6)
        pen = colors.text if thought.hovered else colors.muted
        x = header.x() + ACTION_PAD_X
        cy = header.center().y() + 0.5
        chevron = QPainterPath()
        if body is not None:  # open: pointing down
            chevron.moveTo(x + 1, cy - 2)
            chevron.lineTo(x + 9, cy - 2)
            chevron.lineTo(x + 5, cy + 3)
        else:
            chevron.moveTo(x + 3, cy - 4)
            chevron.lineTo(x + 8, cy)
            chevron.lineTo(x + 3, cy + 4)
        chevron.closeSubpath()
        painter.fillPath(chevron, pen)
        painter.setPen(pen)
        text_rect = header.adjusted(ACTION_PAD_X + THOUGHT_CHEVRON, 0, 0, 0)
        align = Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft
        painter.drawText(text_rect, int(align), thought.summary)
        painter.restore()
        if body is None or thought.document is None:
            return
        painter.save()
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(colors.track)
        painter.drawRoundedRect(QRectF(2, body.y(), 2, body.height()), 1, 1)
        painter.restore()
        offset = body.topLeft()
        visible = QRectF(clip.translated(-origin - offset))
        visible = visible.intersected(QRectF(0, 0, body.width(), body.height()))
        if not visible.isEmpty():
            self._paint_document(painter, thought.document, offset, visible, None, colors.muted)

    def _paint_ring(self, painter: QPainter, rect: QRectF, radius: float) -> None:
        painter.save()
        pen = QPen(self.colors.accent)
        pen.setWidthF(1.5)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(rect, radius, radius)
        painter.restore()

    def paint_focus_ring(self, painter: QPainter, rect: QRect) -> None:
        """The view has the keyboard: a thin accent ring just inside its edge."""
        painter.save()
        pen = QPen(self.colors.accent)
        pen.setWidthF(2.0)
        painter.setPen(pen)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(QRectF(rect).adjusted(1, 1, -1, -1), 4, 4)
        painter.restore()

    def _paint_document(
        self,
        painter: QPainter,
        doc: QTextDocument,
        offset: QPoint,
        visible: QRectF,
        selection: tuple[int, int] | None,
        color: QColor | None = None,
    ) -> None:
        painter.save()
        painter.translate(offset)
        ctx = QAbstractTextDocumentLayout.PaintContext()
        palette = QPalette(self._palette)
        palette.setColor(QPalette.ColorRole.Text, color or self.colors.text)
        ctx.palette = palette
        ctx.clip = visible
        if selection is not None:
            selected = QAbstractTextDocumentLayout.Selection()
            selected.cursor = selection_cursor(doc, *selection)
            fmt = QTextCharFormat()
            fmt.setBackground(self._palette.brush(QPalette.ColorRole.Highlight))
            fmt.setForeground(self._palette.brush(QPalette.ColorRole.HighlightedText))
            selected.format = fmt
            ctx.selections = [selected]
        painter.setClipRect(ctx.clip)
        doc.documentLayout().draw(painter, ctx)
        painter.restore()

    def _paint_progress(self, painter: QPainter, track: QRectF, fraction: float) -> None:
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(self.colors.track)
        painter.drawRoundedRect(track, 1.5, 1.5)
        if fraction > 0:
            painter.setBrush(self.colors.accent)
            done = QRectF(track.x(), track.y(), track.width() * fraction, track.height())
            painter.drawRoundedRect(done, 1.5, 1.5)

    def _paint_streaming_dots(self, painter: QPainter, rect: QRect, tick: int) -> None:
        """Three dots, one brighter in turn: "still writing", without a spinner's noise."""
        radius = 2.5
        cy = rect.center().y() + 0.5
        painter.setPen(Qt.PenStyle.NoPen)
        for k in range(3):
            painter.setBrush(self.colors.accent if k == tick % 3 else self.colors.track)
            painter.drawEllipse(QPointF(rect.x() + radius + 1 + k * 10, cy), radius, radius)

    def _paint_thumb(
        self, painter: QPainter, key: tuple[MessageId, int], thumb: ImageThumb, rect: QRect
    ) -> None:
        pixmap = self._thumb_pixmap(key, thumb, painter.device().devicePixelRatioF())
        path = QPainterPath()
        path.addRoundedRect(QRectF(rect), 10, 10)
        painter.save()
        painter.setClipPath(path)
        if pixmap is None or pixmap.isNull():
            painter.fillRect(rect, self.colors.track)
            painter.setPen(self.colors.muted)
            painter.drawText(rect, int(Qt.AlignmentFlag.AlignCenter), "image")
        else:
            painter.drawPixmap(rect, pixmap)
        painter.restore()
        painter.setPen(self.colors.bubble_border)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(path)

    def _thumb_pixmap(self, key: tuple[MessageId, int], thumb: ImageThumb, ratio: float) -> QPixmap | None:
        cached = self._thumbs.get(key)
        # Keyed by position; the ImageThumb itself says whether the image is still the one
        # decoded (update_message may bring new images under the same id).
        if cached is not None and cached[0] is thumb:
            return cached[1]
        image = thumb.data if isinstance(thumb.data, QImage) else QImage.fromData(thumb.data)
        if image.isNull():
            return None
        pixmap = square_thumbnail(image, THUMB_SIZE, ratio)
        self._thumbs.put(key, (thumb, pixmap))
        return pixmap


def square_thumbnail(image: QImage, size: int, device_pixel_ratio: float = 1.0) -> QPixmap:
    """The image scaled to cover a ``size`` square and centre-cropped (crisp on HiDPI)."""
    pixels = max(1, round(size * device_pixel_ratio))
    scaled = image.scaled(
        pixels,
        pixels,
        Qt.AspectRatioMode.KeepAspectRatioByExpanding,
        Qt.TransformationMode.SmoothTransformation,
    )
    x = (scaled.width() - pixels) // 2
    y = (scaled.height() - pixels) // 2
    pixmap = QPixmap.fromImage(scaled.copy(x, y, pixels, pixels))
    pixmap.setDevicePixelRatio(device_pixel_ratio)
    return pixmap
