"""One line per API request: who asked, what it cost, how it ended. The window's server
panel lists the recent ones; ``hearth serve`` prints each."""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("hearth.api")

RECENT = 200  # records kept for the window's table

# nginx's "client closed request": the status a request gets when its client went away.
CLIENT_CLOSED = 499


@dataclass(frozen=True)
class RequestRecord:
    time: float  # wall clock (time.time()) when the request arrived
    client: str  # address, and the client program when it says (User-Agent)
    method: str
    path: str
    status: int
    seconds: float
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    tokens_per_second: float = 0.0
    stream: bool = False
    error: str = ""  # the one-line message a refusal carried

    @property
    def status_text(self) -> str:
        return "client gone" if self.status == CLIENT_CLOSED else str(self.status)

    def line(self) -> str:
        """As ``hearth serve`` logs it."""
        clock = time.strftime("%H:%M:%S", time.localtime(self.time))
        parts = [f"{clock} {self.client} {self.method} {self.path} {self.status_text} {self.seconds:.2f} s"]
        if self.prompt_tokens or self.completion_tokens:
            cached = f", {self.cached_tokens} cached" if self.cached_tokens else ""
            parts.append(f"{self.prompt_tokens} prompt{cached} + {self.completion_tokens} tokens")
            if self.tokens_per_second:
                parts.append(f"{self.tokens_per_second:.1f} tok/s")
        if self.error:
            parts.append(self.error)
        return " · ".join(parts)


def printable(text: str) -> str:
    """Text that any terminal and widget can show: what a client sent may hold lone
    surrogates (JSON's "\\ud800", undecodable header bytes), which cannot be encoded."""
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


class RequestLog:
    """The recent records, and whoever wants each new one (``listeners``, called on the
    event loop's thread)."""

    def __init__(self, keep: int = RECENT) -> None:
        self.records: collections.deque[RequestRecord] = collections.deque(maxlen=keep)
        self.listeners: list[Callable[[RequestRecord], None]] = []

    def add(self, record: RequestRecord) -> None:
        self.records.append(record)
        for listener in list(self.listeners):
            try:
                listener(record)
            except Exception:  # a broken listener (a closed terminal...) costs its line only
                log.exception("request log listener failed")
