"""A tiny deterministic embedder for the documents tests: no model, same vectors every run.

Each text is a bag of its hashed word unigrams and bigrams, signed, summed and L2-normalised:
texts that share words are near each other, which is all the index and retrieval tests need.
``CountingEmbedder`` wraps any embedder and keeps every text it was asked to embed, so a test
can prove what was (and was not) embedded again.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
from collections.abc import Callable, Sequence

import numpy as np

from engine.documents.embedder_protocol import TextEmbedder

_WORD = re.compile(r"\w+|[^\w\s]")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class HashingEmbedder:
    def __init__(self, dim: int = 256, window: int = 512, name: str | None = None) -> None:
        self.dim = dim
        self.window = window
        self.name = name or f"hashing-{dim}:000000000000"

    def count_tokens(self, text: str) -> int:
        return len(words(text))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            tokens = [w for w in words(text)[: self.window] if w.isalnum()]
            grams = tokens + [f"{a} {b}" for a, b in itertools.pairwise(tokens)]
            for gram in grams:
                digest = hashlib.blake2b(gram.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self.dim] += 1.0 if (value >> 32) & 1 else -1.0
            norm = np.linalg.norm(out[row])
            if norm == 0:
                out[row, 0] = 1.0  # a text with no words still gets a unit vector
            else:
                out[row] /= norm
        return out


class CountingEmbedder:
    """Any embedder, with the texts it embedded kept in ``texts`` and its calls in ``calls``."""

    def __init__(
        self, inner: TextEmbedder, before_batch: Callable[[Sequence[str]], None] | None = None
    ) -> None:
        self.inner = inner
        self.texts: list[str] = []
        self.calls: list[int] = []
        self.before_batch = before_batch
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def window(self) -> int:
        return self.inner.window

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.before_batch is not None:
            self.before_batch(texts)
        with self._lock:
            self.texts.extend(texts)
            self.calls.append(len(texts))
        return self.inner.embed(texts)

    def reset(self) -> None:
        with self._lock:
            self.texts.clear()
            self.calls.clear()
