"""Where each part of a message goes: a cheap height estimate for rows not laid out yet,
and the exact geometry of a row from its documents."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QFont, QFontMetrics, QTextCursor, QTextDocument

from app.chat.data import MessageAction, MessageData, MessageState
from engine import Role

# In logical pixels.
COLUMN_MAX_WIDTH = 880  # long lines are hard to read; wide windows get margins instead
COLUMN_MIN_WIDTH = 120
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
VERSION_GAP = 10  # between the ‹ 2/3 › switcher and the actions
VERSION_ARROWS = {MessageAction.PREVIOUS_VERSION: "‹", MessageAction.NEXT_VERSION: "›"}
THOUGHT_CHEVRON = 12  # the ▸/▾ before a thinking block's header, drawn, not a glyph
THOUGHT_INDENT = 14  # the thinking's text, right of a thin rule
THOUGHT_GAP = 6  # under the header
THOUGHT_BODY_GAP = 10  # between the open thinking and the answer: they must not read as one


@dataclass(frozen=True)
class Geometry:
    """Where each part of a row goes, relative to the row's top-left in the column."""

    width: int  # the column width this was measured at
    height: int
    header: QRect
    thumbs: tuple[QRect, ...]
    bubble: QRect | None  # user messages sit in a bubble
    body: QRect  # where the documents are drawn; its width is their text width
    pieces: tuple[tuple[int, int], ...]  # (top within the body, height) of each document
    status: QRect | None
    progress: QRect | None
    stats: QRect | None
    footer: QRect  # the actions line
    thought: QRect | None = None  # the thinking block's header (a toggle), above the body
    thought_body: QRect | None = None  # the thinking's text, while the block is open


@dataclass(frozen=True)
class FooterItem:
    """One thing on a row's actions line: a button (``action``), or text that is not one
    (the "2/3" of the version switcher, an arrow that leads nowhere now: ``dim``)."""

    text: str
    rect: QRect
    action: MessageAction | None = None
    dim: bool = False


def piece_gap(above: QTextDocument, below: QTextDocument) -> int:
    """The space between two pieces of one body (a reply streamed in pieces) that one
    document holding both would leave: a document counts neither its first block's top
    margin nor its last block's bottom one, and between two blocks it keeps the larger;
    above a table only the table's own margin counts (and that is in ``below``)."""
    first = below.firstBlock()
    if first.length() == 1 and QTextCursor(first.next()).currentTable() is not None:
        return 0
    return math.ceil(max(above.lastBlock().blockFormat().bottomMargin(), first.blockFormat().topMargin()))


def column_width(viewport_width: int) -> int:
    return max(COLUMN_MIN_WIDTH, min(COLUMN_MAX_WIDTH, viewport_width - 2 * SIDE_MARGIN))


