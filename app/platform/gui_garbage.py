"""Python's cyclic garbage collected on the GUI thread only.

The collector runs on whichever thread happens to allocate when a threshold is crossed:
often the executor thread or an asyncio worker. A cycle that holds a Qt object made on the
GUI thread (a qasync timer, a widget's helper) is then destroyed there, and a QObject
deleted from another thread leaves its timers registered with the GUI thread's event
dispatcher: the next timer tick dereferences freed memory (a segfault in
``QTimerInfoList::activateTimers``, seen in the window's Local-server tests).

So automatic collection is switched off and a GUI-thread timer collects with the same
generation thresholds instead. Reference counting still frees everything that is not in
a cycle at once, on any thread; only cycles wait for the next tick.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

INTERVAL_MS = 500


class GuiThreadCollector(QObject):
    """Create on the GUI thread; ``stop()`` gives collection back to Python."""

    def __init__(self, parent: QObject | None = None, interval_ms: int = INTERVAL_MS) -> None:
        super().__init__(parent)
        self._thresholds = gc.get_threshold()
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.collect_due)
        self._timer.start()

    def collect_due(self) -> int:
        """Collect the generations whose counts passed their thresholds (as Python would)."""
        counts = gc.get_count()
        generation = -1
        for g in range(3):
            if counts[g] > self._thresholds[g]:
                generation = g
            else:
                break
        return gc.collect(generation) if generation >= 0 else 0

    def stop(self) -> None:
        self._timer.stop()
        gc.collect()  # here, on the GUI thread, before another thread may
        if self._was_enabled:
            gc.enable()
