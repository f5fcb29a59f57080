"""Stopping a running ``llama_decode`` from another thread, so Stop does not wait for a batch.

One ``llama_decode`` of a 512-token prompt batch takes seconds on two busy cores, and a
cancel is only read between batches. llama.cpp's CPU backend asks an abort callback after
every graph node (``llama_set_abort_callback``) and returns 2 when it says yes, with the
batch's cells removed again. A Python callback there would take the GIL a thousand times
a token, waiting on the GUI thread each time; so the callback is C's ``strlen`` over a
two-byte flag buffer: it returns 0 ("go on") while the first byte is 0 and 1 ("abort")
once another thread sets it. ``strlen``'s result is exactly 0 or 1, which every C ABI
returns a ``bool`` as (in the low bits of the return register), and it reads nothing past
the buffer's terminating zero.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import re
from typing import Any

from engine.native.llama_log import log as llama_log

# What llama.cpp logs, as errors, for a decode its abort callback stopped: status 1 is
# GGML_STATUS_ABORTED and 2 llama_decode's "aborted", which only a Stop causes.
_ABORTED_LINES = re.compile(
    r"compute status: 1$|compute_async failed with error 1$|failed to decode, ret = 2$"
)
_UNDONE_LINE = "removing memory module entries"


def _strlen_address() -> int | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        return ctypes.cast(libc.strlen, ctypes.c_void_p).value
    except (OSError, AttributeError):  # no C library to be found: decodes just run to the end
        return None


class DecodeAbort:
    """The flag a decode polls. ``install`` on the executor thread; ``request`` from any."""

    def __init__(self) -> None:
        self._flag = ctypes.create_string_buffer(2)  # b"\0\0": strlen 0
        self._callback: Any = None  # kept alive as long as the context may call it
        self._quiet = _QuietAborts(self)
        self.installed = False

    def install(self, ll: Any, ctx: Any) -> bool:
        address = _strlen_address()
        if address is None:
            return False
        self._callback = ll.ggml_abort_callback(address)
        ll.llama_set_abort_callback(ctx, self._callback, ctypes.cast(self._flag, ctypes.c_void_p))
        # A Stop is not an error: llama.cpp's lines about the decode it ended stay out of the log.
        llama_log.addFilter(self._quiet)
        self.installed = True
        return True

    def uninstall(self) -> None:
        """Before the context is freed (it holds the callback)."""
        llama_log.removeFilter(self._quiet)
        self.installed = False

    def request(self) -> None:
        """Abort the decode running now (or the next one to start): it returns 2."""
        self._flag[0] = b"\x01"

    def clear(self) -> None:
        self._flag[0] = b"\x00"

    @property
    def requested(self) -> bool:
        return self._flag[0] != b"\x00"


class _QuietAborts(logging.Filter):
    def __init__(self, abort: DecodeAbort) -> None:
        super().__init__()
        self._abort = abort

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if _ABORTED_LINES.search(text):
            return False
        return not (self._abort.requested and _UNDONE_LINE in text)
