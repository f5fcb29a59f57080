"""What the documents' consumers (chunking, index, retrieval) need of an embedder.

The real one is ``engine.documents.embedding.Embedder`` (llama.cpp, its own worker thread);
tests use small deterministic ones. Typing against this Protocol keeps the index and the
retrieval free of llama.cpp, so they run and are tested without a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class TextEmbedder(Protocol):
    """An embedding model as the index sees it.

    ``name`` is the identity stored beside every vector ("<file name>:<12 hex of its sha256>"):
    two embedders with the same name must give the same vectors, so the index can reuse them.
    """

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int:
        """The size of one vector."""
        ...

    @property
    def window(self) -> int:
        """The most tokens one text may have; longer texts are cut by the embedder."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32, each row L2-normalised."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` in the embedder's own tokenizer, without special tokens."""
        ...
