"""One engine request seen from asyncio: its events, delivered on the event loop.

The executor publishes each event on the request's handle (its queue, then a Qt signal).
The signals are connected *directly* (they run on the executor thread, for a few
microseconds), and all they do is ``loop.call_soon_threadsafe`` a drain of the handle's
event queue, at most one drain pending at a time. So the loop never waits on the
executor, no Qt event loop is needed (``hearth serve`` runs a plain asyncio loop), and the
window's qasync loop gets the same calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator

from PySide6.QtCore import Qt

from engine import ChatRequest, Completed, Failed, LoadedModel, RequestHandle

_DIRECT = Qt.ConnectionType.DirectConnection


class EngineStream:
    """Submit with ``EngineStream.submit`` (raises the engine's refusal, e.g. ``Overloaded``,
    at once); then ``async for event in stream``; ``cancel()`` whenever the client goes."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: asyncio.Queue = asyncio.Queue()
        self._handle: RequestHandle | None = None
        self._drain_pending = False  # written by both threads; each write is atomic under the GIL
        self._finished = False
        self.server_stopping = False  # cancelled because the server stops, not by its client

    @classmethod
    def submit(cls, model: LoadedModel, request: ChatRequest) -> EngineStream:
        stream = cls(asyncio.get_running_loop())
        stream._handle = model.submit(request, connect=stream._connect)
        return stream

    @property
    def handle(self) -> RequestHandle:
        assert self._handle is not None
        return self._handle

    @property
    def finished(self) -> bool:
        """The engine's last event (Completed or Failed) has been taken from the stream."""
        return self._finished

    def cancel(self, server_stopping: bool = False) -> None:
        """Stop the request (its sequence is freed at the next tick); harmless once it ended.
        ``server_stopping``: the reply is cut short, so the client is told so, not "stop"."""
        if self._handle is not None and not self._handle.done:
            self.server_stopping = self.server_stopping or server_stopping
            self._handle.cancel()

    async def next_event(self) -> object:
        event = await self._queue.get()
        if isinstance(event, Completed | Failed):
            self._finished = True
        return event

    async def __aiter__(self) -> AsyncIterator[object]:
        while not self._finished:
            yield await self.next_event()

    # -- executor thread -------------------------------------------------------------

    def _connect(self, handle: RequestHandle) -> None:
        self._handle = handle
        # Not ``connect(self._wake)``: PySide drops a bound method's connection when its
        # object dies, on whichever thread that happens, possibly while the executor is
        # inside the same signal's emit (a crash). A function that holds the stream weakly
        # lives exactly as long as the handle, which the executor holds while it emits.
        stream = weakref.ref(self)

        def wake(*_args: object) -> None:
            if (alive := stream()) is not None:
                alive._wake()

        for signal in (handle.queued, handle.prefill, handle.started, handle.text_delta, handle.completed,
                       handle.failed):  # fmt: skip
            signal.connect(wake, _DIRECT)

    def _wake(self) -> None:
        if self._drain_pending:
            return
        self._drain_pending = True
        with contextlib.suppress(RuntimeError):  # the loop closed (shutting down): nobody listens
            self._loop.call_soon_threadsafe(self._drain)

    # -- event loop ------------------------------------------------------------------

    def _drain(self) -> None:
        # Reset first: an event published after this line schedules another drain.
        self._drain_pending = False
        handle = self._handle
        assert handle is not None
        try:
            for event in handle.events(timeout=0):
                self._queue.put_nowait(event)
        except TimeoutError:  # nothing more for now
            pass
