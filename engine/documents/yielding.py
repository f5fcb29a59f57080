"""Indexing that gives way to a generating chat: the embedder waits between its decodes.

On a machine with few cores a chat's decode and the embedder's decodes are two native thread
pools on the same cores; llama.cpp's threads spin at every barrier, so a chat sharing its cores
with the embedder decodes several times slower (benchmarks/bench_embed_interference.py measures
it). The issue's target is at most 10% slower. Lowering the embedder's threads does not get
there when the chat already uses every core; pausing does. So, by default, before each decode
(one micro-batch of at most ``n_batch`` tokens, a fraction of a second) the embedder asks
``busy()`` whether a chat is generating and, while it is, sleeps; a chat that starts mid-decode
shares the cores for the rest of that one decode only.

Where cores are spare (more than the chat's threads), ``threads_while_busy`` lets the embedder
keep going on that many threads instead of waiting. ``max_wait_s`` bounds a wait, so indexing
still advances (one decode per wait) under a chat that never stops, as an API serving
requests back to back: at about 0.3 s a decode per 30 s of waiting, the chat loses ~1%.

Threads lowered for a chat are given back at the first decode that finds no chat generating
(a run that ends beside a chat leaves them lowered until the next run's first decode).

``CourteousEmbedder`` is what an indexing run is given; questions are embedded by the embedder
itself and never wait (a question waits for no reply).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

# How often a waiting embedder asks again whether the chat is done: short beside a reply
# (seconds), long beside the question's cost (a Python call).
POLL_S = 0.05
# The longest one wait lasts before the embedder runs one decode anyway (see the docstring).
MAX_WAIT_S = 30.0

Busy = Callable[[], bool]


class _Threaded(Protocol):
    n_threads: int

    def set_threads(self, n_threads: int) -> None: ...


class YieldingEmbedder(_Threaded, Protocol):
    """An embedder whose ``embed`` calls a hook before each decode (``Embedder`` does)."""

    name: str
    dim: int
    window: int

    def embed(
        self, texts: Sequence[str], *, before_batch: Callable[[], None] | None = None
    ) -> np.ndarray: ...

    def count_tokens(self, text: str) -> int: ...


@dataclass(frozen=True)
class CourtesyStats:
    waits: int  # decodes that found a chat generating and waited
    seconds_waited: float
    forced: int  # decodes run after ``max_wait_s`` although the chat still generated
    shared: int  # decodes run on ``threads_while_busy`` threads beside the chat


class Courtesy:
    """Decides, before each of the embedder's decodes, whether to wait for a generating chat."""

    def __init__(
        self,
        busy: Busy,
        *,
        threads_while_busy: int | None = None,
        poll_s: float = POLL_S,
        max_wait_s: float | None = MAX_WAIT_S,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if threads_while_busy is not None and threads_while_busy < 1:
            raise ValueError("threads_while_busy must be at least 1")
        if poll_s <= 0:
            raise ValueError("poll_s must be positive")
        self.busy = busy
        self.threads_while_busy = threads_while_busy
        self.poll_s = poll_s
        self.max_wait_s = max_wait_s
        self._sleep, self._clock = sleep, clock
        self._lock = threading.Lock()
        self._waits = self._forced = self._shared = 0
        self._waited = 0.0
        self._own_threads: int | None = None  # the embedder's threads, while lowered

    def before_decode(self, embedder: _Threaded) -> None:
        """Returns when the embedder may decode: at once when no chat generates; with
        ``threads_while_busy``, after lowering its threads; else when the chat is done (or
        ``max_wait_s`` passed)."""
        if not self.busy():
            self._restore(embedder)
            return
        if self.threads_while_busy is not None:
            if self._own_threads is None and embedder.n_threads != self.threads_while_busy:
                self._own_threads = embedder.n_threads
                embedder.set_threads(self.threads_while_busy)
            with self._lock:
                self._shared += 1
            return
        started = self._clock()
        forced = False
        while self.busy():
            if self.max_wait_s is not None and self._clock() - started >= self.max_wait_s:
                forced = True
                break
            self._sleep(self.poll_s)
        with self._lock:
            self._waits += 1
            self._forced += forced
            self._waited += self._clock() - started

    def _restore(self, embedder: _Threaded) -> None:
        if self._own_threads is not None:
            embedder.set_threads(self._own_threads)
            self._own_threads = None

    def stats(self) -> CourtesyStats:
        with self._lock:
            return CourtesyStats(self._waits, self._waited, self._forced, self._shared)


class CourteousEmbedder:
    """``embedder`` as an indexing run sees it (a ``TextEmbedder``), each decode preceded by
    ``courtesy``'s decision."""

    def __init__(self, embedder: YieldingEmbedder, courtesy: Courtesy) -> None:
        self.inner = embedder
        self.courtesy = courtesy
        self.name, self.dim, self.window = embedder.name, embedder.dim, embedder.window

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed(texts, before_batch=lambda: self.courtesy.before_decode(self.inner))

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)
