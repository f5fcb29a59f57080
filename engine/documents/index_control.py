"""Pause, resume and cancel for an indexing run, from any thread (no Qt: the CLI uses it too).

The indexer calls ``checkpoint()`` between files and between embedding batches. Work of the file
in progress is only written when the whole file is done, so stopping at any checkpoint leaves
the index consistent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class IndexControl:
    def __init__(self) -> None:
        self._running = threading.Event()
        self._running.set()
        self._cancelled = threading.Event()

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def cancel(self) -> None:
        self._cancelled.set()
        self._running.set()  # a paused run wakes up to notice

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def checkpoint(self, on_pause: Callable[[], None] | None = None) -> bool:
        """Wait while paused (``on_pause`` runs once when the wait starts); False once cancelled."""
        if self._cancelled.is_set():
            return False
        if not self._running.is_set():
            if on_pause is not None:
                on_pause()
            self._running.wait()
        return not self._cancelled.is_set()
