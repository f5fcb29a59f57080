"""The messages of one conversation: Markdown replies, the user's bubbles, live progress,
reply statistics and per-message actions.

Built to stay smooth on long conversations:

- ``MessageView`` paints rows itself (a QAbstractScrollArea, no widget per message). Each
  message's Markdown is rendered to HTML once and cached by (id, text hash); a
  QTextDocument is kept only for recently painted rows.
- Row heights start as estimates. Rows on screen are laid out exactly before they are
  painted; the rest are measured in ~8 ms slices while the event loop is idle, nearest to
  the viewport first. When a row above the viewport changes height the scroll position
  moves with it, so what the user is reading does not jump.
- Streaming text is buffered and applied at most ~30 times a second (slower when one
  re-render of a very long reply gets expensive), re-rendering only that message.
"""

from __future__ import annotations

import bisect
import html
import math
import time
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from PySide6.QtCore import QEvent, QPoint, QPointF, QRect, QRectF, QSize, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QContextMenuEvent,
    QDesktopServices,
    QFont,
    QFontMetrics,
    QGuiApplication,
    QImage,
    QKeyEvent,
    QKeySequence,
    QMouseEvent,
    QPainter,
    QPainterPath,
    QPaintEvent,
    QPalette,
    QPixmap,
    QResizeEvent,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextOption,
)
from PySide6.QtWidgets import QAbstractScrollArea, QFrame, QMenu, QToolTip, QWidget

from app.chat.data import (
    STOP_REASON_TEXT,
    ImageThumb,
    MessageAction,
    MessageData,
    MessageId,
    MessageState,
    ReplyStats,
    format_prefill,
)
from app.chat.markdown import (
    MarkdownRenderer,
    RenderedMarkdown,
    code_block_index,
    default_stylesheet,
    stable_prefix_end,
)
from app.chat.theme import ChatColors, markdown_style
from engine import Role, StopReason

# Layout, in logical pixels.
COLUMN_MAX_WIDTH = 880  # long lines are hard to read; wide windows get margins instead
SIDE_MARGIN = 20
ROW_PAD_TOP = 12
ROW_PAD_BOTTOM = 4
HEADER_GAP = 4
BUBBLE_PAD_X = 14
BUBBLE_PAD_Y = 9
BUBBLE_RADIUS = 14
BUBBLE_MAX_FRACTION = 0.8
THUMB_SIZE = 96
THUMB_GAP = 8
LINE_GAP = 4
PROGRESS_WIDTH = 260
PROGRESS_HEIGHT = 3
ACTION_PAD_X = 7
ACTION_SPACING = 2

STREAM_INTERVAL_MS = 33  # at most ~30 re-renders a second while a reply streams
MAX_STREAM_INTERVAL_MS = 250
SEGMENT_CHARS = 1500  # streaming: finished blocks are frozen in pieces at least this long
MEASURE_SLICE_S = 0.008  # background measuring per event-loop turn
DOC_CACHE_SIZE = 160
HTML_CACHE_SIZE = 4000
THUMB_CACHE_SIZE = 256
INDICATOR_INTERVAL_MS = 280


@dataclass(frozen=True)
class PrefillProgress:
    done: int
    total: int
    cached: int
    images_done: int = 0
    images_total: int = 0

    @property
    def fraction(self) -> float:
        return 0.0 if self.total <= 0 else min(1.0, self.done / self.total)

    def text(self) -> str:
        return format_prefill(self.done, self.total, self.cached, self.images_done, self.images_total)


@dataclass(frozen=True)
class _Geometry:
    """Where each part of a row goes, relative to the row's top-left in the column."""

    width: int  # the column width this was measured at
    height: int
    header: QRect
    thumbs: tuple[QRect, ...]
    bubble: QRect | None  # user messages sit in a bubble
    body: QRect  # where the document is drawn; its width is the document's text width
    status: QRect | None
    progress: QRect | None
    stats: QRect | None
    footer: QRect  # the actions line


@dataclass(eq=False)
class _Row:
    data: MessageData
    text: str
    pending: list[str] = field(default_factory=list)  # streamed text not yet shown
    height: int = 0
    geom: _Geometry | None = None  # None: height is an estimate (or stale)


@dataclass(eq=False)
class _Doc:
    document: QTextDocument
    rendered: RenderedMarkdown


@dataclass(eq=False)
class _Segment:
    """A piece of a streaming reply with its own document, stacked under the previous."""

    document: QTextDocument
    rendered: RenderedMarkdown
    top: int = 0  # within the body, set when the row is measured
    height: int = 0


@dataclass(eq=False)
class _StreamingRender:
    """A reply being streamed, rendered in pieces: finished blocks are frozen into
    segments of at least SEGMENT_CHARS that are never rendered or laid out again; only
    the tail (the rest, still growing) is, so each update costs the same however long the
    reply has become. The whole reply is rendered as one document once it ends."""

    frozen: list[_Segment] = field(default_factory=list)
    frozen_end: int = 0  # text[:frozen_end] is in the frozen segments
    frozen_code: list[str] = field(default_factory=list)
    tail: _Segment | None = None
    rendered_length: int = -1  # len(text) when last rendered

    @property
    def segments(self) -> list[_Segment]:
        return [*self.frozen, self.tail] if self.tail is not None else list(self.frozen)

    @property
    def code_blocks(self) -> tuple[str, ...]:
        tail = self.tail.rendered.code_blocks if self.tail is not None else ()
        return (*self.frozen_code, *tail)


@dataclass(frozen=True)
class _Hit:
    row: int
    kind: str  # "action", "anchor", "body", "thumb", "stats", "row"
    action: MessageAction | None = None
    anchor: str = ""
    position: int = -1  # character position in the document, for selection
    thumb: int = -1


@dataclass
class _Selection:
    row_id: MessageId
    anchor: int
    position: int

    @property
    def empty(self) -> bool:
        return self.anchor == self.position


