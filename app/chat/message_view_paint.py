"""Painting the message view: the rows in the damaged area, each with what it shows
now (hover, focus, selection, the writing dots), and the focus ring
(``MessageViewPaint``, a part of ``MessageView``; drawing a row is ``message_painter``)."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QPainter, QPaintEvent

from app.chat.data import MessageAction, MessageId
from app.chat.focus_stops import THOUGHT, FocusStop, author
from app.chat.message_documents import MessageDocuments
from app.chat.message_hits import Selection
from app.chat.message_layout import FooterItem, MessageLayout
from app.chat.message_painter import MessagePainter, RowPaint, ThoughtPaint
from app.chat.message_rows import MessageRows
from app.chat.viewport_layout import ViewportLayout
from engine import Role

__all__ = ["MessageViewPaint"]


class MessageViewPaint:
    """Mixed into ``MessageView``: reads the rows and the hover, selection and focus state
    the mouse and keyboard parts keep."""

    _rows: MessageRows
    _scroll: ViewportLayout
    _layout: MessageLayout
    _painter: MessagePainter
    _documents: MessageDocuments
    _placeholder: str
    _rows_moved: bool
    _selection: Selection | None
    _hover_action: tuple[int, MessageAction] | None
    _hover_thought: int
    _focus: FocusStop | None
    _ring: bool
    _tick: int

    def _footer(self, i: int) -> list[FooterItem]:
        row = self._rows[i]
        if row.geom is None:
            return []
        return self._layout.footer_items(
            row.geom, self._rows.actions(i), row.data.role is Role.USER, MessageRows.version_text(row)
        )

    def paintEvent(self, event: QPaintEvent) -> None:
        self._rows_moved = False
        self._paint(event)

    def _paint(self, event: QPaintEvent) -> None:
        painter = QPainter(self.viewport())
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if not self._rows:
            painter.setPen(self._painter.colors.muted)
            painter.drawText(self.viewport().rect(), Qt.AlignmentFlag.AlignCenter, self._placeholder)
            self._paint_focus_ring(painter)
            return
        value = self.verticalScrollBar().value()
        clip = event.rect()
        first = self._rows.row_at_y(value + clip.top())
        last = self._rows.row_at_y(value + clip.bottom())
        x0 = self._column_x()
        width = self._column_width()
        late = False
        for i in range(first, last + 1):
            row = self._rows[i]
            if not row.is_exact(width):
                # Not measured yet (only when a paint beats the layout): draw at the
                # estimated place now, settled on the next turn.
                self._measure(row, keep=True)
                late = True
            origin = QPoint(x0, self._rows.top(i) - value)
            self._painter.paint_row(painter, row, origin, clip, self._row_paint(i))
        self._paint_focus_ring(painter)
        painter.end()
        if late:
            self._scroll.settle_later()

    def _paint_focus_ring(self, painter: QPainter) -> None:
        """The keyboard came to the view: a ring round its edge, as a text box shows it
        (while it shows, the view is not scrolled by moving pixels, which would move it)."""
        if self._ring and self.hasFocus():
            self._painter.paint_focus_ring(painter, self.viewport().rect())

    def _row_paint(self, i: int) -> RowPaint:
        row = self._rows[i]
        data = row.data
        progress = self._rows.progress.get(data.id)
        sel = self._selection
        hover = self._hover_action
        return RowPaint(
            name=author(data),
            documents=self._body_documents(row),
            status=self._rows.status(row),
            progress=None if progress is None else progress.fraction,
            stats=MessageRows.stats_line(row),
            footer=self._footer(i),
            hovered=hover[1] if hover is not None and hover[0] == i else None,
            focused=self._focused_action(data.id),
            selection=(sel.anchor, sel.position) if sel and sel.row_id == data.id and not sel.empty else None,
            tick=self._tick,
            thought=self._thought_paint(i),
        )

    def _focused_action(self, message_id: MessageId) -> MessageAction | None:
        focus = self._focus
        if focus is None or focus[0] != message_id or not self.hasFocus():
            return None
        return focus[1] if isinstance(focus[1], MessageAction) else None

    def _thought_paint(self, i: int) -> ThoughtPaint | None:
        data = self._rows[i].data
        if data.thought is None:
            return None
        return ThoughtPaint(
            summary=data.thought.summary(),
            document=self._documents.thought(data) if self.thought_open(data.id) else None,
            hovered=self._hover_thought == i,
            focused=self._focus == (data.id, THOUGHT) and self.hasFocus(),
        )
