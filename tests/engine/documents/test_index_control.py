"""Pause, resume and cancel, as the indexer's checkpoints see them from another thread."""

from __future__ import annotations

import threading

from engine.documents.index_control import IndexControl


def test_a_fresh_control_lets_the_run_go_on() -> None:
    control = IndexControl()
    assert control.checkpoint() and not control.paused and not control.cancelled


def test_pause_blocks_the_checkpoint_until_resume_and_says_so_once() -> None:
    control = IndexControl()
    control.pause()
    told: list[str] = []
    result: list[bool] = []
    worker = threading.Thread(target=lambda: result.append(control.checkpoint(lambda: told.append("paused"))))
    worker.start()
    worker.join(0.2)
    assert worker.is_alive() and control.paused and told == ["paused"]
    control.resume()
    worker.join(5)
    assert result == [True] and told == ["paused"]


def test_cancel_wakes_a_paused_run_and_stops_it() -> None:
    control = IndexControl()
    control.pause()
    result: list[bool] = []
    worker = threading.Thread(target=lambda: result.append(control.checkpoint()))
    worker.start()
    worker.join(0.2)
    control.cancel()
    worker.join(5)
    assert result == [False] and control.cancelled and not control.paused
    assert control.checkpoint() is False  # and every later checkpoint too
