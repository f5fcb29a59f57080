"""The replies this server generated, by text: their token ids, so a client's next turn
(which sends the reply back as text) is spliced with the very ids in the KV cache.

Re-tokenizing a reply can split it differently from how it was generated; the prefix cache
would then match only up to the first difference. The window does the same with the
ids it stores (``ChatMessage.tokens``).
"""

from __future__ import annotations

import collections
import threading

from engine import Completion

KEEP = 512  # replies remembered (a few MB of ids at most)


class ReplyCache:
    """Bounded, least recently stored out first. ``lookup`` may run on a worker thread
    (request mapping of large bodies), ``remember`` on the event loop."""

    def __init__(self, keep: int = KEEP) -> None:
        self._keep = keep
        self._replies: collections.OrderedDict[str, tuple[tuple[int, ...], str]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def remember(self, completion: Completion) -> None:
        ids = completion.reply_tokens
        if not ids or not completion.text or not completion.model_identity:
            return
        with self._lock:
            self._replies[completion.text] = (ids, completion.model_identity)
            self._replies.move_to_end(completion.text)
            while len(self._replies) > self._keep:
                self._replies.popitem(last=False)

    def lookup(self, text: str) -> tuple[tuple[int, ...], str] | None:
        with self._lock:
            return self._replies.get(text)

    def __len__(self) -> int:
        return len(self._replies)
