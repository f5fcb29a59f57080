"""A request's handle (engine/requests/handle.py): each text delta is emitted once, on one
signal; every event is kept for ``events()`` unless the caller reads the signals only."""

from __future__ import annotations

import pytest

from engine.requests.completion import Completion, StopReason, Timings, Usage
from engine.requests.events import Completed, Queued, Started, TextDelta
from engine.requests.handle import RequestHandle
from engine.requests.request import ChatRequest

COMPLETION = Completion("ab", StopReason.LENGTH, Usage(1, 0, 2), Timings(0, 0, 0, 0, 0, 0))
EVENTS = (Queued(1), Started(), TextDelta("a"), TextDelta("b"), Completed(COMPLETION))


def published(handle: RequestHandle) -> dict[str, list]:
    seen: dict[str, list] = {"text": [], "completed": []}
    handle.text_delta.connect(seen["text"].append)
    handle.completed.connect(seen["completed"].append)
    for event in EVENTS:
        handle._publish(event)
    return seen


def test_each_text_delta_is_emitted_once_on_one_signal(qapp) -> None:
    handle = RequestHandle(ChatRequest(prompt="x"))
    assert not hasattr(handle, "delta")
    seen = published(handle)
    assert [d.text for d in seen["text"]] == ["a", "b"] and seen["completed"] == [COMPLETION]


def test_events_published_before_anyone_iterates_are_all_kept(qapp) -> None:
    handle = RequestHandle(ChatRequest(prompt="x"))
    published(handle)  # all of it happens before ``events()`` is first called, as it may
    assert list(handle.events(timeout=0)) == list(EVENTS)
    assert handle.wait(0) is COMPLETION


def test_a_caller_of_the_signals_only_leaves_no_queue(qapp) -> None:
    handle = RequestHandle(ChatRequest(prompt="x"))
    handle.signals_only()  # what the window does in submit's ``connect``
    seen = published(handle)
    assert handle._events is None
    assert [d.text for d in seen["text"]] == ["a", "b"] and seen["completed"] == [COMPLETION]
    assert handle.wait(0) is COMPLETION  # wait() needs no queue
    with pytest.raises(RuntimeError, match="signals only"):
        next(handle.events(timeout=0))
