"""A submitted request as its caller holds it: ``RequestHandle``, its signals, ``wait()`` and
``events()``."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

from PySide6.QtCore import QObject, Signal

from engine.base.errors import EngineError
from engine.requests.completion import Completion
from engine.requests.events import Completed, Event, Failed, Prefill, Queued, Started, TextDelta
from engine.requests.request import ChatRequest


class RequestHandle(QObject):
    """A submitted request. Signals arrive queued in the thread that owns the handle;
    ``events()``/``wait()`` serve code without a Qt event loop (CLI, benchmarks).

    Every event is kept for ``events()`` from the first one on, unless the caller said, in
    the ``connect`` it gave ``submit`` (before any event can arrive), that it reads the
    signals only (``signals_only()``): the window streams a reply through the signals and
    would otherwise fill a queue nobody reads. ``wait()`` needs no queue.
    """

    queued = Signal(int)
    prefill = Signal(int, int, int, int, int)  # completed, total, cached, images done, images total
    started = Signal()
    text_delta = Signal(object)  # the TextDelta itself: its text and, when asked for, logprobs
    completed = Signal(object)  # Completion
    failed = Signal(object)  # EngineError

    def __init__(self, request: ChatRequest, canceller: object | None = None) -> None:
        super().__init__()
        self.request = request
        self._canceller = canceller
        self._events: queue.SimpleQueue[Event] | None = queue.SimpleQueue()  # None: signals only
        self._done = threading.Event()
        self.completion: Completion | None = None
        self.error: EngineError | None = None

    @property
    def request_id(self) -> int:
        return self.request.request_id

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def cancel(self) -> None:
        """Ask the engine to stop this request; it ends with reason "cancelled"."""
        if self._canceller is not None and not self.done:
            self._canceller(self.request_id)  # type: ignore[operator]

    def wait(self, timeout: float | None = None) -> Completion:
        """Block until the request ends; raise its error if it failed."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"request {self.request_id} did not finish in {timeout} s")
        if self.error is not None:
            raise self.error
        assert self.completion is not None
        return self.completion

    def signals_only(self) -> None:
        """Keep no events for ``events()``: this caller reads the signals. Call it in
        ``submit``'s ``connect``, before the engine can publish the first event."""
        self._events = None

    def events(self, timeout: float | None = None) -> Iterator[Event]:
        """Every event in order, until Completed or Failed."""
        events = self._events
        if events is None:
            raise RuntimeError(f"request {self.request_id} was submitted for its signals only")
        while True:
            try:
                event = events.get(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"request {self.request_id}: no event in {timeout} s") from None
            yield event
            if isinstance(event, (Completed, Failed)):
                return

    # Called by the executor thread only.
    def _publish(self, event: Event) -> None:
        if self._done.is_set():
            return
        if isinstance(event, Completed):
            self.completion = event.completion
        elif isinstance(event, Failed):
            self.error = event.error
        if self._events is not None:
            self._events.put(event)
        if isinstance(event, Queued):
            self.queued.emit(event.position)
        elif isinstance(event, Prefill):
            self.prefill.emit(
                event.completed, event.total, event.cached, event.images_done, event.images_total
            )
        elif isinstance(event, Started):
            self.started.emit()
        elif isinstance(event, TextDelta):
            self.text_delta.emit(event)
        elif isinstance(event, Completed):
            self._done.set()
            self.completed.emit(event.completion)
        else:
            self._done.set()
            self.failed.emit(event.error)
