"""Which rows of a message view are laid out when, and where the scrollbar stays meanwhile.

Row heights start as estimates. Rows on screen (and a screen's worth around them) are laid
out exactly before they are painted; the rest are measured in ~8 ms slices while the event
loop is idle, nearest to the viewport first. When a row above the viewport changes height
the scroll position moves with it, so what the user is reading does not jump; while the
user has not scrolled up, the view sticks to the bottom instead.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from PySide6.QtCore import QCoreApplication, QEvent, QObject, QTimer
from PySide6.QtWidgets import QScrollBar, QWidget

from app.chat.message_layout import column_width
from app.chat.message_rows import MessageRows, Row

MEASURE_SLICE_S = 0.008  # background measuring per event-loop turn
# While a reply streams, the GUI thread may use this share of one core: on two cores every
# millisecond it runs is taken from llama.cpp's threads (and the one left waiting at the
# next barrier spins), so it shows in decode tokens/s about one for one. Measured as the
# thread's CPU time, which counts what a wall clock around the settle missed: the paints
# and the backing store's flush to the X server that follow it, the deltas in between, and
# whatever else the window did meanwhile. A settle that costs 3 ms all told waits 0.2 s.
STREAM_BUDGET = 0.015
SLOW_SETTLE_MAX_REST_S = 0.4  # the longest wait between two streamed settles
# How often the engine sends a streaming reply's text to the window: each delta wakes the
# GUI thread, and the view shows text no more often on two cores (it settles every
# 0.1-0.4 s), so more deltas would cost wakeups and show nothing sooner.
STREAM_TEXT_INTERVAL_S = 0.1


class ViewportLayout(QObject):
    """Lays out ``rows`` with ``measure(row, keep)`` (``keep=False``: a background
    measure, which need not keep a document) for a scroll area's bar and viewport;
    ``apply_pending()`` brings in what waited for a ``settle_later`` (streamed text)."""

    def __init__(
        self,
        rows: MessageRows,
        bar: QScrollBar,
        viewport: QWidget,
        measure: Callable[[Row, bool], None],
        apply_pending: Callable[[], None],
        cpu_clock: Callable[[], float] = time.thread_time,
    ) -> None:
        super().__init__(viewport)
        self._rows = rows
        self._bar = bar
        self._viewport = viewport
        self._measure = measure
        self._apply_pending = apply_pending
        self._cpu_clock = cpu_clock  # this (the GUI) thread's CPU seconds
        self.follow = True  # stick to the bottom while the user has not scrolled up
        self.adjusting = False  # the scrollbar moves because of a layout, not the user
        self._measuring = False
        self._settle_posted = False
        self._next_settle = 0.0  # perf_counter() before which a settle_later() waits
        self._settled_at = 0.0  # when the last streamed settle ended
        self._cpu_at_settle = 0.0  # the thread's CPU time then
        self._slow = QTimer(self)
        self._slow.setSingleShot(True)
        self._slow.timeout.connect(self._settle_if_posted)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._measure_in_background)

    def width(self) -> int:
        return column_width(self._viewport.width())

    def measured(self) -> int:
        """How many rows have exact heights for the current width (the rest are estimates)."""
        width = self.width()
        return sum(1 for r in self._rows if r.is_exact(width))

    def settle(self, repaint: bool = True) -> None:
        """After any change: exact heights on screen, scrollbar, repaint, and background
        measuring of the rest. ``repaint=False`` (streamed text): the viewport is painted
        again whole only if a height or the scroll position changed; else ``measure`` asked
        for what changed."""
        self.set_scroll(self._rows.total_height() if self.follow else self._bar.value())
        self.measure_visible(repaint)
        self._commit_heights(self._anchor(), repaint)
        if not self._timer.isActive() and self.measured() < len(self._rows):
            self._timer.start()

    def settle_later(self) -> None:
        """Settle on the next event-loop turn, once however often this is asked for until
        then (as update() does for painting).

        Streamed text is paced by what it costs: when the GUI thread used ``c`` CPU
        seconds from one streamed settle to the end of the next (that settle, the paints
        and deltas between, anything else), the one after waits until ``c /
        STREAM_BUDGET`` has passed since (at most ``SLOW_SETTLE_MAX_REST_S``). A fast
        machine gets updates as often as the engine sends text; a slow one, or a tail that
        is one long paragraph or table, gets fewer, larger updates, so decode, input and
        painting keep up."""
        if self._settle_posted:
            return
        self._settle_posted = True
        wait = self._next_settle - time.perf_counter()
        if wait > 0:
            self._slow.start(math.ceil(wait * 1000))
        else:
            QCoreApplication.postEvent(self, QEvent(QEvent.Type.LayoutRequest))

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:
            self._settle_if_posted()
            return True
        return super().event(event)

    def _settle_if_posted(self) -> None:
        if self._settle_posted:
            self.settle_now()

    def settle_now(self) -> None:
        """What ``settle_later`` asked for, now."""
        self._settle_posted = False
        started, cpu_started = time.perf_counter(), self._cpu_clock()
        self._apply_pending()
        self.settle(repaint=False)
        ended, cpu = time.perf_counter(), self._cpu_clock()
        # The first of a stream (or after a pause) counts itself: what came before was not text.
        first = started - self._settled_at > 2 * SLOW_SETTLE_MAX_REST_S
        cycle = cpu - (cpu_started if first else self._cpu_at_settle)
        self._settled_at, self._cpu_at_settle = ended, cpu
        self._next_settle = ended + min(SLOW_SETTLE_MAX_REST_S, cycle / STREAM_BUDGET)

    def set_scroll(self, value: int) -> None:
        self.adjusting = True
        try:
            height = self._viewport.height()
            self._bar.setRange(0, max(0, self._rows.total_height() - height))
            self._bar.setPageStep(max(1, height))
            self._bar.setValue(value)
        finally:
            self.adjusting = False

    def measure_visible(self, repaint: bool = True) -> None:
        """Lay out exactly the rows on screen (and a screen's worth around them) so they
        paint at their real size; repeat while that moves the viewport onto new rows.
        ``repaint=False``: the rows' ``measure`` asks for what a height change repaints."""
        if self._measuring or not self._rows:
            return
        self._measuring = True
        try:
            width = self.width()
            height = self._viewport.height()
            for _ in range(8):
                anchor = self._anchor()
                if self.follow:
                    self.set_scroll(self._rows.total_height())
                value = self._bar.value()
                first = self._rows.row_at_y(max(0, value - height // 2))
                last = self._rows.row_at_y(value + height + height // 2)
                if not self._measure_rows(range(first, last + 1), width, keep=True):
                    break
                self._commit_heights(anchor, repaint)
        finally:
            self._measuring = False

    def _measure_in_background(self) -> None:
        """Measure rows that are off screen, nearest first, for at most one slice."""
        if not self._rows:
            return
        anchor = self._anchor()
        value = self._bar.value()
        first = self._rows.row_at_y(value)
        last = self._rows.row_at_y(value + self._viewport.height())
        order = [*range(first - 1, -1, -1), *range(last + 1, len(self._rows)), *range(first, last + 1)]
        deadline = time.perf_counter() + MEASURE_SLICE_S
        if self._measure_rows(order, self.width(), keep=False, deadline=deadline):
            self._commit_heights(anchor)

    def _measure_rows(
        self, order: range | list[int], width: int, keep: bool, deadline: float | None = None
    ) -> bool:
        """Measure the rows in ``order`` not exact at ``width``, until ``deadline`` (then
        the rest on a later turn); whether any height changed."""
        changed = False
        for i in order:
            row = self._rows[i]
            if row.is_exact(width):
                continue
            if deadline is not None and time.perf_counter() > deadline:
                self._timer.start()
                break
            old = row.height
            self._measure(row, keep)
            changed = changed or row.height != old
        return changed

    def _commit_heights(self, anchor: tuple[int, int] | None, repaint: bool = True) -> None:
        """Heights changed: update the scrollbar, keeping the bottom in view when following,
        else the row at the top of the viewport where it was on screen (which, if it moves,
        repaints the viewport whatever ``repaint`` says)."""
        self._rows.heights_changed()
        if self.follow or anchor is None:
            self.set_scroll(self._rows.total_height())  # clamped to the maximum
        else:
            index, offset = anchor
            self.set_scroll(self._rows.top(min(index, len(self._rows))) + offset)
        if repaint:
            self._viewport.update()

    def _anchor(self) -> tuple[int, int] | None:
        """(row at the top of the viewport, how far into it the viewport starts)."""
        if not self._rows:
            return None
        value = self._bar.value()
        index = self._rows.row_at_y(value)
        return index, value - self._rows.top(index)
