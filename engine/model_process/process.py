"""A split model's executor, run in a child process (engine/model_process/child.py).

llama.cpp's RPC client ends the process that loses a worker (engine/rpc/guard.py), so every
model whose plan uses workers is loaded in a child of its own. ``ModelProcess`` is the
parent's side: it offers what ``LoadedModel`` uses of an ``Executor`` — the same signals,
state and methods — and relays over the socket (engine/model_process/protocol.py). One reader
thread receives everything the child says and publishes it (signals, request events,
futures), as the executor thread would.

When the child ends without being asked to (a lost worker, a crash, SIGKILL), every
pending request and future fails with one typed error — ``WorkerUnavailable`` naming the
workers that no longer answer a ping, or ``ModelProcessEnded`` — and the model emits
``worker_lost`` then ``unloaded``. The OS has freed the model's memory and closed its
connections, so the surviving workers serve the next client.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import logging
import os
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from multiprocessing.connection import Connection

from PySide6.QtCore import QObject, Signal

from engine.base.errors import (
    Cancelled,
    EngineError,
    InvalidChatRequest,
    LoadFailed,
    Overloaded,
    WorkerUnavailable,
)
from engine.chat.traits import ChatTraits
from engine.model_process.loss import loss_error
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
    child_command,
)
from engine.native.llama_log import ReportedMemory
from engine.requests.events import Completed, Failed
from engine.requests.handle import RequestHandle
from engine.requests.request import ChatRequest
from engine.requests.stats import EngineStats
from engine.rpc.workers import CHILD_ENV
from engine.runtime.commands import Cancel, Measure, Observe, Submit, Unload
from engine.runtime.surface import ExecutorState, LoadOrder, ReadyWait

log = logging.getLogger("hearth.rpc")

UNLOAD_TIMEOUT_S = 30.0  # a child that has not unloaded by then is killed
EXIT_TIMEOUT_S = 5.0  # after its socket closed, the child's exit is waited on this long

_children: weakref.WeakSet[ModelProcess] = weakref.WeakSet()


@atexit.register
def _stop_children() -> None:
    """No child outlives the parent, even one whose model was never unloaded: each is asked
    to unload, then killed (LoadedModel's own atexit has usually done the asking)."""
    for child in list(_children):
        child.request_unload()
    for child in list(_children):
        child.wait(EXIT_TIMEOUT_S)


class ModelProcess(QObject, ReadyWait):
    """An executor in a child process (an ``ExecutorLike``): construct, connect signals, ``start()``."""

    phase_started = Signal(object)  # LoadPhase
    phase_progress = Signal(object, float)  # LoadPhase, 0..1
    phase_finished = Signal(object, float)  # LoadPhase, seconds
    ready = Signal()
    load_failed = Signal(object)  # EngineError
    unloaded = Signal()
    worker_lost = Signal(object)  # WorkerUnavailable or ModelProcessEnded; ``unloaded`` follows

    def __init__(self, order: LoadOrder) -> None:
        super().__init__()
        self.plan = order.plan
        self.force = order.force
        self.queue_capacity = order.queue_capacity
        self.speculation = order.resolved_speculation()
        self._order = replace(order, speculation=self.speculation)  # what the child is sent
        self.state = ExecutorState.LOADING
        self.load_error: EngineError | None = None
        self.reported_memory: ReportedMemory | None = None
        self.chat_traits: ChatTraits | None = None
        self.has_vision = False
        self.n_ctx_seq = self.n_seq = 0
        self.lost_worker = False  # a worker was lost: the child ended, the model is unloaded
        self.pid: int | None = None
        self._process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._reader: threading.Thread | None = None
        self._ready_event = threading.Event()
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()  # guards what follows
        self._handles: dict[int, RequestHandle] = {}
        self._connecting = 0  # submits between their capacity check and their registration
        self._futures: dict[int, Future] = {}
        self._tokens = itertools.count(1)
        self._closed = False  # the child's socket is closed: nothing more will be answered
        self._end_error: EngineError = LoadFailed("No model is loaded.")
        self._unloading = False
        self._said_unloaded = False
        self._lost_message: str | None = None

    # ------------------------------------------------------------------ any thread

    def start(self) -> None:
        ours, theirs = socket.socketpair()
        try:
            self._process = subprocess.Popen(
                child_command(theirs.fileno()),
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=_child_stdout(),  # never ours: a CLI's stdout may be a protocol
                env={**os.environ, **CHILD_ENV},
            )
        except OSError as exc:
            ours.close()
            self._fail_load(
                LoadFailed(f"Could not start the process for {self.plan.model.display_name}: {exc}")
            )
            return
        finally:
            theirs.close()
        self.pid = self._process.pid
        self._conn = Connection(ours.detach())
        _children.add(self)
        self._send(self._order)
        self._reader = threading.Thread(target=self._read, name=f"hearth-model-{self.pid}", daemon=True)
        self._reader.start()

    def cancel_load(self) -> None:
        self._send(CancelLoad())

    def submit(
        self, request: ChatRequest, connect: Callable[[RequestHandle], None] | None = None
    ) -> RequestHandle:
        """As ``Executor.submit``: Overloaded when too many wait, never blocks."""
        request.validate()
        if self.state in (ExecutorState.FAILED, ExecutorState.UNLOADED):
            raise LoadFailed("No model is loaded.")
        limit = self.queue_capacity + max(self.n_seq, self.plan.params.n_seq_max)
        with self._lock:
            if self._closed:
                raise LoadFailed("No model is loaded.")
            outstanding = len(self._handles) + self._connecting
            if outstanding >= limit:
                raise Overloaded(f"Hearth is busy: {outstanding} requests are already waiting.")
            self._connecting += 1
        handle = RequestHandle(request, canceller=self.cancel)
        try:
            if connect is not None:
                connect(handle)
        finally:
            with self._lock:
                self._connecting -= 1
                closed = self._closed
                if not closed:
                    self._handles[request.request_id] = handle
        if closed:  # the child ended while ``connect`` ran: this request shares the end
            handle._publish(Failed(self._end_error))
            return handle
        try:
            self._send(Submit(request))
        except Exception as exc:  # a value pickle refuses: nothing was sent
            with self._lock:
                self._handles.pop(request.request_id, None)
            raise InvalidChatRequest(f"The request could not be sent to the model's process: {exc}") from None
        return handle

    def cancel(self, request_id: int) -> None:
        self._send(Cancel(request_id))

    def request_stats(self) -> Future:
        token, future = self._future()
        self._send(Observe(token=token))
        return future

    def stats(self, timeout: float = 5.0) -> EngineStats:
        return self.request_stats().result(timeout)

    def measure(self, request: ChatRequest) -> Future:
        token, future = self._future()
        self._send(Measure(request, token=token))
        return future

    def request_unload(self) -> None:
        self._unloading = True
        self._send(Unload())

    def wait(self, timeout: float = UNLOAD_TIMEOUT_S) -> bool:
        """Until the child has exited (killed after ``timeout``) and its end is published."""
        process = self._process
        if process is None:
            return True
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning(
                "the process of %s did not unload in %.0f s: killed", self.plan.model.display_name, timeout
            )
            process.kill()
            process.wait()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(EXIT_TIMEOUT_S)
        return True

    # ------------------------------------------------------------------ internals

    def _future(self) -> tuple[int, Future]:
        future: Future = Future()
        with self._lock:
            token = next(self._tokens)
            if self._closed:
                future.set_exception(self._end_error)
            else:
                self._futures[token] = future
        return token, future

    def _send(self, message: ToChild) -> None:
        """Send, or nothing when the child is gone; raises only when pickle refuses."""
        conn = self._conn
        if conn is None:
            return
        # A child gone: the reader sees EOF and fails what is pending.
        with self._send_lock, contextlib.suppress(OSError, ValueError):
            conn.send(message)

    def _fail_load(self, error: EngineError) -> None:
        self.load_error = error
        self.state = ExecutorState.FAILED
        self._ready_event.set()
        self.load_failed.emit(error)

    def _read(self) -> None:
        assert self._conn is not None
        while True:
            try:
                message = self._conn.recv()
            except (EOFError, OSError):
                break
            except Exception:  # a message that does not unpickle: a bug, not the child's end
                log.exception("unreadable message from the model's process")
                continue
            self._dispatch(message)
        self._conn.close()
        self._child_ended()

    def _dispatch(self, message: ToParent) -> None:
        if isinstance(message, ChildEvent):
            done = isinstance(message.event, (Completed, Failed))
            with self._lock:
                handle = (
                    self._handles.pop(message.request_id, None)
                    if done
                    else self._handles.get(message.request_id)
                )
            if handle is not None:
                handle._publish(message.event)
        elif isinstance(message, ChildSignal):
            if message.name in PHASE_SIGNALS:
                getattr(self, message.name).emit(*message.args)
        elif isinstance(message, ChildAnswer):
            with self._lock:
                future = self._futures.pop(message.token, None)
            if future is not None and future.set_running_or_notify_cancel():
                if message.error is not None:
                    future.set_exception(message.error)
                else:
                    future.set_result(message.value)
        elif isinstance(message, ChildReady):
            self.reported_memory, self.has_vision, self.chat_traits = (
                message.reported_memory,
                message.has_vision,
                message.chat_traits,
            )
            self.n_ctx_seq, self.n_seq = message.n_ctx_seq, message.n_seq
            self.state = ExecutorState.READY
            self._ready_event.set()
            self.ready.emit()
        elif isinstance(message, ChildLoadFailed):
            self._fail_load(message.error)
        elif isinstance(message, ChildUnloaded):
            self._said_unloaded = True
        elif isinstance(message, ChildLostWorker):
            self._lost_message = message.message
            if self._process is not None:
                self._process.kill()  # it is leaving with os._exit already; make sure

    def _child_ended(self) -> None:
        """The child's socket closed: it exited (asked to or not). Publish its end."""
        assert self._process is not None
        try:
            rc = self._process.wait(EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:  # closed its socket yet lives on: no use to anyone
            self._process.kill()
            rc = self._process.wait()
        _children.discard(self)
        orderly = self._lost_message is None and (
            self._unloading or self._said_unloaded or self.state is ExecutorState.FAILED
        )
        error = self._end_error = self._ended_error(rc, orderly)
        with self._lock:
            self._closed = True
            handles, self._handles = list(self._handles.values()), {}
            futures, self._futures = list(self._futures.values()), {}
        for handle in handles:
            handle._publish(Failed(error))
        for future in futures:
            if future.set_running_or_notify_cancel():
                future.set_exception(error)
        if orderly:
            if self.state is not ExecutorState.FAILED:
                self.state = ExecutorState.UNLOADED
                self.unloaded.emit()
            return
        log.error("%s (exit status %s)", error.message, rc)
        self.lost_worker = isinstance(error, WorkerUnavailable)
        if self.state is ExecutorState.LOADING:
            self._fail_load(error)
        self.state = ExecutorState.FAILED
        self.worker_lost.emit(error)
        self.state = ExecutorState.UNLOADED
        self.unloaded.emit()

    def _ended_error(self, rc: int, orderly: bool) -> EngineError:
        if orderly:
            return self.load_error or Cancelled("The model was unloaded.")
        return loss_error(self.plan, rc, self._lost_message)


def _child_stdout() -> int:
    """The parent's stderr (llama.cpp and Python print there anyway), or nowhere."""
    try:
        return sys.stderr.fileno() if sys.stderr is not None else subprocess.DEVNULL
    except (OSError, ValueError):  # pytest's captured stderr has no descriptor
        return subprocess.DEVNULL
