"""What happens when llama.cpp loses an RPC worker: the process must survive it.

llama.cpp's RPC client cannot fail a call. Its dispatcher thread sends every command and
on a failed send or receive calls ``GGML_ABORT("Remote RPC server crashed or returned
malformed response")`` (vendored ggml/src/ggml-rpc/ggml-rpc.cpp, rpc_dispatcher::work);
``rpc_dispatcher::start`` does the same when a connect or handshake fails. ``ggml_abort``
calls the callback set with ``ggml_set_abort_callback`` and then ``abort()``,
unconditionally (ggml/src/ggml.c). So nothing can make the failing call return, but the
callback need not return either: for an RPC failure it tells the listeners (the executor of
the model that used the worker) and then parks the native thread for good. The process
lives on; the executor thread that waited on that dispatcher stays blocked inside
llama.cpp forever, and its model's native memory is abandoned, not freed (freeing it while
that thread is inside ``llama_decode`` would be undefined behaviour). Any other abort —
a genuine llama.cpp assertion — returns from the callback and aborts as before.

This is containment, not recovery: see docs/RPC.md for what it costs.
"""

from __future__ import annotations

import ctypes
import logging
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

_lock = threading.Lock()
_installed = False
_callback = None  # the ctypes callback: must stay referenced while installed
_listeners: list[Callable[[str], None]] = []


def is_rpc_abort(message: str) -> bool:
    return any(marker in message for marker in RPC_ABORTS)


def add_listener(listener: Callable[[str], None]) -> None:
    """``listener(message)`` runs on a new Python thread after an RPC abort was contained."""
    with _lock:
        _listeners.append(listener)


def remove_listener(listener: Callable[[str], None]) -> None:
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)


def _on_abort(raw: bytes | None) -> None:
    message = (raw or b"").decode("utf-8", errors="replace").strip()
    if not is_rpc_abort(message):
        # Not ours to contain: say it as ggml would, then ggml_abort calls abort().
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
        return
    log.error("llama.cpp lost an RPC worker: %s", message)
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        # Listeners take locks and emit signals: never on this native thread, which is parked.
        threading.Thread(target=listener, args=(message,), name="hearth-rpc-lost", daemon=True).start()
    threading.Event().wait()  # parked for good: returning would abort the process


def install() -> bool:
    """Contain RPC aborts in this process from now on (idempotent); False without ggml-rpc."""
    global _installed, _callback
    with _lock:
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
