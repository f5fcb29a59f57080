"""Where the keyboard can be inside the message view, which paints its replies rather than
making widgets of them: each message's thinking header, its ‹ › version arrows and its
actions, in the order they are drawn, with what a screen reader is told about each.
Pure functions of the view's rows, so the view keeps only the focus it holds and draws."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt

from app.chat.data import MessageAction, MessageData, MessageId
from app.chat.message_layout import VERSION_ARROWS
from app.chat.message_rows import MessageRows
from engine import Role

THOUGHT = "thought"  # the thinking header, as a place the keyboard can be
FocusStop = tuple[MessageId, MessageAction | str]  # a message and one thing it offers
ACTION_NAMES = {
    MessageAction.COPY: "Copy the message",
    MessageAction.EDIT: "Edit the message",
    MessageAction.REGENERATE: "Regenerate the reply",
    MessageAction.CONTINUE: "Continue the reply",
    MessageAction.DELETE: "Delete the message",
    MessageAction.PREVIOUS_VERSION: "Previous version",
    MessageAction.NEXT_VERSION: "Next version",
}
# Focus that came by keyboard shows the view's focus ring; a click alone does not.
KEYBOARD_FOCUS = (
    Qt.FocusReason.TabFocusReason,
    Qt.FocusReason.BacktabFocusReason,
    Qt.FocusReason.ShortcutFocusReason,
)


def author(data: MessageData) -> str:
    if data.role is Role.ASSISTANT:
        return data.author or "Assistant"
    return "You" if data.role is Role.USER else "System"


def stops_of(rows: MessageRows, i: int) -> list[FocusStop]:
    """What Tab stops at in row i, in the order it is drawn."""
    row = rows[i]
    message_id = row.data.id
    stops: list[FocusStop] = []
    if row.message.thought is not None:
        stops.append((message_id, THOUGHT))
    actions = rows.actions(i)
    stops += [(message_id, a) for a in actions if a in VERSION_ARROWS]
    stops += [(message_id, a) for a in actions if a not in VERSION_ARROWS]
    return stops


def row_stops(rows: MessageRows, message_id: MessageId) -> list[FocusStop]:
    i = rows.find(message_id)
    return [] if i is None else stops_of(rows, i)


def all_stops(rows: MessageRows) -> list[FocusStop]:
    return [stop for i in range(len(rows)) for stop in stops_of(rows, i)]


def stop_y(rows: MessageRows, stop: FocusStop) -> int:
    """Content y of a stop: its thinking header or its actions line (-1: gone)."""
    i = rows.find(stop[0])
    if i is None:
        return -1
    geom = rows[i].geom
    top = rows.top(i)
    if geom is None:
        return top
    if stop[1] == THOUGHT:
        return top + (geom.thought.y() if geom.thought is not None else 0)
    return top + geom.footer.y()


def first_visible_stop(
    rows: MessageRows, stops: list[FocusStop], forward: bool, top: int, bottom: int
) -> int:
    """The first stop between content y ``top`` and ``bottom`` (the last, going back);
    else the first or last of all."""
    seen = [k for k, stop in enumerate(stops) if top <= stop_y(rows, stop) < bottom]
    if seen:
        return seen[0] if forward else seen[-1]
    return 0 if forward else len(stops) - 1


def describe(
    stop: FocusStop | None,
    data: MessageData | None,
    thought_open: Callable[[MessageId], bool],
    version_text: Callable[[MessageId], str],
) -> str:
    """What a screen reader is told about the view: the thing the keyboard is on."""
    if stop is None:
        return ""
    message_id, kind = stop
    who = "" if data is None else author(data)
    if kind == THOUGHT:
        what = "Hide the thinking" if thought_open(message_id) else "Show the thinking"
    else:
        assert isinstance(kind, MessageAction)
        what = ACTION_NAMES.get(kind, kind.value)
        if kind in VERSION_ARROWS:
            what += f" (now {version_text(message_id)})"
    return f"{what}, message from {who}" if who else what
