"""Where a download's bytes go between the socket and the disk: a few reusable buffers,
the thread that writes them, and a ``readinto`` over httpx's own chunks (a proxy's)."""

from __future__ import annotations

import errno
import queue
import threading
from collections.abc import Iterator
from typing import Any


class BufferPool:
    """A few reusable buffers: the receiving thread fills one while the sink writes the
    others, and waits for one to come back when the disk is slower than the network. Fresh
    buffers for every read cost page faults and cache misses that were a large part of a
    download's time; past ~1 MiB a buffer no longer fits a core's cache and it is slower."""

    def __init__(self, count: int, size: int) -> None:
        self.size = size
        self._free: queue.SimpleQueue[memoryview] = queue.SimpleQueue()
        for _ in range(count):
            self._free.put(memoryview(bytearray(size)))

    def take(self) -> memoryview:
        return self._free.get()

    def give(self, buffer: memoryview) -> None:
        self._free.put(buffer)


class Sink:
    """Writes on its own thread while the download thread receives and hashes: the two
    overlap on two cores, and a disk that stalls does not stall the socket."""

    def __init__(self, out: Any, pool: BufferPool) -> None:
        self.out = out
        self.pool = pool
        self.written = 0
        self.error: OSError | None = None
        self._queue: queue.SimpleQueue[tuple[memoryview, int] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="hearth-download-sink", daemon=True)
        self._thread.start()

    def put(self, buffer: memoryview, filled: int) -> None:
        """Write ``buffer[:filled]``; the buffer goes back to the pool once written (or not,
        after a write failed)."""
        if filled and self.error is None:
            self._queue.put((buffer, filled))
        else:
            self.pool.give(buffer)

    def close(self) -> OSError | None:
        self._queue.put(None)
        self._thread.join()
        return self.error

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            buffer, filled = item
            if self.error is None:
                try:
                    write_all(self.out, buffer[:filled])
                    self.written += filled
                except OSError as exc:
                    self.error = exc
            self.pool.give(buffer)  # after a failure too: the receiver may be waiting for one


class ChunkReader:
    """``readinto`` over an iterator of byte chunks (httpx's own transport, which a proxy
    from the environment is sent through)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._rest = memoryview(b"")

    def readinto(self, view: memoryview) -> int:
        while not self._rest:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._rest = memoryview(chunk)
        n = min(len(view), len(self._rest))
        view[:n] = self._rest[:n]
        self._rest = self._rest[n:]
        return n


def write_all(out: Any, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = out.write(view)
        if not n:
            raise OSError(errno.ENOSPC, "short write")
        view = view[n:]
