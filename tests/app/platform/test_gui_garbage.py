"""Cycles are collected on the GUI thread, never on the executor's or a worker's."""

from __future__ import annotations

import gc
import threading

from app.application import create_application
from app.platform.gui_garbage import GuiThreadCollector


class _Cycle:
    def __init__(self, seen: list[str]) -> None:
        self.me = self
        self.seen = seen

    def __del__(self) -> None:
        self.seen.append(threading.current_thread().name)


def test_a_cycle_dropped_while_another_thread_allocates_dies_on_the_gui_thread(qtbot) -> None:
    # (The autouse fixture already runs a collector; a second one keeps the same rules.)
    collector = GuiThreadCollector(interval_ms=20)
    try:
        assert not gc.isenabled()
        seen: list[str] = []
        _Cycle(seen)

        kept: list[list[int]] = []

        def allocate() -> None:  # far past the thresholds: Python would collect on this thread
            kept.extend([i] for i in range(200_000))

        worker = threading.Thread(target=allocate, name="worker")
        worker.start()
        worker.join()
        assert seen == []
        qtbot.waitUntil(lambda: seen != [], timeout=5000)
        assert seen == [threading.main_thread().name]
    finally:
        collector.stop()


def test_stopping_collects_and_gives_collection_back(qtbot) -> None:
    gc.enable()
    collector = GuiThreadCollector()
    seen: list[str] = []
    _Cycle(seen)
    collector.stop()
    assert seen == [threading.main_thread().name] and gc.isenabled()
    gc.disable()  # as the autouse fixture left it


def test_the_application_object_holds_one_collector(qapp) -> None:
    app = create_application()
    assert isinstance(app.garbage, GuiThreadCollector)
    assert create_application().garbage is app.garbage
