"""What other threads ask of an executor: each command travels through its ``Inbox`` and
is applied on the executor thread between two batches.

The same values, pickled, are what a split model's parent sends its child process
(engine/model_process/protocol.py): there a ``Submit`` has no handle (the child's executor makes
its own) and ``Observe``/``Measure`` carry a ``token`` that the child's answer comes back
under instead of a future.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field

from engine.base.errors import Overloaded
from engine.requests.handle import RequestHandle
from engine.requests.request import ChatRequest


@dataclass(frozen=True)
class Submit:
    request: ChatRequest  # its request_id travels with it: a child's events come back under it
    handle: RequestHandle | None = field(default=None, compare=False)  # where its events go


@dataclass(frozen=True)
class Cancel:
    request_id: int


@dataclass(frozen=True)
class Observe:
    """Answered with the executor's ``EngineStats``."""

    future: Future | None = field(default=None, compare=False)  # in the executor's process
    token: int = 0  # sent to a child process: what its answer comes back under


@dataclass(frozen=True)
class Measure:
    """Answered with the ``PromptSize`` of ``request``'s prompt, which is not run."""

    request: ChatRequest
    future: Future | None = field(default=None, compare=False)
    token: int = 0


@dataclass(frozen=True)
class Unload:
    pass


Command = Submit | Cancel | Observe | Measure | Unload


@dataclass(eq=False)
class Waiting:
    """A submitted request that has no sequence yet (executor thread only)."""

    handle: RequestHandle
    t_submit: float
    cancelled: bool = False


class Inbox:
    """The executor's command queue, and the count of requests submitted and not yet
    ended, which bounds how many may wait: a full inbox refuses, it never blocks."""

    def __init__(self) -> None:
        self._commands: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self._outstanding = 0
        self._lock = threading.Lock()

    def reserve(self, limit: int) -> None:
        """Count one more request, or raise ``Overloaded`` when ``limit`` are outstanding."""
        with self._lock:
            if self._outstanding >= limit:
                raise Overloaded(f"Hearth is busy: {self._outstanding} requests are already waiting.")
            self._outstanding += 1

    def release(self) -> None:
        """A reserved request ended (or was never sent)."""
        with self._lock:
            self._outstanding -= 1

    def put(self, command: Command) -> None:
        self._commands.put(command)

    def get(self, timeout: float | None) -> Command | None:
        """The next command: waits up to ``timeout`` seconds (0: not at all); None if none."""
        try:
            return self._commands.get(timeout=timeout) if timeout else self._commands.get_nowait()
        except queue.Empty:
            return None

    def drain(self) -> Iterator[Command]:
        while (command := self.get(0)) is not None:
            yield command
