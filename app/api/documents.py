"""The chat request's ``"documents"`` extension: ``{"collections": ["notes"], "k": 5}``.

The server retrieves from those collections for the last user message (fitted to the
model's context per conversation), grounds the messages as the window and the CLI do, and
answers with ``"sources"``: the numbered excerpts the model was given.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.api import fields
from app.api.errors import ApiError, ErrorType, bad_request
from app.api.mapping import GenerationSpec
from engine import CollectionNotFound, EngineError, Role, TextEmbedder

FIELD = "documents"
MAX_K = 50
MAX_COLLECTIONS = 32


@dataclass(frozen=True)
class DocumentsAsk:
    collections: tuple[str, ...]
    k: int | None  # None: retrieval's own default


def read_documents(body: Mapping[str, Any]) -> DocumentsAsk | None:
    if body.get(FIELD) is None:
        return None
    ask = fields.obj(body, FIELD)
    unknown = sorted(k for k in ask if k not in ("collections", "k"))
    if unknown:
        raise bad_request(f"Unsupported field: '{FIELD}.{unknown[0][:40]}'.", FIELD)
    names = fields.array(ask, "collections", f"{FIELD}.collections")
    if not names or len(names) > MAX_COLLECTIONS:
        raise bad_request(f"'{FIELD}.collections' must name 1 to {MAX_COLLECTIONS} collections.", FIELD)
    if not all(isinstance(n, str) and n for n in names):
        raise bad_request(f"'{FIELD}.collections' must be collection names (strings).", FIELD)
    k = fields.integer(ask, "k", None, 1, MAX_K, param=f"{FIELD}.k")
    return DocumentsAsk(tuple(dict.fromkeys(names)), k)


class DocumentsSource:
    """The documents index, opened on first use (the file may not exist until then), and
    the embedder to search it with."""

    def __init__(self, db_path: Path | None, embedder: Any) -> None:
        self._db_path = db_path
        self._embedder = embedder  # EmbedderProvider
        self._index: Any = None
        self._lock = threading.Lock()

    def _open(self) -> Any:
        from engine import DocumentIndex

        with self._lock:
            if self._index is None:
                assert self._db_path is not None
                self._index = DocumentIndex(self._db_path)
            return self._index

    def close(self) -> None:
        with self._lock:
            if self._index is not None:
                self._index.close()
                self._index = None

    async def ground(self, spec: GenerationSpec, ask: DocumentsAsk, context_tokens: int) -> GenerationSpec:
        """``spec`` with its last user message grounded, and the excerpts as its sources."""
        if self._db_path is None:
            raise ApiError(404, "This server has no documents index.", ErrorType.NOT_FOUND, FIELD,
                           "documents_unavailable")  # fmt: skip
        embedder: TextEmbedder | None = self._embedder() if self._embedder is not None else None
        question = next((m.text for m in reversed(spec.request.messages) if m.role is Role.USER), "")
        if not question:
            raise bad_request(f"'{FIELD}' needs a user message to search for.", FIELD)
        try:
            retrieval = await asyncio.to_thread(self._retrieve, ask, question, embedder, context_tokens)
        except CollectionNotFound as exc:
            raise ApiError(404, exc.message, ErrorType.NOT_FOUND, FIELD, "collection_not_found") from None
        except EngineError as exc:
            raise bad_request(exc.message, FIELD) from None
        from engine import ground_messages

        request = replace(spec.request, messages=ground_messages(spec.request.messages, retrieval))
        sources = tuple(
            {"n": e.n, "path": str(e.path), "page": e.page, "text": e.text} for e in retrieval.excerpts
        )
        return replace(spec, request=request, sources=sources)

    def _retrieve(self, ask: DocumentsAsk, question: str, embedder: TextEmbedder | None, context: int) -> Any:
        from engine import RetrievalMode, retrieve

        index = self._open()
        index.active(ask.collections)  # CollectionNotFound before anything is embedded
        # Without an embedding model the words alone still find excerpts.
        mode = RetrievalMode.HYBRID if embedder is not None else RetrievalMode.BM25
        chosen = {"k": ask.k} if ask.k is not None else {}
        return retrieve(
            index, ask.collections, question, embedder, context_tokens=context, mode=mode, **chosen
        )