def column_x(viewport_width: int) -> int:
    return max(SIDE_MARGIN, (viewport_width - column_width(viewport_width)) // 2)


class MessageLayout:
    """The fonts of one base font, and the geometry of rows set in them."""

    def __init__(self, font: QFont) -> None:
        self.body_font = QFont(font)
        self.small_font = QFont(font)
        self.small_font.setPointSizeF(max(7.0, font.pointSizeF() * 0.86))
        self.header_font = QFont(self.small_font)
        self.header_font.setWeight(QFont.Weight.DemiBold)
        self.small_fm = QFontMetrics(self.small_font)
        self.header_fm = QFontMetrics(self.header_font)
        self.body_fm = QFontMetrics(self.body_font)

    def estimate_height(self, data: MessageData, width: int) -> int:
        """A cheap guess (no layout) good enough for the scrollbar until measured."""
        user = data.role is Role.USER
        if user:
            width = int(width * BUBBLE_MAX_FRACTION) - 2 * BUBBLE_PAD_X
        chars_per_line = max(10, width // max(1, self.body_fm.averageCharWidth()))
        lines = sum(1 + len(line) // chars_per_line for line in data.text.split("\n"))
        lines += data.text.count("```") * 2  # code block headers and padding
        height = ROW_PAD_TOP + self.header_fm.height() + HEADER_GAP + lines * self.body_fm.lineSpacing()
        if data.images:
            height += THUMB_SIZE + THUMB_GAP
        if data.thought is not None and not user:
            height += self._footer_height() + THOUGHT_GAP
        if user:
            height += 2 * BUBBLE_PAD_Y
        return height + 2 * self._footer_height() + ROW_PAD_BOTTOM

    def measure(
        self,
        data: MessageData,
        documents: Sequence[QTextDocument],
        width: int,
        status_text: str,
        progress: bool,
        thought_document: QTextDocument | None = None,
    ) -> Geometry:
        """Lay the row out at ``width``: its body is ``documents`` stacked (a user's
        message: one, in a bubble no wider than its text), under the thinking block's
        header when it has one, and ``thought_document`` when that block is open."""
        user = data.role is Role.USER
        y = ROW_PAD_TOP
        header = QRect(0, y, width, self.header_fm.height() + 2)
        y += header.height() + HEADER_GAP

        thumbs = self._thumbs(len(data.images), width, y, user)
        if thumbs:
            y = thumbs[-1].bottom() + 1 + THUMB_GAP

        thought = thought_body = None
        if data.thought is not None and not user:
            text_width = self.small_fm.horizontalAdvance(data.thought.summary())
            thought = QRect(
                -ACTION_PAD_X,
                y,
                min(width, THOUGHT_CHEVRON + text_width + 2 * ACTION_PAD_X + 2),
                self._footer_height(),
            )
            y += thought.height() + THOUGHT_GAP
            if thought_document is not None:
                inner = max(40, width - THOUGHT_INDENT)
                if thought_document.textWidth() != inner:
                    thought_document.setTextWidth(inner)
                thought_body = QRect(THOUGHT_INDENT, y, inner, math.ceil(thought_document.size().height()))
                y += thought_body.height() + THOUGHT_BODY_GAP

        bubble: QRect | None = None
        if user and documents:
            doc = documents[0]
            max_text = max(40, int(width * BUBBLE_MAX_FRACTION) - 2 * BUBBLE_PAD_X)
            doc.setTextWidth(max_text)
            text_width = min(max_text, math.ceil(doc.idealWidth()) + 2)
            doc.setTextWidth(text_width)
            doc_height = math.ceil(doc.size().height())
            bubble_width = text_width + 2 * BUBBLE_PAD_X
            bubble = QRect(width - bubble_width, y, bubble_width, doc_height + 2 * BUBBLE_PAD_Y)
            body = QRect(bubble.x() + BUBBLE_PAD_X, y + BUBBLE_PAD_Y, text_width, doc_height)
            pieces: tuple[tuple[int, int], ...] = ((0, doc_height),)
            y = bubble.y() + bubble.height()
        else:
            stacked = []
            body_height = 0
            for k, doc in enumerate(documents):
                # setTextWidth lays the whole document out again even when unchanged.
                if doc.textWidth() != width:
                    doc.setTextWidth(width)
                if k:
                    body_height += piece_gap(documents[k - 1], doc)
                height = math.ceil(doc.size().height())
                stacked.append((body_height, height))
                body_height += height
            body = QRect(0, y, width, body_height)
            pieces = tuple(stacked)
            y += body_height

        status = progress_bar = None
        if status_text:
            y += LINE_GAP
            text_height = self.text_height(status_text, width)
            status = QRect(0, y, width, text_height)
            y += text_height
            if progress:
                progress_bar = QRect(0, y + 4, min(width, PROGRESS_WIDTH), PROGRESS_HEIGHT)
                y += 4 + PROGRESS_HEIGHT + 2

        stats = None
        if not user and (data.stats is not None or data.state is MessageState.STREAMING):
            y += LINE_GAP
            stats = QRect(0, y, width, self.small_fm.height())
            y += stats.height()

        y += 2
        footer = QRect(0, y, width, self._footer_height())
        y += footer.height() + ROW_PAD_BOTTOM
        return Geometry(
            width,
            y,
            header,
            thumbs,
            bubble,
            body,
            pieces,
            status,
            progress_bar,
            stats,
            footer,
            thought,
            thought_body,
        )

    def _thumbs(self, count: int, width: int, top: int, user: bool) -> tuple[QRect, ...]:
        """Image thumbnails in lines under the header: from the right under a user's
        message (where its bubble is), from the left under a reply."""
        step = THUMB_SIZE + THUMB_GAP
        per_line = max(1, (width + THUMB_GAP) // step)
        rects = []
        for k in range(count):
            line, col = divmod(k, per_line)
            x = width - (col + 1) * THUMB_SIZE - col * THUMB_GAP if user else col * step
            rects.append(QRect(x, top + line * step, THUMB_SIZE, THUMB_SIZE))
        return tuple(rects)

    def _footer_height(self) -> int:
        return self.small_fm.height() + 6

    def text_height(self, text: str, width: int) -> int:
        """Height of small text wrapped at ``width`` (status lines may wrap: long errors)."""
        bounds = QRect(0, 0, width, 10_000)
        return self.small_fm.boundingRect(bounds, Qt.TextFlag.TextWordWrap, text).height()

    def footer_items(
        self, geom: Geometry, actions: Sequence[MessageAction], user: bool, version_text: str = ""
    ) -> list[FooterItem]:
        """The footer line: the version switcher ``‹ 2/3 ›`` when ``version_text`` says the
        message has versions (an arrow not in ``actions`` drawn dim), then the action
        buttons; under the user's bubble (right) or under the reply (left)."""
        # (text, action, dim, horizontal padding, gap after)
        parts: list[tuple[str, MessageAction | None, bool, int, int]] = []
        if version_text:
            previous, following = VERSION_ARROWS
            for action, text in ((previous, "‹"), (None, version_text), (following, "›")):
                usable = action is None or action in actions
                pad = ACTION_PAD_X if action is not None else 1
                parts.append((text, action if usable else None, not usable, pad, 0))
            parts[-1] = (*parts[-1][:4], VERSION_GAP)
        for action in actions:
            if action not in VERSION_ARROWS:
                parts.append((action.value, action, False, ACTION_PAD_X, ACTION_SPACING))
        widths = [self.small_fm.horizontalAdvance(text) + 2 * pad for text, _a, _d, pad, _g in parts]
        total = sum(widths) + sum(gap for *_rest, gap in parts[:-1])
        x = geom.width - total if user else -ACTION_PAD_X
        items = []
        for (text, action, dim, _pad, gap), w in zip(parts, widths, strict=True):
            items.append(FooterItem(text, QRect(x, geom.footer.y(), w, geom.footer.height()), action, dim))
            x += w + gap
        return items