class MessageView(QAbstractScrollArea):
    """All messages of one conversation, newest at the bottom.

    Feed it ``MessageData`` values: ``set_messages`` for a whole conversation, then
    ``append_message``/``update_message``, and for a reply being generated
    ``set_queued``/``set_prefill`` -> ``append_delta`` ... -> ``set_state`` (or
    ``update_message`` with the final text, state and stats).
    """

    edit_requested = Signal(object)  # message id (a user message)
    regenerate_requested = Signal(object)  # message id (the last assistant reply)
    continue_requested = Signal(object)  # message id (an interrupted or cut-off reply)
    copied = Signal(str)  # text put on the clipboard (a message, a selection or a code block)
    link_activated = Signal(str)  # a link in a reply was clicked (http(s) links also open)
    image_activated = Signal(object, int)  # message id, image index

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.viewport().setMouseTracking(True)
        self.viewport().setAutoFillBackground(True)
        self.viewport().setBackgroundRole(QPalette.ColorRole.Base)
        self.verticalScrollBar().setSingleStep(24)

        self._rows: list[_Row] = []
        self._index: dict[MessageId, int] = {}
        self._tops: list[int] = [0]
        self._tops_dirty = False
        self._follow = True  # stick to the bottom while the user has not scrolled up
        self._adjusting = False
        self._measuring = False
        self._assistant_name = "Assistant"
        self._placeholder = "No messages yet"

        self._html_cache: OrderedDict[tuple[object, ...], RenderedMarkdown] = OrderedDict()
        self._docs: OrderedDict[MessageId, _Doc] = OrderedDict()
        self._streams: dict[MessageId, _StreamingRender] = {}
        self._scratch = QTextDocument()  # measuring rows that are not on screen
        self._thumbs: OrderedDict[tuple[MessageId, int], tuple[ImageThumb, QPixmap]] = OrderedDict()
        self._progress: dict[MessageId, PrefillProgress] = {}
        self._queued: dict[MessageId, int] = {}
        self.render_counts: Counter[MessageId] = Counter()  # Markdown renders per message

        self._hover_row = -1
        self._hover_action: tuple[int, MessageAction] | None = None
        self._pressed: _Hit | None = None
        self._selection: _Selection | None = None
        self._selecting = False
        self._tick = 0

        self._restyle()

        self._stream_timer = QTimer(self)
        self._stream_timer.setSingleShot(True)
        self._stream_timer.setInterval(STREAM_INTERVAL_MS)
        self._stream_timer.timeout.connect(self._flush_deltas)
        self._measure_timer = QTimer(self)
        self._measure_timer.setSingleShot(True)
        self._measure_timer.setInterval(0)
        self._measure_timer.timeout.connect(self._measure_in_background)
        self._indicator_timer = QTimer(self)
        self._indicator_timer.setInterval(INDICATOR_INTERVAL_MS)
        self._indicator_timer.timeout.connect(self._animate_indicator)

    # -- public: content -----------------------------------------------------------

    def set_messages(self, messages: Iterable[MessageData]) -> None:
        """Show a conversation (replacing what was shown) scrolled to its end."""
        self._stream_timer.stop()
        self._rows = [_Row(data=m, text=m.text) for m in messages]
        self._streams.clear()
        self._reindex()
        self._progress.clear()
        self._queued.clear()
        self._selection = None
        self._hover_row = -1
        for row in self._rows:
            row.height = self._estimate_height(row)
        self._tops_dirty = True
        self._follow = True
        self._settle()
        self._update_indicator_timer()

    def append_message(self, message: MessageData) -> None:
        if message.id in self._index:
            self.update_message(message)
            return
        self._flush_deltas()
        row = _Row(data=message, text=message.text)
        row.height = self._estimate_height(row)
        self._rows.append(row)
        if message.role is Role.USER:
            self._follow = True  # the user just sent it: show it and the reply below
        self._index[message.id] = len(self._rows) - 1
        self._tops_dirty = True
        self._settle()
        self._update_indicator_timer()

    def update_message(self, message: MessageData) -> None:
        """Replace a message by id (text, state, stats, error, images)."""
        i = self._index.get(message.id)
        if i is None:
            self.append_message(message)
            return
        row = self._rows[i]
        row.pending.clear()
        row.data = message
        row.text = message.text
        # Streaming pieces are dropped: a finished reply is rendered whole, once.
        self._streams.pop(message.id, None)
        if not message.state.active:
            self._progress.pop(message.id, None)
            self._queued.pop(message.id, None)
        self._invalidate(row)
        self._settle()
        self._update_indicator_timer()

    def remove_message(self, message_id: MessageId) -> None:
        i = self._index.get(message_id)
        if i is None:
            return
        del self._rows[i]
        self._reindex()
        self._docs.pop(message_id, None)
        self._streams.pop(message_id, None)
        self._progress.pop(message_id, None)
        self._queued.pop(message_id, None)
        if self._selection is not None and self._selection.row_id == message_id:
            self._selection = None
        self._hover_row = -1
        self._tops_dirty = True
        self._settle()
        self._update_indicator_timer()

    def clear(self) -> None:
        self.set_messages(())

    def append_delta(self, message_id: MessageId, text: str) -> None:
        """Add streamed text to a reply. Shown on the next coalesced update (~30/s); the
        first delta also moves the reply from PENDING to STREAMING."""
        i = self._index.get(message_id)
        if i is None or not text:
            return
        row = self._rows[i]
        row.pending.append(text)
        if row.data.state is not MessageState.STREAMING:
            row.data = replace(row.data, state=MessageState.STREAMING)
            self._progress.pop(message_id, None)
            self._queued.pop(message_id, None)
            self._update_indicator_timer()
        if not self._stream_timer.isActive():
            self._stream_timer.start()

    def set_queued(self, message_id: MessageId, position: int) -> None:
        """A pending reply waits behind ``position`` other requests."""
        if message_id in self._index:
            self._queued[message_id] = position
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
        if message_id not in self._index:
            return
        self._queued.pop(message_id, None)
        self._progress[message_id] = PrefillProgress(done, total, cached, images_done, images_total)
        self._status_changed(message_id)

    def set_state(
        self,
        message_id: MessageId,
        state: MessageState,
        *,
        stats: ReplyStats | None = None,
        error: str = "",
        text: str | None = None,
    ) -> None:
        """End (or restart) a reply: DONE with stats, CANCELLED, FAILED with the human error."""
        i = self._index.get(message_id)
        if i is None:
            return
        row = self._rows[i]
        self._apply_pending(row)
        data = replace(
            row.data,
            state=state,
            text=row.text if text is None else text,
            stats=stats if stats is not None else row.data.stats,
            error=error or (row.data.error if state is MessageState.FAILED else ""),
        )
        self.update_message(data)

    def message(self, message_id: MessageId) -> MessageData | None:
        """The message as shown, streamed text included."""
        i = self._index.get(message_id)
        if i is None:
            return None
        row = self._rows[i]
        return replace(row.data, text=row.text + "".join(row.pending))

    def messages(self) -> tuple[MessageData, ...]:
        return tuple(replace(r.data, text=r.text + "".join(r.pending)) for r in self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def set_assistant_name(self, name: str) -> None:
        """The label above replies (the model's name)."""
        self._assistant_name = name or "Assistant"
        self.viewport().update()

    def set_placeholder(self, text: str) -> None:
        """What an empty conversation shows."""
        self._placeholder = text
        self.viewport().update()

    # -- public: actions and text (also what the mouse does) --------------------------

    def available_actions(self, message_id: MessageId) -> tuple[MessageAction, ...]:
        i = self._index.get(message_id)
        return () if i is None else self._actions(i)

    def trigger_action(self, message_id: MessageId, action: MessageAction) -> None:
        i = self._index.get(message_id)
        if i is None or action not in self._actions(i):
            return
        if action is MessageAction.COPY:
            self._copy(self.message(message_id).text)  # type: ignore[union-attr]
        elif action is MessageAction.EDIT:
            self.edit_requested.emit(message_id)
        elif action is MessageAction.REGENERATE:
            self.regenerate_requested.emit(message_id)
        elif action is MessageAction.CONTINUE:
            self.continue_requested.emit(message_id)

    def code_blocks(self, message_id: MessageId) -> tuple[str, ...]:
        i = self._index.get(message_id)
        if i is None:
            return ()
        row = self._rows[i]
        self._apply_pending(row)
        stream = self._streams.get(message_id)
        if stream is not None:
            self._render_stream(row, stream)
            return stream.code_blocks
        return self._rendered(row).code_blocks

    def copy_code_block(self, message_id: MessageId, index: int) -> bool:
        blocks = self.code_blocks(message_id)
        if not 0 <= index < len(blocks):
            return False
        self._copy(blocks[index])
        return True

    def activate_anchor(self, message_id: MessageId, href: str) -> None:
        """What clicking a link in a message does: ``copy:<n>`` copies code block n; a web
        link is announced and opened in the browser; anything else is only announced."""
        index = code_block_index(href)
        if index is not None:
            self.copy_code_block(message_id, index)
            return
        self.link_activated.emit(href)
        url = QUrl(href)
        if url.scheme() in ("http", "https"):
            QDesktopServices.openUrl(url)

    def selected_text(self) -> str:
        sel = self._selection
        if sel is None or sel.empty or sel.row_id not in self._index:
            return ""
        doc = self._document(self._rows[self._index[sel.row_id]])
        cursor = QTextCursor(doc)
        cursor.setPosition(sel.anchor)
        cursor.setPosition(sel.position, QTextCursor.MoveMode.KeepAnchor)
        # QTextCursor uses U+2029 between paragraphs.
        return cursor.selectedText().replace("\u2029", "\n").replace("\u2028", "\n")

    def status_text(self, message_id: MessageId) -> str:
        """The line under a message that says what is happening to it ("" for none)."""
        i = self._index.get(message_id)
        return "" if i is None else self._status(self._rows[i])[0]

    def stats_text(self, message_id: MessageId) -> str:
        i = self._index.get(message_id)
        return "" if i is None else self._stats_line(self._rows[i])

    # -- public: scrolling ----------------------------------------------------------

    def scroll_to_bottom(self) -> None:
        self._follow = True
        self._settle()

    def scroll_to_message(self, message_id: MessageId) -> None:
        i = self._index.get(message_id)
        if i is None:
            return
        self._follow = False
        self._ensure_tops()
        self._set_scroll(self._tops[i])
        self._measure_visible()

    def message_rect(self, message_id: MessageId) -> QRect:
        """Where a message is drawn, in viewport coordinates (empty when unknown)."""
        i = self._index.get(message_id)
        if i is None:
            return QRect()
        self._ensure_tops()
        top = self._tops[i] - self.verticalScrollBar().value()
        return QRect(self._column_x(), top, self._column_width(), self._rows[i].height)

    def is_at_bottom(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() >= bar.maximum() - 2

    def measured_rows(self) -> int:
        """How many rows have exact heights for the current width (the rest are estimates)."""
        width = self._column_width()
        return sum(1 for r in self._rows if r.geom is not None and r.geom.width == width)

    # -- rendering ------------------------------------------------------------------

    def _restyle(self) -> None:
        """(Re)derive colours, fonts and the renderer from the palette; drop every cache
        that baked them in."""
        palette = self.palette()
        self._colors = ChatColors.from_palette(palette)
        self._md_style = markdown_style(palette)
        self._renderer = MarkdownRenderer(self._md_style)
        self._stylesheet = default_stylesheet(self._md_style)
        base = QFont(self.font())
        self._body_font = base
        self._small_font = QFont(base)
        self._small_font.setPointSizeF(max(7.0, base.pointSizeF() * 0.86))
        self._header_font = QFont(self._small_font)
        self._header_font.setWeight(QFont.Weight.DemiBold)
        self._small_fm = QFontMetrics(self._small_font)
        self._header_fm = QFontMetrics(self._header_font)
        self._body_fm = QFontMetrics(self._body_font)
        self._html_cache.clear()
        self._docs.clear()
        # Streaming replies start over in the new style from their next update.
        for message_id in list(self._streams):
            self._streams[message_id] = _StreamingRender()
            i = self._index.get(message_id)
            if i is not None:
                self._render_stream(self._rows[i], self._streams[message_id])
        self._configure_document(self._scratch)
        for row in self._rows:
            row.geom = None

    def _new_document(self) -> QTextDocument:
        doc = QTextDocument(self)
        self._configure_document(doc)
        return doc

    def _configure_document(self, doc: QTextDocument) -> None:
        doc.setDefaultFont(self._body_font)
        doc.setDefaultStyleSheet(self._stylesheet)
        doc.setDocumentMargin(0)
        option = doc.defaultTextOption()
        # Long URLs and hashes in replies must wrap instead of running off the column.
        option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        doc.setDefaultTextOption(option)
        doc.setUndoRedoEnabled(False)

    def _rendered(self, row: _Row) -> RenderedMarkdown:
        data = row.data
        key = (data.id, data.role, len(row.text), hash(row.text))
        hit = self._html_cache.get(key)
        if hit is not None:
            self._html_cache.move_to_end(key)
            return hit
        if data.role is Role.USER:
            # What the user typed is shown as typed: no Markdown surprises with * or _.
            body = f'<p style="white-space: pre-wrap;">{html.escape(row.text)}</p>'
            rendered = RenderedMarkdown(html=body, code_blocks=())
        else:
            rendered = self._renderer.render(row.text)
        self.render_counts[data.id] += 1
        self._html_cache[key] = rendered
        while len(self._html_cache) > HTML_CACHE_SIZE:
            self._html_cache.popitem(last=False)
        return rendered

    def _document(self, row: _Row) -> QTextDocument:
        """The row's document, laid out at the width its geometry says (cached, LRU)."""
        rendered = self._rendered(row)
        entry = self._docs.get(row.data.id)
        if entry is None or entry.rendered is not rendered:
            if entry is None:
                entry = _Doc(self._new_document(), rendered)
                self._docs[row.data.id] = entry
            entry.document.setHtml(rendered.html)
            entry.rendered = rendered
        self._docs.move_to_end(row.data.id)
        while len(self._docs) > DOC_CACHE_SIZE:
            _, old = self._docs.popitem(last=False)
            old.document.deleteLater()
        doc = entry.document
        if row.geom is not None and doc.textWidth() != row.geom.body.width():
            doc.setTextWidth(row.geom.body.width())
        return doc

    def _invalidate(self, row: _Row) -> None:
        row.geom = None
        self._tops_dirty = True

    # -- geometry -------------------------------------------------------------------

    def _column_width(self) -> int:
        return max(120, min(COLUMN_MAX_WIDTH, self.viewport().width() - 2 * SIDE_MARGIN))

    def _column_x(self) -> int:
        return max(SIDE_MARGIN, (self.viewport().width() - self._column_width()) // 2)

    def _estimate_height(self, row: _Row) -> int:
        """A cheap guess (no layout) good enough for the scrollbar until measured."""
        width = self._column_width()
        if row.data.role is Role.USER:
            width = int(width * BUBBLE_MAX_FRACTION) - 2 * BUBBLE_PAD_X
        chars_per_line = max(10, width // max(1, self._body_fm.averageCharWidth()))
        lines = sum(1 + len(line) // chars_per_line for line in row.text.split("\n"))
        lines += row.text.count("```") * 2  # code block headers and padding
        height = ROW_PAD_TOP + self._header_fm.height() + HEADER_GAP + lines * self._body_fm.lineSpacing()
        if row.data.images:
            height += THUMB_SIZE + THUMB_GAP
        if row.data.role is Role.USER:
            height += 2 * BUBBLE_PAD_Y
        footer = self._small_fm.height() + 6
        return height + 2 * footer + ROW_PAD_BOTTOM

    def _measure(self, row: _Row, scratch: bool = False) -> int:
        """Lay the row out at the current width: its exact height and geometry."""
        width = self._column_width()
        data = row.data
        user = data.role is Role.USER
        y = ROW_PAD_TOP
        header = QRect(0, y, width, self._header_fm.height() + 2)
        y += header.height() + HEADER_GAP

        thumbs: list[QRect] = []
        if data.images:
            per_line = max(1, (width + THUMB_GAP) // (THUMB_SIZE + THUMB_GAP))
            for k in range(len(data.images)):
                line, col = divmod(k, per_line)
                step = THUMB_SIZE + THUMB_GAP
                x = width - (col + 1) * THUMB_SIZE - col * THUMB_GAP if user else col * step
                thumbs.append(QRect(x, y + line * (THUMB_SIZE + THUMB_GAP), THUMB_SIZE, THUMB_SIZE))
            lines = math.ceil(len(data.images) / per_line)
            y += lines * (THUMB_SIZE + THUMB_GAP)

        bubble: QRect | None = None
        body = QRect(0, y, width, 0)
        stream = self._streams.get(data.id)
        if stream is not None:
            body_height = 0
            for segment in stream.segments:
                if segment.document.textWidth() != width:
                    segment.document.setTextWidth(width)
                segment.top = body_height
                segment.height = math.ceil(segment.document.size().height())
                body_height += segment.height
            body = QRect(0, y, width, body_height)
            y += body_height
        elif row.text or user:
            if scratch:
                doc = self._scratch
                doc.setHtml(self._rendered(row).html)
            else:
                doc = self._document(row)
            if user:
                max_text = max(40, int(width * BUBBLE_MAX_FRACTION) - 2 * BUBBLE_PAD_X)
                doc.setTextWidth(max_text)
                text_width = min(max_text, math.ceil(doc.idealWidth()) + 2)
                doc.setTextWidth(text_width)
                doc_height = math.ceil(doc.size().height())
                bubble_width = text_width + 2 * BUBBLE_PAD_X
                bubble = QRect(width - bubble_width, y, bubble_width, doc_height + 2 * BUBBLE_PAD_Y)
                body = QRect(bubble.x() + BUBBLE_PAD_X, y + BUBBLE_PAD_Y, text_width, doc_height)
                y = bubble.y() + bubble.height()
            else:
                # setTextWidth lays the whole document out again even when unchanged.
                if doc.textWidth() != width:
                    doc.setTextWidth(width)
                doc_height = math.ceil(doc.size().height())
                body = QRect(0, y, width, doc_height)
                y += doc_height

        status = progress = None
        status_text, _color = self._status(row)
        if status_text:
            y += LINE_GAP
            text_height = self._text_height(status_text, width)
            status = QRect(0, y, width, text_height)
            y += text_height
            if data.id in self._progress:
                progress = QRect(0, y + 4, min(width, PROGRESS_WIDTH), PROGRESS_HEIGHT)
                y += 4 + PROGRESS_HEIGHT + 2

        stats = None
        if not user and (data.stats is not None or data.state is MessageState.STREAMING):
            y += LINE_GAP
            stats = QRect(0, y, width, self._small_fm.height())
            y += stats.height()

        y += 2
        footer_height = self._small_fm.height() + 6
        footer = QRect(0, y, width, footer_height)
        y += footer_height + ROW_PAD_BOTTOM

        row.geom = _Geometry(width, y, header, tuple(thumbs), bubble, body, status, progress, stats, footer)
        if row.height != y:
            row.height = y
            self._tops_dirty = True
        return y

    def _text_height(self, text: str, width: int) -> int:
        """Height of small text wrapped at ``width`` (status lines may wrap: long errors)."""
        bounds = QRect(0, 0, width, 10_000)
        return self._small_fm.boundingRect(bounds, Qt.TextFlag.TextWordWrap, text).height()

    def _ensure_tops(self) -> None:
        if self._tops_dirty:
            self._tops = [0]
            total = 0
            for row in self._rows:
                total += row.height
                self._tops.append(total)
            self._tops_dirty = False

    def _total_height(self) -> int:
        self._ensure_tops()
        return self._tops[-1]

    def _row_at_y(self, y: int) -> int:
        """Index of the row covering content y (clamped to the rows that exist)."""
        self._ensure_tops()
        if not self._rows:
            return -1
        return max(0, min(len(self._rows) - 1, bisect.bisect_right(self._tops, y) - 1))

    def _is_exact(self, row: _Row, width: int) -> bool:
        return row.geom is not None and row.geom.width == width

    def _set_scroll(self, value: int) -> None:
        self._adjusting = True
        try:
            bar = self.verticalScrollBar()
            bar.setRange(0, max(0, self._total_height() - self.viewport().height()))
            bar.setPageStep(max(1, self.viewport().height()))
            bar.setValue(value)
        finally:
            self._adjusting = False

    def _commit_heights(self, anchor: tuple[int, int] | None) -> None:
        """Heights changed: update the scrollbar, keeping the bottom in view when following,
        else the row at the top of the viewport where it was on screen."""
        self._tops_dirty = True
        if self._follow or anchor is None:
            self._set_scroll(self._total_height())  # clamped to the maximum
        else:
            self._ensure_tops()
            index, offset = anchor
            top = self._tops[index] if index < len(self._rows) else self._total_height()
            self._set_scroll(top + offset)
        self.viewport().update()

    def _anchor(self) -> tuple[int, int] | None:
        if not self._rows:
            return None
        value = self.verticalScrollBar().value()
        index = self._row_at_y(value)
        return index, value - self._tops[index]

    def _measure_visible(self) -> None:
        """Lay out exactly the rows on screen (and a screen's worth around them) so they
        paint at their real size; repeat while that moves the viewport onto new rows."""
        if self._measuring or not self._rows:
            return
        self._measuring = True
        try:
            width = self._column_width()
            height = self.viewport().height()
            for _ in range(8):
                anchor = self._anchor()
                if self._follow:
                    self._set_scroll(self._total_height())
                value = self.verticalScrollBar().value()
                first = self._row_at_y(max(0, value - height // 2))
                last = self._row_at_y(value + height + height // 2)
                changed = False
                for i in range(first, last + 1):
                    row = self._rows[i]
                    if not self._is_exact(row, width):
                        old = row.height
                        self._measure(row)
                        changed = changed or row.height != old
                        if row.height != old:
                            self._tops_dirty = True
                if not changed:
                    break
                self._commit_heights(anchor)
        finally:
            self._measuring = False

    def _settle(self) -> None:
        """After any change: exact heights on screen, scrollbar, repaint, and background
        measuring of the rest."""
        self._ensure_tops()
        self._set_scroll(self._total_height() if self._follow else self.verticalScrollBar().value())
        self._measure_visible()
        self._commit_heights(self._anchor())
        if not self._measure_timer.isActive() and self.measured_rows() < len(self._rows):
            self._measure_timer.start()

    def _measure_in_background(self) -> None:
        """Measure rows that are off screen, nearest first, for at most one slice."""
        if not self._rows:
            return
        width = self._column_width()
        deadline = time.perf_counter() + MEASURE_SLICE_S
        anchor = self._anchor()
        value = self.verticalScrollBar().value()
        first = self._row_at_y(value)
        last = self._row_at_y(value + self.viewport().height())
        order = [*range(first - 1, -1, -1), *range(last + 1, len(self._rows)), *range(first, last + 1)]
        changed = False
        remaining = False
        for i in order:
            row = self._rows[i]
            if self._is_exact(row, width):
                continue
            if time.perf_counter() > deadline:
                remaining = True
                break
            old = row.height
            self._measure(row, scratch=row.data.id not in self._docs)
            changed = changed or row.height != old
        if changed:
            self._commit_heights(anchor)
        if remaining:
            self._measure_timer.start()

    # -- streaming ------------------------------------------------------------------

    def _apply_pending(self, row: _Row) -> None:
        if row.pending:
            row.text += "".join(row.pending)
            row.pending.clear()
            self._invalidate(row)

    def _flush_deltas(self) -> None:
        started = time.perf_counter()
        touched = False
        for row in self._rows:
            if row.pending:
                self._apply_pending(row)
                touched = True
                if row.data.state is MessageState.STREAMING and row.data.role is not Role.USER:
                    stream = self._streams.setdefault(row.data.id, _StreamingRender())
                    self._render_stream(row, stream)
        if not touched:
            return
        self._settle()
        # A very long reply re-renders slowly: give the event loop room by updating less
        # often (never faster than ~30/s, never slower than 4/s).
        cost_ms = (time.perf_counter() - started) * 1000
        interval = int(min(MAX_STREAM_INTERVAL_MS, max(STREAM_INTERVAL_MS, 4 * cost_ms)))
        self._stream_timer.setInterval(interval)

    def _render_stream(self, row: _Row, stream: _StreamingRender) -> None:
        """Bring a streaming reply's pieces up to date with its text: freeze finished
        blocks once there are enough of them, then render the tail again."""
        text = row.text
        if stream.rendered_length == len(text):
            return  # already current (streamed text only grows)
        tail_text = text[stream.frozen_end :]
        end = stable_prefix_end(text, stream.frozen_end)
        if end - stream.frozen_end >= SEGMENT_CHARS:
            piece = self._renderer.render(
                text[stream.frozen_end : end], code_index_start=len(stream.frozen_code)
            )
            doc = self._new_document()
            doc.setHtml(piece.html)
            stream.frozen.append(_Segment(doc, piece))
            stream.frozen_code.extend(piece.code_blocks)
            stream.frozen_end = end
            tail_text = text[end:]
        if not tail_text:
            stream.tail = None
        else:
            piece = self._renderer.render(tail_text, code_index_start=len(stream.frozen_code))
            if stream.tail is None:
                stream.tail = _Segment(self._new_document(), piece)
            stream.tail.document.setHtml(piece.html)
            stream.tail.rendered = piece
        stream.rendered_length = len(text)
        self.render_counts[row.data.id] += 1
        self._invalidate(row)

    def _status_changed(self, message_id: MessageId) -> None:
        i = self._index[message_id]
        row = self._rows[i]
        old_geom = row.geom
        # Progress only changes the text and bar of the status line: keep the layout when
        # the line count stays the same, so 30 updates a second cost a repaint only.
        if (
            old_geom is not None
            and old_geom.status is not None
            and old_geom.progress is not None
            and self._text_height(self._status(row)[0], old_geom.width) == old_geom.status.height()
        ):
            self._update_row(i)
            return
        self._invalidate(row)
        self._settle()

    def _update_indicator_timer(self) -> None:
        active = any(r.data.state.active for r in self._rows)
        if active and not self._indicator_timer.isActive():
            self._indicator_timer.start()
        elif not active:
            self._indicator_timer.stop()

    def _animate_indicator(self) -> None:
        self._tick += 1
        for i, row in enumerate(self._rows):
            if row.data.state.active:
                self._update_row(i)

    def _update_row(self, i: int) -> None:
        self._ensure_tops()
        top = self._tops[i] - self.verticalScrollBar().value()
        self.viewport().update(QRect(0, top, self.viewport().width(), self._rows[i].height))

    # -- what a row says and offers -------------------------------------------------

    def _status(self, row: _Row) -> tuple[str, str]:
        """(text, colour role) of the status line: "muted", "warning" or "error"."""
        data = row.data
        state = data.state
        if state is MessageState.PENDING:
            progress = self._progress.get(data.id)
            if progress is not None:
                return progress.text(), "muted"
            position = self._queued.get(data.id)
            if position:
                return f"queued, {position} ahead", "muted"
            return "waiting for the model…", "muted"
        if state is MessageState.INTERRUPTED:
            return "Interrupted — continue or regenerate", "warning"
        if state is MessageState.FAILED:
            return data.error or "The reply failed.", "error"
        if state is MessageState.CANCELLED:
            return "Stopped", "muted"
        return "", "muted"

    def _stats_line(self, row: _Row) -> str:
        stats = row.data.stats
        if stats is None:
            return ""
        if row.data.state is MessageState.CANCELLED and stats.stop_reason is StopReason.CANCELLED:
            # "Stopped" is already the status line; do not say it twice.
            return stats.summary().replace(" · " + STOP_REASON_TEXT[StopReason.CANCELLED], "")
        return stats.summary()

    def _last_assistant(self) -> int:
        for i in range(len(self._rows) - 1, -1, -1):
            if self._rows[i].data.role is Role.ASSISTANT:
                return i
        return -1

    def _actions(self, i: int) -> tuple[MessageAction, ...]:
        row = self._rows[i]
        data = row.data
        actions = [MessageAction.COPY] if (row.text or row.pending) else []
        busy = any(r.data.state.active for r in self._rows)
        if busy:
            return tuple(actions)
        if data.role is Role.USER:
            actions.append(MessageAction.EDIT)
        elif data.role is Role.ASSISTANT and i == self._last_assistant():
            cut_off = data.stats is not None and data.stats.stop_reason is StopReason.LENGTH
            if data.state in (MessageState.INTERRUPTED, MessageState.CANCELLED) or cut_off:
                actions.append(MessageAction.CONTINUE)
            actions.append(MessageAction.REGENERATE)
        return tuple(actions)

    def _action_rects(self, i: int) -> list[tuple[MessageAction, QRect]]:
        row = self._rows[i]
        geom = row.geom
        if geom is None:
            return []
        actions = self._actions(i)
        fm = self._small_fm
        widths = [fm.horizontalAdvance(a.value) + 2 * ACTION_PAD_X for a in actions]
        total = sum(widths) + ACTION_SPACING * max(0, len(widths) - 1)
        # Under the user's bubble (right) or under the reply (left).
        x = geom.width - total if row.data.role is Role.USER else -ACTION_PAD_X
        rects = []
        for action, w in zip(actions, widths, strict=True):
            rects.append((action, QRect(x, geom.footer.y(), w, geom.footer.height())))
            x += w + ACTION_SPACING
        return rects

    def _actions_visible(self, i: int) -> bool:
        state = self._rows[i].data.state
        return i == self._hover_row or state in (MessageState.INTERRUPTED, MessageState.FAILED)

    # -- painting -------------------------------------------------------------------

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self.viewport())
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if not self._rows:
            painter.setPen(self._colors.muted)
            painter.drawText(self.viewport().rect(), Qt.AlignmentFlag.AlignCenter, self._placeholder)
            return
        value = self.verticalScrollBar().value()
        clip = event.rect()
        first = self._row_at_y(value + clip.top())
        last = self._row_at_y(value + clip.bottom())
        x0 = self._column_x()
        repaint = False
        for i in range(first, last + 1):
            row = self._rows[i]
            if not self._is_exact(row, self._column_width()):
                # Not measured yet (only when a paint beats _measure_visible): draw at
                # the estimated size now, exact on the next frame.
                self._measure(row)
                repaint = True
            top = self._tops[i] - value
            self._paint_row(painter, i, QPoint(x0, top), clip)
        painter.end()
        if repaint:
            QTimer.singleShot(0, self._settle)

    def _paint_row(self, painter: QPainter, i: int, origin: QPoint, clip: QRect) -> None:
        row = self._rows[i]
        geom = row.geom
        assert geom is not None
        data = row.data
        colors = self._colors
        user = data.role is Role.USER
        painter.save()
        painter.translate(origin)

        # Header: who speaks.
        painter.setFont(self._header_font)
        painter.setPen(colors.muted)
        name = {Role.USER: "You", Role.ASSISTANT: self._assistant_name, Role.SYSTEM: "System"}[data.role]
        align = Qt.AlignmentFlag.AlignRight if user else Qt.AlignmentFlag.AlignLeft
        painter.drawText(geom.header, int(align | Qt.AlignmentFlag.AlignTop | Qt.TextFlag.TextDontClip), name)

        for k, rect in enumerate(geom.thumbs):
            self._paint_thumb(painter, data.id, k, rect)

        if geom.bubble is not None:
            path = QPainterPath()
            bubble = QRectF(geom.bubble).adjusted(0.5, 0.5, -0.5, -0.5)
            path.addRoundedRect(bubble, BUBBLE_RADIUS, BUBBLE_RADIUS)
            painter.fillPath(path, colors.bubble)
            painter.setPen(colors.bubble_border)
            painter.drawPath(path)

        for doc, top, height in self._body_documents(row) if geom.body.height() > 0 else ():
            offset = geom.body.topLeft() + QPoint(0, top)
            visible = QRectF(clip.translated(-origin - offset))
            visible = visible.intersected(QRectF(0, 0, geom.body.width(), height))
            if visible.isEmpty():
                continue
            painter.save()
            painter.translate(offset)
            ctx = QAbstractTextDocumentLayout.PaintContext()
            palette = QPalette(self.palette())
            palette.setColor(QPalette.ColorRole.Text, colors.text)
            ctx.palette = palette
            ctx.clip = visible
            sel = self._selection
            if sel is not None and sel.row_id == data.id and not sel.empty:
                selection = QAbstractTextDocumentLayout.Selection()
                cursor = QTextCursor(doc)
                cursor.setPosition(sel.anchor)
                cursor.setPosition(sel.position, QTextCursor.MoveMode.KeepAnchor)
                selection.cursor = cursor
                fmt = QTextCharFormat()
                fmt.setBackground(self.palette().brush(QPalette.ColorRole.Highlight))
                fmt.setForeground(self.palette().brush(QPalette.ColorRole.HighlightedText))
                selection.format = fmt
                ctx.selections = [selection]
            painter.setClipRect(ctx.clip)
            doc.documentLayout().draw(painter, ctx)
            painter.restore()

        painter.setFont(self._small_font)
        if geom.status is not None:
            text, role = self._status(row)
            painter.setPen({"muted": colors.muted, "warning": colors.warning, "error": colors.error}[role])
            painter.drawText(geom.status, int(Qt.TextFlag.TextWordWrap | Qt.AlignmentFlag.AlignLeft), text)
        if geom.progress is not None:
            progress = self._progress.get(data.id)
            track = QRectF(geom.progress)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(colors.track)
            painter.drawRoundedRect(track, 1.5, 1.5)
            if progress is not None and progress.fraction > 0:
                painter.setBrush(colors.accent)
                done = QRectF(track.x(), track.y(), track.width() * progress.fraction, track.height())
                painter.drawRoundedRect(done, 1.5, 1.5)
        if geom.stats is not None:
            if data.state is MessageState.STREAMING:
                self._paint_streaming_dots(painter, geom.stats)
            else:
                painter.setPen(colors.muted)
                elide = Qt.TextElideMode.ElideRight
                line = self._small_fm.elidedText(self._stats_line(row), elide, geom.width)
                painter.drawText(geom.stats, int(Qt.AlignmentFlag.AlignVCenter), line)

        if self._actions_visible(i):
            for action, rect in self._action_rects(i):
                hovered = self._hover_action == (i, action)
                if hovered:
                    painter.setPen(Qt.PenStyle.NoPen)
                    painter.setBrush(colors.hover)
                    painter.drawRoundedRect(QRectF(rect).adjusted(0, 1, 0, -1), 6, 6)
                painter.setPen(colors.text if hovered else colors.muted)
                painter.drawText(rect, int(Qt.AlignmentFlag.AlignCenter), action.value)
        painter.restore()

    def _paint_streaming_dots(self, painter: QPainter, rect: QRect) -> None:
        """Three dots, one brighter in turn: "still writing", without a spinner's noise."""
        radius = 2.5
        cy = rect.center().y() + 0.5
        painter.setPen(Qt.PenStyle.NoPen)
        for k in range(3):
            color = self._colors.accent if k == self._tick % 3 else self._colors.track
            painter.setBrush(color)
            painter.drawEllipse(QPointF(rect.x() + radius + 1 + k * 10, cy), radius, radius)

    def _paint_thumb(self, painter: QPainter, message_id: MessageId, k: int, rect: QRect) -> None:
        pixmap = self._thumb_pixmap(message_id, k)
        path = QPainterPath()
        path.addRoundedRect(QRectF(rect), 10, 10)
        painter.save()
        painter.setClipPath(path)
        if pixmap is None or pixmap.isNull():
            painter.fillRect(rect, self._colors.track)
            painter.setPen(self._colors.muted)
            painter.drawText(rect, int(Qt.AlignmentFlag.AlignCenter), "image")
        else:
            painter.drawPixmap(rect, pixmap)
        painter.restore()
        painter.setPen(self._colors.bubble_border)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(path)

    def _thumb_pixmap(self, message_id: MessageId, k: int) -> QPixmap | None:
        i = self._index.get(message_id)
        if i is None or k >= len(self._rows[i].data.images):
            return None
        thumb = self._rows[i].data.images[k]
        key = (message_id, k)
        cached = self._thumbs.get(key)
        # Keyed by position; the ImageThumb itself says whether the image is still the one
        # decoded (update_message may bring new images under the same id).
        if cached is not None and cached[0] is thumb:
            self._thumbs.move_to_end(key)
            return cached[1]
        image = thumb.data if isinstance(thumb.data, QImage) else QImage.fromData(thumb.data)
        if image.isNull():
            return None
        pixmap = square_thumbnail(image, THUMB_SIZE, self.devicePixelRatioF())
        self._thumbs[key] = (thumb, pixmap)
        while len(self._thumbs) > THUMB_CACHE_SIZE:
            self._thumbs.popitem(last=False)
        return pixmap

    # -- mouse, keyboard, menus -----------------------------------------------------

    def _hit(self, pos: QPoint) -> _Hit | None:
        if not self._rows:
            return None
        y = pos.y() + self.verticalScrollBar().value()
        i = self._row_at_y(y)
        if y >= self._total_height():
            return None
        row = self._rows[i]
        geom = row.geom
        if geom is None:
            return _Hit(i, "row")
        local = QPoint(pos.x() - self._column_x(), y - self._tops[i])
        if self._actions_visible(i):
            for action, rect in self._action_rects(i):
                if rect.contains(local):
                    return _Hit(i, "action", action=action)
        for k, rect in enumerate(geom.thumbs):
            if rect.contains(local):
                return _Hit(i, "thumb", thumb=k)
        if geom.stats is not None and geom.stats.contains(local):
            return _Hit(i, "stats")
        hit_area = geom.bubble if geom.bubble is not None else geom.body
        if geom.body.height() > 0 and hit_area.contains(local):
            streaming = row.data.id in self._streams
            for doc, top, height in self._body_documents(row):
                point = QPointF(local - geom.body.topLeft() - QPoint(0, top))
                if point.y() >= height and top + height < geom.body.height():
                    continue
                layout = doc.documentLayout()
                anchor = layout.anchorAt(point)
                # No selection in a reply that is still changing under the mouse.
                position = -1 if streaming else layout.hitTest(point, Qt.HitTestAccuracy.FuzzyHit)
                if anchor:
                    return _Hit(i, "anchor", anchor=anchor, position=position)
                return _Hit(i, "body", position=position)
        return _Hit(i, "row")

    def _body_documents(self, row: _Row) -> list[tuple[QTextDocument, int, int]]:
        """(document, top, height) of each piece of the row's body, top to bottom."""
        stream = self._streams.get(row.data.id)
        if stream is not None:
            return [(s.document, s.top, s.height) for s in stream.segments]
        geom = row.geom
        return [(self._document(row), 0, geom.body.height() if geom is not None else 0)]

    def _position_in(self, i: int, pos: QPoint) -> int:
        """Character position under ``pos`` in row i's document, clamped to its ends."""
        row = self._rows[i]
        geom = row.geom
        if geom is None:
            return 0
        doc = self._document(row)
        y = pos.y() + self.verticalScrollBar().value() - self._tops[i]
        local = QPointF(pos.x() - self._column_x() - geom.body.x(), y - geom.body.y())
        if local.y() < 0:
            return 0
        if local.y() > geom.body.height():
            return doc.characterCount() - 1
        return max(0, doc.documentLayout().hitTest(local, Qt.HitTestAccuracy.FuzzyHit))

    def mousePressEvent(self, event: QMouseEvent) -> None:
        hit = self._hit(event.position().toPoint())
        self._pressed = hit
        if event.button() == Qt.MouseButton.LeftButton:
            if self._selection is not None:
                self._selection = None
                self.viewport().update()
            if hit is not None and hit.kind in ("body", "anchor") and hit.position >= 0:
                self._selection = _Selection(self._rows[hit.row].data.id, hit.position, hit.position)
                self._selecting = True
        event.accept()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        pos = event.position().toPoint()
        if self._selecting and self._selection is not None:
            i = self._index.get(self._selection.row_id)
            if i is not None:
                self._selection.position = self._position_in(i, pos)
                self._update_row(i)
            return
        hit = self._hit(pos)
        row = -1 if hit is None else hit.row
        action = (hit.row, hit.action) if hit is not None and hit.action is not None else None
        if row != self._hover_row or action != self._hover_action:
            for old in {self._hover_row, row}:
                if 0 <= old < len(self._rows):
                    self._update_row(old)
            self._hover_row = row
            self._hover_action = action
        if hit is not None and hit.kind in ("action", "anchor", "thumb"):
            self.viewport().setCursor(Qt.CursorShape.PointingHandCursor)
        elif hit is not None and hit.kind == "body":
            self.viewport().setCursor(Qt.CursorShape.IBeamCursor)
        else:
            self.viewport().unsetCursor()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        self._selecting = False
        pressed, self._pressed = self._pressed, None
        if event.button() != Qt.MouseButton.LeftButton or pressed is None:
            return
        sel = self._selection
        if sel is not None and not sel.empty:
            return  # a drag selected text: not a click
        self._selection = None
        hit = self._hit(event.position().toPoint())
        if hit is None or hit.row != pressed.row or hit.kind != pressed.kind:
            return
        message_id = self._rows[hit.row].data.id
        if hit.kind == "action" and hit.action is pressed.action and hit.action is not None:
            self.trigger_action(message_id, hit.action)
        elif hit.kind == "anchor" and hit.anchor == pressed.anchor:
            self.activate_anchor(message_id, hit.anchor)
        elif hit.kind == "thumb" and hit.thumb == pressed.thumb:
            self.image_activated.emit(message_id, hit.thumb)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        hit = self._hit(event.position().toPoint())
        if hit is None or hit.kind != "body":
            return
        row = self._rows[hit.row]
        cursor = QTextCursor(self._document(row))
        cursor.setPosition(hit.position)
        cursor.select(QTextCursor.SelectionType.WordUnderCursor)
        self._selection = _Selection(row.data.id, cursor.anchor(), cursor.position())
        self._update_row(hit.row)

    def leaveEvent(self, event: QEvent) -> None:
        if self._hover_row >= 0:
            old, self._hover_row, self._hover_action = self._hover_row, -1, None
            if old < len(self._rows):
                self._update_row(old)
        super().leaveEvent(event)

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        hit = self._hit(event.pos())
        if hit is None:
            return
        message_id = self._rows[hit.row].data.id
        menu = QMenu(self)
        selected = self.selected_text()
        if selected:
            menu.addAction("Copy selection", lambda: self._copy(selected))
        if hit.kind == "anchor":
            index = code_block_index(hit.anchor)
            if index is not None:
                menu.addAction("Copy code", lambda: self.copy_code_block(message_id, index))
            else:
                href = hit.anchor
                menu.addAction("Copy link address", lambda: self._copy(href))
        names = {MessageAction.COPY: "Copy message"}
        for action in self._actions(hit.row):
            label = names.get(action, action.value)
            menu.addAction(label, lambda a=action: self.trigger_action(message_id, a))
        if not menu.isEmpty():
            menu.exec(event.globalPos())

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.matches(QKeySequence.StandardKey.Copy) and self.selected_text():
            self._copy(self.selected_text())
            return
        bar = self.verticalScrollBar()
        if event.key() == Qt.Key.Key_Home:
            self._follow = False
            bar.setValue(0)
            return
        if event.key() == Qt.Key.Key_End:
            self.scroll_to_bottom()
            return
        super().keyPressEvent(event)

    def viewportEvent(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            hit = self._hit(event.pos())  # type: ignore[attr-defined]
            tip = ""
            if hit is not None:
                data = self._rows[hit.row].data
                if hit.kind == "stats" and data.stats is not None:
                    tip = data.stats.details()
                elif hit.kind == "thumb":
                    tip = data.images[hit.thumb].name
                elif hit.kind == "anchor" and code_block_index(hit.anchor) is None:
                    tip = hit.anchor
            if tip:
                QToolTip.showText(event.globalPos(), tip, self.viewport())  # type: ignore[attr-defined]
            else:
                QToolTip.hideText()
            return True
        return super().viewportEvent(event)

    def _copy(self, text: str) -> None:
        QGuiApplication.clipboard().setText(text)
        self.copied.emit(text)
        if self.isVisible():
            QToolTip.showText(self.cursor().pos(), "Copied", self, QRect(), 1200)

    # -- Qt plumbing ----------------------------------------------------------------

    def scrollContentsBy(self, dx: int, dy: int) -> None:
        if not self._adjusting:
            self._follow = self.is_at_bottom()
            self._measure_visible()
        self.viewport().update()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        # Rows keep their old height as the estimate until measured at the new width.
        self._tops_dirty = True
        self._settle()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._restyle()
            self._thumbs.clear()
            self._settle()

    def sizeHint(self) -> QSize:
        return QSize(640, 480)

    def _reindex(self) -> None:
        self._index = {row.data.id: i for i, row in enumerate(self._rows)}
        live = set(self._index)
        for key in [k for k in self._docs if k not in live]:
            self._docs.pop(key).document.deleteLater()


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
