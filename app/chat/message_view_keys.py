"""The keyboard in the message view: keys, the Tab walk over what each message offers,
the focus ring and what a screen reader is told (``MessageViewKeyboard``, a part of
``MessageView``; the stops themselves are ``focus_stops``)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAccessible, QAccessibleEvent, QFocusEvent, QKeyEvent, QKeySequence

from app.chat.data import MessageAction, MessageId
from app.chat.focus_stops import (
    KEYBOARD_FOCUS,
    THOUGHT,
    FocusStop,
    all_stops,
    describe,
    first_visible_stop,
    row_stops,
    stop_y,
    stops_of,
)
from app.chat.message_layout import VERSION_ARROWS, MessageLayout
from app.chat.message_rows import MessageRows
from app.chat.viewport_layout import ViewportLayout

__all__ = ["MessageViewKeyboard"]


class MessageViewKeyboard:
    """Mixed into ``MessageView``: it owns where the keyboard is (``_focus``) and whether
    the ring shows (``_ring``)."""

    _rows: MessageRows
    _scroll: ViewportLayout
    _layout: MessageLayout
    _focus: FocusStop | None
    _ring: bool

    def keyPressEvent(self, event: QKeyEvent) -> None:
        self._show_ring(True)
        if event.matches(QKeySequence.StandardKey.Copy) and self.selected_text():
            self._copy(self.selected_text())
            return
        activate = (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Space)
        plain = event.modifiers() in (Qt.KeyboardModifier.NoModifier, Qt.KeyboardModifier.KeypadModifier)
        if event.key() in activate and plain and self._activate_focused():
            return
        arrows = {Qt.Key.Key_Left: False, Qt.Key.Key_Right: True}
        if event.key() in arrows and plain:
            self._step(arrows[Qt.Key(event.key())])  # within the view: it does not leave it
            return
        bar = self.verticalScrollBar()
        if event.key() == Qt.Key.Key_Home:
            self._scroll.follow = False
            bar.setValue(0)
            return
        if event.key() == Qt.Key.Key_End:
            self.scroll_to_bottom()
            return
        super().keyPressEvent(event)

    # Tab walks what a message offers — its thinking header, its ‹ › version arrows and
    # its actions (Copy, Edit, Regenerate, Continue, Delete), message after message from
    # the first one on screen — and Enter or Space does what a click would; after the last
    # (or before the first) Tab leaves the view as it would have. Replies are painted, not
    # widgets, so the view keeps this focus itself and draws it.

    def focused_item(self) -> FocusStop | None:
        """Where the keyboard is inside the view: (message id, the action or THOUGHT)."""
        return self._focus

    def focus_item(self, message_id: MessageId, kind: MessageAction | str) -> bool:
        """Put the keyboard on one thing a message offers (as Tab would); False if it
        offers no such thing now."""
        stop = (message_id, kind)
        if stop not in row_stops(self._rows, message_id):
            return False
        self._focus_on(stop)
        return True

    def focusNextPrevChild(self, next: bool) -> bool:
        if self._step(next):
            return True
        self._focus_on(None)
        return super().focusNextPrevChild(next)

    def _step(self, forward: bool) -> bool:
        """The keyboard to the next (previous) stop; False past the last (first)."""
        stops = all_stops(self._rows)
        self._show_ring(True)
        if not stops:
            return False
        current = self._focus
        if current in stops:
            k = stops.index(current) + (1 if forward else -1)
        else:
            k = self._first_visible_stop(stops, forward)
        if 0 <= k < len(stops):
            self._focus_on(stops[k])
            return True
        return False

    def _first_visible_stop(self, stops: list[FocusStop], forward: bool) -> int:
        value = self.verticalScrollBar().value()
        return first_visible_stop(self._rows, stops, forward, value, value + self.viewport().height())

    def _focus_on(self, stop: FocusStop | None) -> None:
        old, self._focus = self._focus, stop
        for changed in {old and old[0], stop and stop[0]} - {None}:
            i = self._rows.find(changed)
            if i is not None:
                self._update_row(i)
        self._announce(stop)
        if stop is None or self._rows.find(stop[0]) is None:
            return
        y = stop_y(self._rows, stop)
        bar = self.verticalScrollBar()
        line = self._layout.small_fm.height() + 6
        if not (bar.value() <= y and y + line <= bar.value() + self.viewport().height()):
            self._scroll.follow = False
            self._scroll.set_scroll(max(0, y - max(24, self.viewport().height() // 3)))
            self._scroll.measure_visible()

    def _announce(self, stop: FocusStop | None) -> None:
        data = None if stop is None else self.message(stop[0])
        self.setAccessibleDescription(describe(stop, data, self.thought_open, self.version_text))
        if QAccessible.isActive():
            QAccessible.updateAccessibility(QAccessibleEvent(self, QAccessible.Event.DescriptionChanged))

    def _activate_focused(self) -> bool:
        """Enter or Space on the stop the keyboard is on: what a click on it does."""
        stop = self._focus
        if stop is None or stop not in row_stops(self._rows, stop[0]):
            return False
        message_id, kind = stop
        if kind == THOUGHT:
            self.toggle_thought(message_id)
        else:
            assert isinstance(kind, MessageAction)
            self.trigger_action(message_id, kind)
        return True

    def _keep_focus_after_replace(self, index: int, kind: MessageAction | str) -> None:
        """The ‹ › arrows show another version in place of the row the keyboard was on:
        the keyboard stays on the same arrow of the version now shown (Enter steps on)."""
        if index < len(self._rows):
            message_id = self._rows[index].data.id
            for candidate in (kind, *VERSION_ARROWS):
                if (message_id, candidate) in stops_of(self._rows, index):
                    self._focus_on((message_id, candidate))
                    return
        self._focus_on(None)

    def has_focus_ring(self) -> bool:
        """Whether the view shows that the keyboard is on it."""
        return self._ring and self.hasFocus()

    def _show_ring(self, shown: bool) -> None:
        if shown != self._ring:
            self._ring = shown
            self.viewport().update()

    def focusInEvent(self, event: QFocusEvent) -> None:
        super().focusInEvent(event)
        reason = event.reason()
        if reason in KEYBOARD_FOCUS:
            self._show_ring(True)
        stops = all_stops(self._rows)
        if stops and reason in (Qt.FocusReason.TabFocusReason, Qt.FocusReason.BacktabFocusReason):
            forward = reason is Qt.FocusReason.TabFocusReason
            self._focus_on(stops[self._first_visible_stop(stops, forward)])

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        if event.reason() is not Qt.FocusReason.PopupFocusReason:  # the context menu keeps it
            self._show_ring(False)
            self._focus_on(None)
