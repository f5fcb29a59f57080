"""What happens when llama.cpp loses an RPC worker: the process that used it ends at once.

llama.cpp's RPC client cannot fail a call. Its dispatcher thread sends every command and
on a failed send or receive calls ``GGML_ABORT("Remote RPC server crashed or returned
malformed response")`` (vendored ggml/src/ggml-rpc/ggml-rpc.cpp, rpc_dispatcher::work);
``rpc_dispatcher::start`` does the same when a connect or handshake fails. ``ggml_abort``
calls the callback set with ``ggml_set_abort_callback`` and then ``abort()``,
unconditionally (ggml/src/ggml.c). Nothing can make the failing call return.

So the RPC client only ever runs in a child process of its own, one per split model
(engine/model_process/child.py). There this callback, for an RPC failure, hands llama.cpp's
message to the reporter (which tells the parent) and ends the child with ``os._exit``:
no parked thread, no memory kept; the OS frees the model and closes its connections, so
the surviving workers are free for another client. A plain ``abort()`` would do the same
for the memory, but it would print gdb's backtrace, leave a core and lose the reason.
Any other abort — a genuine llama.cpp assertion — returns from the callback and aborts
as before (the parent sees the child die and says so).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import sys
import threading
from collections.abc import Callable

log = logging.getLogger("hearth.rpc")

# The messages of ggml-rpc's client-side aborts (ggml-rpc.cpp: RPC_STATUS_ASSERT and
# rpc_dispatcher::start). Only these are contained.
RPC_ABORTS = (
    "Remote RPC server crashed or returned malformed response",
    "Failed to connect to",
    "RPC handshake failed",
)
# The exit status of a process that lost a worker: the parent knows why even if the
# reporter's message never arrived.
WORKER_LOST_EXIT = 75

_lock = threading.Lock()
_installed = False
_callback = None  # the ctypes callback: must stay referenced while installed
_reporter: Callable[[str], None] | None = None


def is_rpc_abort(message: str) -> bool:
    return any(marker in message for marker in RPC_ABORTS)


def _on_abort(raw: bytes | None) -> None:
    message = (raw or b"").decode("utf-8", errors="replace").strip()
    if not is_rpc_abort(message):
        # Not ours to contain: say it as ggml would, then ggml_abort calls abort().
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
        return
    log.error("llama.cpp lost an RPC worker: %s", message)
    reporter = _reporter
    if reporter is not None:
        # On llama.cpp's dispatcher thread (ctypes holds the GIL for us); the reporter must
        # be quick and must not wait on a thread that is inside llama.cpp. The exit below
        # matters more than the message.
        with contextlib.suppress(BaseException):
            reporter(message)
    sys.stderr.flush()
    os._exit(WORKER_LOST_EXIT)  # returning would abort(); nothing else in this process matters now


def install(reporter: Callable[[str], None] | None = None) -> bool:
    """From now on a lost worker ends this process at once, after ``reporter(message)``
    (idempotent; a later call may set the reporter). False without ggml-rpc."""
    global _installed, _callback, _reporter
    with _lock:
        if reporter is not None:
            _reporter = reporter
        if _installed:
            return True
        try:
            from engine.rpc.native_rpc import bindings

            b = bindings()
        except Exception:
            return False
        _callback = ctypes.CFUNCTYPE(None, ctypes.c_char_p)(_on_abort)
        b.set_abort_callback(ctypes.cast(_callback, ctypes.c_void_p))
        _installed = True
        return True
