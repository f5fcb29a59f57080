"""What a message view shows, without Qt widgets: its rows in order, where each starts, and
what each row says (status line, statistics) and offers (actions)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from app.chat.data import (
    STOP_REASON_TEXT,
    MessageAction,
    MessageData,
    MessageId,
    MessageState,
    ReplyStats,
    Thought,
    format_prefill,
)
from app.chat.message_layout import Geometry
from engine import Role, StopReason


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


@dataclass(eq=False)
class Row:
    data: MessageData  # as laid out
    height: int = 0
    geom: Geometry | None = None  # None: height is an estimate (or stale)
    # Streamed text held until the next layout on purpose: until then the row keeps the
    # geometry and documents it was laid out with, so a paint in between neither draws
    # text where it was not measured nor lays it out ahead of time.
    pending: list[str] = field(default_factory=list)
    pending_thought: Thought | None = None  # the thinking as it now stands, held the same way
    previous: Geometry | None = None  # what geom was before the last change: what is on screen

    @property
    def message(self) -> MessageData:
        """The message with its streamed text and thinking, laid out or not."""
        data = self.data
        if self.pending:
            data = replace(data, text=data.text + "".join(self.pending))
        if self.pending_thought is not None:
            data = replace(data, thought=self.pending_thought)
        return data

    def is_exact(self, width: int) -> bool:
        return self.geom is not None and self.geom.width == width


class MessageRows:
    """The rows of one conversation, newest last, found by message id; with the content y
    where each starts (recomputed only after a height changed) and what pending replies
    are waiting for."""

    def __init__(self) -> None:
        self._rows: list[Row] = []
        self._index: dict[MessageId, int] = {}
        self._tops: list[int] = [0]
        self._tops_dirty = False
        self.progress: dict[MessageId, PrefillProgress] = {}
        self._growing: set[Row] = set()  # rows holding streamed text
        # Replies pending or streaming, kept as rows change: every painted row asks.
        self._active: set[MessageId] = set()

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i: int) -> Row:
        return self._rows[i]

    def __iter__(self) -> Iterator[Row]:
        return iter(self._rows)

    def find(self, message_id: MessageId) -> int | None:
        return self._index.get(message_id)

    def get(self, message_id: MessageId) -> Row | None:
        i = self._index.get(message_id)
        return None if i is None else self._rows[i]

    def ids(self) -> set[MessageId]:
        return set(self._index)

    # -- changes ------------------------------------------------------------------------

    def reset(self, rows: Iterable[Row]) -> None:
        self._rows = list(rows)
        self._growing.clear()
        self._reindex()
        self.progress.clear()

    def append(self, row: Row) -> None:
        self._rows.append(row)
        self._index[row.data.id] = len(self._rows) - 1
        self._set_active(row.data)
        self._tops_dirty = True

    def remove(self, i: int) -> None:
        self.truncate(i, i + 1)

    def truncate(self, start: int, end: int | None = None) -> list[Row]:
        """Take out rows ``start`` to ``end`` (default: the last); those rows."""
        gone = self._rows[start:end]
        del self._rows[start:end]
        for row in gone:
            self._growing.discard(row)
            self.waited(row.data.id)
        self._reindex()
        return gone

    def update(self, row: Row, message: MessageData) -> None:
        row.data = message
        row.pending.clear()
        row.pending_thought = None
        self._growing.discard(row)
        self._set_active(message)
        if not message.state.active:
            self.waited(message.id)
        self.invalidate(row)

    def _set_active(self, message: MessageData) -> None:
        if message.state.active:
            self._active.add(message.id)
        else:
            self._active.discard(message.id)

    def append_text(self, row: Row, text: str) -> bool:
        """Streamed text for a reply, held until ``apply_pending``; the reply is STREAMING
        from now on. Whether this started it."""
        started = self._start(row)
        row.pending.append(text)
        self._growing.add(row)
        return started

    def set_thought(self, row: Row, thought: Thought) -> bool:
        """A reply's thinking as it now stands, held like streamed text. Whether this
        started the reply streaming."""
        started = self._start(row)
        row.pending_thought = thought
        self._growing.add(row)
        return started

    def _start(self, row: Row) -> bool:
        started = row.data.state is not MessageState.STREAMING
        if started:
            row.data = replace(row.data, state=MessageState.STREAMING)
            self._active.add(row.data.id)
            self.waited(row.data.id)
        return started

    def apply_pending(self) -> list[Row]:
        """Streamed text into the rows it was held for, to be laid out; those rows."""
        grown = [row for row in self._growing if row.pending or row.pending_thought is not None]
        for row in grown:
            row.data = row.message
            row.pending.clear()
            row.pending_thought = None
            self.invalidate(row)
        self._growing.clear()
        return grown

    def waited(self, message_id: MessageId) -> None:
        """The reply is no longer waiting: its prompt progress goes (why it queued is in
        its data, said only while it is PENDING)."""
        self.progress.pop(message_id, None)

    def invalidate(self, row: Row) -> None:
        """The row's content changed: it is measured again before it is painted."""
        if row.geom is not None:
            row.previous = row.geom
        row.geom = None
        self._tops_dirty = True

    def set_geometry(self, row: Row, geom: Geometry) -> None:
        row.geom = geom
        self.set_height(row, geom.height)

    def set_height(self, row: Row, height: int) -> None:
        if row.height != height:
            row.height = height
            self._tops_dirty = True

    def heights_changed(self) -> None:
        self._tops_dirty = True

    def _reindex(self) -> None:
        self._index = {row.data.id: i for i, row in enumerate(self._rows)}
        self._active = {row.data.id for row in self._rows if row.data.state.active}
        self._tops_dirty = True

    # -- where rows are -------------------------------------------------------------------

    def top(self, i: int) -> int:
        """Content y where row i starts (``len(self)``: the end of the last row)."""
        self._ensure_tops()
        return self._tops[i]

    def total_height(self) -> int:
        return self.top(len(self._rows))

    def row_at_y(self, y: int) -> int:
        """Index of the row covering content y (clamped to the rows that exist; -1: none)."""
        self._ensure_tops()
        if not self._rows:
            return -1
        return max(0, min(len(self._rows) - 1, bisect.bisect_right(self._tops, y) - 1))

    def _ensure_tops(self) -> None:
        if self._tops_dirty:
            self._tops = [0]
            total = 0
            for row in self._rows:
                total += row.height
                self._tops.append(total)
            self._tops_dirty = False

    # -- what a row says and offers ---------------------------------------------------

    def busy(self) -> bool:
        return bool(self._active)

    def status(self, row: Row) -> tuple[str, str]:
        """(text, colour role) of the status line: "muted", "warning" or "error"."""
        data = row.data
        state = data.state
        if state is MessageState.PENDING:
            if data.activity:
                return data.activity, "muted"
            progress = self.progress.get(data.id)
            if progress is not None:
                return progress.text(), "muted"
            if data.waiting is not None:
                return data.waiting.text(), "muted"
            return "waiting for the model…", "muted"
        if state is MessageState.INTERRUPTED:
            # Why, when it is known (a remote server that went away mid-reply).
            return (data.error.rstrip(".") or "Interrupted") + " — continue or regenerate", "warning"
        if state is MessageState.FAILED:
            return data.error or "The reply failed.", "error"
        if state is MessageState.CANCELLED:
            return "Stopped", "muted"
        return "", "muted"

    @staticmethod
    def stats_line(row: Row) -> str:
        stats = row.data.stats
        if stats is None:
            return ""
        if row.data.state is MessageState.CANCELLED and stats.stop_reason is StopReason.CANCELLED:
            # "Stopped" is already the status line; do not say it twice.
            return stats.summary().replace(" · " + STOP_REASON_TEXT[StopReason.CANCELLED], "")
        return stats.summary()

    def actions(self, i: int) -> tuple[MessageAction, ...]:
        """What row i offers now. While a reply is being written only Copy: the rest would
        change the conversation under it (the version arrows show, disabled)."""
        row = self._rows[i]
        data = row.data
        actions = [MessageAction.COPY] if data.text or row.pending else []
        if self.queued_for_a_slot(row):
            actions.append(MessageAction.MORE_PARALLEL)
        if self.busy():
            return tuple(actions)
        if data.role is Role.USER:
            actions.append(MessageAction.EDIT)
        elif data.role is Role.ASSISTANT:
            cut_off = data.stats is not None and data.stats.stop_reason is StopReason.LENGTH
            resumable = data.state in (MessageState.INTERRUPTED, MessageState.CANCELLED) or cut_off
            # Only the conversation's last message: after a reply was deleted, an older
            # reply is followed by the user's message and has nothing to continue into.
            if resumable and i == len(self._rows) - 1:
                actions.append(MessageAction.CONTINUE)
            if data.can_regenerate:
                actions.append(MessageAction.REGENERATE)
        if data.role is not Role.SYSTEM:
            actions.append(MessageAction.DELETE)
        if data.version > 1:
            actions.append(MessageAction.PREVIOUS_VERSION)
        if data.version < data.version_count:
            actions.append(MessageAction.NEXT_VERSION)
        return tuple(actions)

    def queued_for_a_slot(self, row: Row) -> bool:
        """A pending reply that waits for a slot, and it is known why (not yet reading)."""
        data = row.data
        waiting = data.waiting
        return (
            data.state is MessageState.PENDING
            and waiting is not None
            and waiting.explained
            and data.id not in self.progress
        )

    @staticmethod
    def version_text(row: Row) -> str:
        """``2/3`` under a message that has versions ("" for one that has none)."""
        data = row.data
        return f"{data.version}/{data.version_count}" if data.version_count > 1 else ""


def with_state(
    data: MessageData,
    state: MessageState,
    stats: ReplyStats | None,
    error: str,
    text: str | None,
    thought: Thought | None = None,
) -> MessageData:
    """A reply ended (or restarted): its statistics kept unless new ones come, its error
    only while it is FAILED, its text and thinking unless the final ones are given."""
    return replace(
        data,
        state=state,
        text=data.text if text is None else text,
        stats=stats if stats is not None else data.stats,
        error=error or (data.error if state is MessageState.FAILED else ""),
        thought=data.thought if thought is None else thought,
    )
