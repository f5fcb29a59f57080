"""The messages of one conversation: Markdown replies, the user's bubbles, live progress,
reply statistics and per-message actions.

``MessageView`` paints rows itself (a QAbstractScrollArea, no widget per message), so long
conversations stay smooth. The widget holds the events and the glue; the parts are:

- ``message_rows``: the rows, where each starts, what each says and offers;
- ``message_layout``: a row's height estimate and exact geometry;
- ``viewport_layout``: which rows are laid out when, and where the scrollbar stays;
- ``message_documents``: Markdown rendered once per text, documents for recent rows;
- ``streaming_render``: a streaming reply in pieces (an open code block too), only its
  growing tail re-rendered;
- ``message_painter`` and ``message_hits``: drawing a row, and what is under the mouse;
- ``message_view_paint``, ``message_view_mouse``, ``message_view_keys`` and
  ``message_view_actions``: the view's painting, mouse, keyboard and actions, mixed into
  the class here, which holds the content, the scrolling and the layout of rows.

Every message shows its actions (Copy, Edit or Regenerate, Delete) and, when it has
versions, a ``‹ 2/3 ›`` switcher, without hovering; a reply is headed by the model that
wrote it (``MessageData.author``). Deleting offers Undo in a bar under the messages. The
keyboard reaches every action: Tab/Shift+Tab (or Left/Right) walk them, each drawn in a
focus ring, Enter or Space acts (``focusNextPrevChild``).

Streamed text comes already throttled by the engine (~30 deltas a second); the deltas
that arrive before the next event-loop turn are laid out together then (later only after
a slow layout: see ``ViewportLayout.settle_later``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import replace

from PySide6.QtCore import QEvent, QRect, QSize, Qt, QTimer, Signal
from PySide6.QtGui import (
    QPalette,
    QResizeEvent,
    QTextDocument,
)
from PySide6.QtWidgets import QAbstractScrollArea, QFrame, QWidget

from app.chat.data import MessageAction, MessageData, MessageId, MessageState, QueueWait, ReplyStats, Thought
from app.chat.focus_stops import (
    FocusStop,
)
from app.chat.markdown import MarkdownStyle
from app.chat.message_documents import MessageDocuments
from app.chat.message_hits import Hit, Selection
from app.chat.message_layout import VERSION_ARROWS, Geometry, MessageLayout, column_x
from app.chat.message_painter import MessagePainter
from app.chat.message_rows import MessageRows, PrefillProgress, Row, with_state
from app.chat.message_view_actions import MessageViewActions
from app.chat.message_view_keys import MessageViewKeyboard
from app.chat.message_view_mouse import MessageViewMouse
from app.chat.message_view_paint import MessageViewPaint
from app.chat.repaint_region import changed_region
from app.chat.theme import ChatColors, markdown_style
from app.chat.undo_bar import UndoBar
from app.chat.viewport_layout import ViewportLayout
from engine import Role

__all__ = ["MessageView"]


INDICATOR_INTERVAL_MS = 280
# The writing dots hold still while text arrives (the text moving says enough, and on two
# cores each repaint is taken from decode); they step again once it pauses this long.
DOTS_REST_WHILE_TEXT_S = 2 * INDICATOR_INTERVAL_MS / 1000


class MessageView(
    MessageViewActions, MessageViewMouse, MessageViewKeyboard, MessageViewPaint, QAbstractScrollArea
):
    """All messages of one conversation, newest at the bottom.

    Feed it ``MessageData`` values: ``set_messages`` for a whole conversation, then
    ``append_message``/``update_message``, and for a reply being generated
    ``set_queued``/``set_prefill`` -> ``append_delta`` ... -> ``set_state`` (or
    ``update_message`` with the final text, state and stats).
    """

    edit_requested = Signal(object)  # message id (a user message)
    regenerate_requested = Signal(object)  # message id (a reply)
    continue_requested = Signal(object)  # message id (an interrupted or cut-off reply)
    delete_requested = Signal(object)  # message id
    version_requested = Signal(object, int)  # message id, -1 (the previous version) or +1
    copied = Signal(str)  # text put on the clipboard (a message, a selection or a code block)
    link_activated = Signal(str)  # a link in a reply was clicked (http(s) links also open)
    image_activated = Signal(object, int)  # message id, image index
    more_parallel_requested = Signal(object)  # message id (a reply waiting for a slot)
    source_activated = Signal(object, int)  # message id, n: its excerpt n was opened

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.viewport().setMouseTracking(True)
        self.viewport().setAutoFillBackground(True)
        self.viewport().setBackgroundRole(QPalette.ColorRole.Base)
        self.verticalScrollBar().setSingleStep(24)

        self._rows = MessageRows()
        self._placeholder = "No messages yet"

        self._hover_row = -1
        self._hover_action: tuple[int, MessageAction] | None = None
        self._pressed: Hit | None = None
        self._selection: Selection | None = None
        self._selecting = False
        self._tick = 0
        self._text_arrived_at = -math.inf  # time.monotonic() of the last streamed text
        self._rows_moved = False  # a layout since the last paint moved rows relative to others
        # Thinking blocks the user opened or closed; the rest are open only while thinking.
        self._thought_open: dict[MessageId, bool] = {}
        self._hover_thought = -1  # the row whose thinking header is under the mouse
        self._focus: FocusStop | None = None  # what Tab moved to (see focusNextPrevChild)
        # The focus ring shows when the keyboard brought the focus (Tab, a shortcut) or is
        # used in the view, not after a click: what the mouse points at says enough then.
        self._ring = False
        self.setAccessibleName("Messages")

        self._documents = MessageDocuments(
            self, self._style(), self._layout.body_font, self._layout.small_font
        )
        self.render_counts = self._documents.render_counts  # Markdown renders per message

        self._scroll = ViewportLayout(
            self._rows, self.verticalScrollBar(), self.viewport(), self._measure, self._apply_pending
        )
        self._indicator_timer = QTimer(self)
        self._indicator_timer.setInterval(INDICATOR_INTERVAL_MS)
        self._indicator_timer.timeout.connect(self._animate_indicator)

        # Under the messages, in a viewport margin while it shows: it covers none of them.
        self.undo_bar = UndoBar(self)
        self.undo_bar.visibility_changed.connect(self._place_undo_bar)

    # -- public: content -----------------------------------------------------------

    def set_messages(self, messages: Iterable[MessageData]) -> None:
        """Show a conversation (replacing what was shown) scrolled to its end."""
        self._documents.end_streams()
        self._rows.reset(Row(m, self._estimate(m)) for m in messages)
        self._documents.keep_only(self._rows.ids())
        self._selection = None
        self._hover_row = -1
        self._scroll.follow = True
        self._scroll.settle()
        self._update_indicator_timer()

    def append_message(self, message: MessageData) -> None:
        if self._rows.find(message.id) is not None:
            self.update_message(message)
            return
        self._rows.append(Row(message, self._estimate(message)))
        if message.role is Role.USER:
            self._scroll.follow = True  # the user just sent it: show it and the reply below
        self._scroll.settle()
        self._update_indicator_timer()

    def update_message(self, message: MessageData) -> None:
        """Replace a message by id (text, state, stats, error, images)."""
        i = self._rows.find(message.id)
        if i is None:
            self.append_message(message)
            return
        self._rows.update(self._rows[i], message)
        self._documents.end_stream(message.id)
        self._scroll.settle()
        self._update_indicator_timer()

    def remove_message(self, message_id: MessageId) -> None:
        i = self._rows.find(message_id)
        if i is not None:
            self._replace(i, i + 1, ())

    def replace_from(self, index: int, messages: Iterable[MessageData]) -> None:
        """Show ``messages`` in place of the rows from ``index`` on (the conversation took
        another version there, or lost a message): the rows above keep their layout and
        the scroll position stays, so what the user is looking at does not jump."""
        self._replace(index, None, messages)

    def _replace(self, start: int, end: int | None, messages: Iterable[MessageData]) -> None:
        focus = self._focus
        focus_at = None if focus is None else self._rows.find(focus[0])
        gone = self._rows.truncate(start, end)
        for message in messages:
            self._rows.append(Row(message, self._estimate(message)))
        live = self._rows.ids()
        for row in gone:
            if row.data.id not in live:
                self._documents.forget(row.data.id)
        if self._selection is not None and self._selection.row_id not in live:
            self._selection = None
        self._hover_row = -1
        self._hover_action = None
        self._scroll.settle()
        self._update_indicator_timer()
        if focus is not None and focus[0] not in live:
            if focus_at is not None and focus[1] in VERSION_ARROWS:
                self._keep_focus_after_replace(focus_at, focus[1])
            else:
                self._focus_on(None)

    def clear(self) -> None:
        self.set_messages(())

    def update_thought(self, message_id: MessageId, thought: Thought) -> None:
        """A reply's thinking as it now stands (the whole of it, not a delta), laid out
        with the streamed text on the next event-loop turn. The block is open while the
        thought is ``active`` and folds when it ends, unless the user chose otherwise."""
        row = self._rows.get(message_id)
        if row is None or row.message.thought == thought:
            return
        if self._rows.set_thought(row, thought):
            self._update_indicator_timer()
        self._scroll.settle_later()

    def thought_open(self, message_id: MessageId) -> bool:
        """Whether the reply's thinking block shows its text (False: folded, or none)."""
        row = self._rows.get(message_id)
        thought = None if row is None else row.message.thought
        if thought is None:
            return False
        return self._thought_open.get(message_id, thought.active)

    def thought_summary(self, message_id: MessageId) -> str:
        """The thinking block's header ("" without one)."""
        row = self._rows.get(message_id)
        thought = None if row is None else row.message.thought
        return "" if thought is None else thought.summary()

    def toggle_thought(self, message_id: MessageId) -> None:
        """Open a folded thinking block or fold an open one (a click on its header, or
        Enter/Space once Tab reached it); the choice holds when the thinking ends."""
        i = self._rows.find(message_id)
        if i is None or self._rows[i].message.thought is None:
            return
        self._apply_pending()
        self._thought_open[message_id] = not self.thought_open(message_id)
        self._rows.invalidate(self._rows[i])
        self._scroll.settle()
        self.viewport().update()

    def append_delta(self, message_id: MessageId, text: str) -> None:
        """Add streamed text to a reply (the first delta also moves it from PENDING to
        STREAMING). It is laid out on the next event-loop turn (later only after a slow
        layout), once however many deltas come before."""
        row = self._rows.get(message_id)
        if row is None or not text:
            return
        self._text_arrived_at = time.monotonic()
        if self._rows.append_text(row, text):
            self._update_indicator_timer()
        self._scroll.settle_later()

    def set_queued(self, message_id: MessageId, wait: QueueWait | None) -> None:
        """A pending reply waits for a slot: the line under it says why (``wait``; None:
        not known yet), with "More parallel conversations…" once the reason is known."""
        row = self._rows.get(message_id)
        if row is None or row.data.state is not MessageState.PENDING or row.data.waiting == wait:
            return
        row.data = replace(row.data, waiting=wait)
        self._status_changed(message_id)

    def set_prefill(
        self,
        message_id: MessageId,
        done: int,
        total: int,
        cached: int,
        images_done: int = 0,
        images_total: int = 0,
    ) -> None:
        """Prompt progress under a pending reply: "reading 1,200 / 3,400 tokens, 2,100 from cache"."""
        if self._rows.find(message_id) is None:
            return
        self._rows.progress[message_id] = PrefillProgress(done, total, cached, images_done, images_total)
        self._status_changed(message_id)

    def set_state(
        self,
        message_id: MessageId,
        state: MessageState,
        *,
        stats: ReplyStats | None = None,
        error: str = "",
        text: str | None = None,
        thought: Thought | None = None,
    ) -> None:
        """End (or restart) a reply: DONE with stats, CANCELLED, FAILED with the human error."""
        data = self.message(message_id)
        if data is not None:
            self.update_message(with_state(data, state, stats, error, text, thought))

    def message(self, message_id: MessageId) -> MessageData | None:
        """The message as shown, streamed text included."""
        row = self._rows.get(message_id)
        return None if row is None else row.message

    def messages(self) -> tuple[MessageData, ...]:
        return tuple(row.message for row in self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def set_placeholder(self, text: str) -> None:
        """What an empty conversation shows."""
        self._placeholder = text
        self.viewport().update()

    # -- public: scrolling ----------------------------------------------------------

    def scroll_to_bottom(self) -> None:
        self._scroll.follow = True
        self._scroll.settle()

    def scroll_to_message(self, message_id: MessageId) -> None:
        i = self._rows.find(message_id)
        if i is None:
            return
        self._scroll.follow = False
        self._scroll.set_scroll(self._rows.top(i))
        self._scroll.measure_visible()

    def message_rect(self, message_id: MessageId) -> QRect:
        """Where a message is drawn, in viewport coordinates (empty when unknown)."""
        i = self._rows.find(message_id)
        if i is None:
            return QRect()
        top = self._rows.top(i) - self.verticalScrollBar().value()
        return QRect(self._column_x(), top, self._column_width(), self._rows[i].height)

    def is_at_bottom(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() >= bar.maximum() - 2

    def measured_rows(self) -> int:
        """How many rows have exact heights for the current width (the rest are estimates)."""
        return self._scroll.measured()

    # -- style and documents --------------------------------------------------------

    def _style(self) -> MarkdownStyle:
        """Fonts and colours from the current font and palette: a new layout and painter
        (the painter's thumbnails go with the old one); the Markdown style to match."""
        palette = self.palette()
        self._layout = MessageLayout(self.font())
        self._painter = MessagePainter(ChatColors.from_palette(palette), self._layout, palette)
        return markdown_style(palette)

    def _restyle(self) -> None:
        self._documents.restyle(self._style(), self._layout.body_font, self._layout.small_font)
        for row in self._rows:
            self._rows.invalidate(row)

    def _apply_pending(self) -> None:
        for row in self._rows.apply_pending():
            if row.data.role is not Role.USER:
                self._documents.start_stream(row.data.id)

    def _document(self, row: Row) -> QTextDocument:
        """The row's whole document, laid out at the width its geometry says."""
        return self._documents.document(row.data, row.geom.body.width() if row.geom is not None else None)

    def _body_documents(self, row: Row) -> list[tuple[QTextDocument, int, int]]:
        """(document, top, height) of each piece of the row's body, top to bottom."""
        geom = row.geom
        if geom is None:
            return []
        documents = self._documents.body(row.data, geom.body.width())
        return [(doc, top, height) for doc, (top, height) in zip(documents, geom.pieces, strict=False)]

    # -- geometry -------------------------------------------------------------------

    def _column_width(self) -> int:
        return self._scroll.width()

    def _column_x(self) -> int:
        return column_x(self.viewport().width())

    def _estimate(self, message: MessageData) -> int:
        return self._layout.estimate_height(message, self._column_width())

    def _measure(self, row: Row, keep: bool) -> None:
        """Lay the row out at the current width: its exact height and geometry."""
        data = row.data
        documents = self._documents.body(data, keep=keep)
        status = self._rows.status(row)[0]
        thought = self._documents.thought(data) if self.thought_open(data.id) else None
        geom = self._layout.measure(
            data, documents, self._column_width(), status, data.id in self._rows.progress, thought
        )
        self._repaint_changed(row, geom)
        self._rows.set_geometry(row, geom)

    def _repaint_changed(self, row: Row, geom: Geometry) -> None:
        """Ask to paint what a new layout of the row changes on screen (``changed_region``);
        when rows move, the viewport whole, and no scrolling by moving pixels until then."""
        i = self._rows.find(row.data.id)
        if i is None:
            return
        viewport = self.viewport()
        top = self._rows.top(i) - self.verticalScrollBar().value()
        follows = i == len(self._rows) - 1 and self._scroll.follow
        rect = changed_region(row.previous, geom, top, self._column_x(), viewport.size(), follows)
        if rect is None:
            self._rows_moved = True
            viewport.update()
        else:
            viewport.update(rect)

    # -- status and animation -------------------------------------------------------

    def _status_changed(self, message_id: MessageId) -> None:
        i = self._rows.find(message_id)
        assert i is not None
        row = self._rows[i]
        geom = row.geom
        # Progress only changes the text and bar of the status line: keep the layout when
        # the line count stays the same, so 30 updates a second cost a repaint only.
        if (
            geom is not None
            and geom.status is not None
            and geom.progress is not None
            and self._layout.text_height(self._rows.status(row)[0], geom.width) == geom.status.height()
        ):
            self._update_row(i)
            return
        self._rows.invalidate(row)
        self._scroll.settle()

    def _update_indicator_timer(self) -> None:
        active = self._rows.busy()
        if active and not self._indicator_timer.isActive():
            self._indicator_timer.start()
        elif not active:
            self._indicator_timer.stop()

    def _animate_indicator(self) -> None:
        """Step the writing dots: only their line is painted again, not the reply's row
        (which may fill the viewport, several times a second). Not while text arrives."""
        if time.monotonic() - self._text_arrived_at < DOTS_REST_WHILE_TEXT_S:
            return
        self._tick += 1
        value = self.verticalScrollBar().value()
        for i, row in enumerate(self._rows):
            geom = row.geom
            if row.data.state is MessageState.STREAMING and geom is not None and geom.stats is not None:
                self.viewport().update(geom.stats.translated(self._column_x(), self._rows.top(i) - value))

    def _update_row(self, i: int) -> None:
        top = self._rows.top(i) - self.verticalScrollBar().value()
        self.viewport().update(QRect(0, top, self.viewport().width(), self._rows[i].height))

    # -- Qt plumbing ----------------------------------------------------------------

    def scrollContentsBy(self, dx: int, dy: int) -> None:
        if not self._scroll.adjusting:
            self._scroll.follow = self.is_at_bottom()
            self._scroll.measure_visible()
            self.viewport().update()
        elif dx == 0 and 0 < abs(dy) < self.viewport().height() and not (self._rows_moved or self._ring):
            # Following a streamed reply: move what is on screen, paint what comes in (and
            # what ``_repaint_changed`` asked for). On two cores each full paint is taken
            # from decode.
            self.viewport().scroll(0, dy)
        else:
            self.viewport().update()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._place_undo_bar()
        # Rows keep their old height as the estimate until measured at the new width.
        self._rows.heights_changed()
        self._scroll.settle()

    def _place_undo_bar(self) -> None:
        bar = self.undo_bar
        height = bar.sizeHint().height() if bar.isVisibleTo(self) else 0
        self.setViewportMargins(0, 0, 0, height)
        bar.setGeometry(0, self.height() - height, self.width(), height)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._restyle()
            self._scroll.settle()

    def sizeHint(self) -> QSize:
        return QSize(640, 480)
