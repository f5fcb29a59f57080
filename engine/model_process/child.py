"""The child process of one split model: ``python -m engine.model_process.child FD``.

It runs the ordinary executor for the ``LoadOrder`` the parent sends first, applies the
executor commands that follow (engine/model_process/protocol.py), and forwards its signals
and each request's events over the inherited socket. Its life is
the executor thread's: it ends when the executor has unloaded (asked by the parent, or the
parent gone: EOF) or failed to load. A lost RPC worker ends it at once with ``os._exit``
after telling the parent (engine/rpc/guard.py): the OS frees the model's memory and closes
its connections to the other workers.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from concurrent.futures import Future
from multiprocessing.connection import Connection

from PySide6.QtCore import Qt

from engine.base.errors import EngineError
from engine.model_process.protocol import (
    PHASE_SIGNALS,
    CancelLoad,
    ChildAnswer,
    ChildEvent,
    ChildLoadFailed,
    ChildLostWorker,
    ChildReady,
    ChildSignal,
    ChildUnloaded,
    ToChild,
    ToParent,
)
from engine.requests.events import Completed, Event, Failed, Prefill, Queued, Started
from engine.requests.handle import RequestHandle
from engine.rpc import guard
from engine.runtime.commands import Cancel, Measure, Observe, Submit, Unload
from engine.runtime.executor import Executor
from engine.runtime.surface import LoadOrder

log = logging.getLogger("hearth.rpc.child")

# Signals are delivered on the emitting thread (the executor's): this process runs no Qt
# event loop, and a send to the parent is all a slot does.
DIRECT = Qt.ConnectionType.DirectConnection
LOST_SEND_TIMEOUT = 1.0  # seconds the abort callback waits for the pipe before leaving anyway


class Link:
    """The socket to the parent, shared by the executor thread, the command thread and
    llama.cpp's dispatcher thread (the abort callback): one message at a time."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()

    def send(self, message: ToParent, timeout: float = -1) -> None:
        if not self._lock.acquire(timeout=timeout):
            return
        try:
            self._conn.send(message)
        except (OSError, ValueError):
            pass  # the parent is gone: the command thread sees EOF and unloads
        except Exception as exc:  # a value pickle refuses: nothing was written yet
            log.exception("could not send %s to the parent", type(message).__name__)
            if (fallback := _unpicklable(message, exc)) is not None:
                with contextlib.suppress(Exception):
                    self._conn.send(fallback)
        finally:
            self._lock.release()

    def recv(self) -> ToChild:
        return self._conn.recv()


def _unpicklable(message: ToParent, exc: Exception) -> ToParent | None:
    """What the parent gets instead of a message that could not be pickled, so that the
    request or the question it answers still ends (one line, not a hang)."""
    error = EngineError(f"The model's process could not send its answer: {exc}")
    if isinstance(message, ChildEvent):
        return ChildEvent(message.request_id, Failed(error))
    if isinstance(message, ChildAnswer):
        return ChildAnswer(message.token, None, error)
    return None


def forward_signals(executor: Executor, link: Link) -> None:
    for name in PHASE_SIGNALS:
        getattr(executor, name).connect(lambda *args, _n=name: link.send(ChildSignal(_n, args)), DIRECT)
    executor.load_failed.connect(lambda error: link.send(ChildLoadFailed(error)), DIRECT)
    executor.unloaded.connect(lambda: link.send(ChildUnloaded()), DIRECT)

    def ready() -> None:  # on the executor thread, after it set what ChildReady carries
        facts = ChildReady(
            executor.reported_memory,
            executor.has_vision,
            executor.chat_traits,
            executor.n_ctx_seq,
            executor.n_seq,
        )
        link.send(facts)

    executor.ready.connect(ready, DIRECT)


def forward_events(handle: RequestHandle, link: Link) -> None:
    """Each of the handle's events, rebuilt from its signals (which carry all of each)."""
    rid = handle.request_id

    def send(event: Event) -> None:
        link.send(ChildEvent(rid, event))

    handle.queued.connect(lambda position: send(Queued(position)), DIRECT)
    handle.prefill.connect(lambda *counts: send(Prefill(*counts)), DIRECT)
    handle.started.connect(lambda: send(Started()), DIRECT)
    handle.text_delta.connect(send, DIRECT)
    handle.completed.connect(lambda completion: send(Completed(completion)), DIRECT)
    handle.failed.connect(lambda error: send(Failed(error)), DIRECT)


def answer(link: Link, token: int, future: Future) -> None:
    def done(f: Future) -> None:
        error = f.exception()
        link.send(ChildAnswer(token, None if error else f.result(), error))

    future.add_done_callback(done)


def serve_commands(executor: Executor, link: Link) -> None:
    """The parent's commands, until it asks to unload or goes away (both unload)."""
    while True:
        try:
            command = link.recv()
        except (EOFError, OSError):
            executor.request_unload()
            return
        if isinstance(command, Submit):
            try:
                executor.submit(command.request, lambda h: forward_events(h, link))
            except EngineError as exc:
                link.send(ChildEvent(command.request.request_id, Failed(exc)))
        elif isinstance(command, Cancel):
            executor.cancel(command.request_id)
        elif isinstance(command, Observe):
            answer(link, command.token, executor.request_stats())
        elif isinstance(command, Measure):
            answer(link, command.token, executor.measure(command.request))
        elif isinstance(command, CancelLoad):
            executor.cancel_load()
        elif isinstance(command, Unload):
            executor.request_unload()


def child_main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: python -m engine.model_process.child FD", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="hearth model child: %(message)s")
    link = Link(Connection(int(argv[0])))
    order = link.recv()
    if not isinstance(order, LoadOrder):
        return 2
    # Before anything talks to a worker: a lost one reports and ends this process.
    guard.install(lambda message: link.send(ChildLostWorker(message), timeout=LOST_SEND_TIMEOUT))
    executor = Executor(order)
    forward_signals(executor, link)
    threading.Thread(
        target=serve_commands, args=(executor, link), name="hearth-child-commands", daemon=True
    ).start()
    executor.start()
    executor.wait()  # loaded, served and unloaded, or failed to load
    return 0


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
