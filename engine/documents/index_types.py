"""The values the documents index hands out: collections, documents, progress, reports, plans."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path


@dataclass(frozen=True)
class ChunkSettings:
    """How a collection's documents are cut: at most ``max_tokens`` per chunk (the embedder's
    tokens), ``overlap`` of it repeated from the chunk before."""

    max_tokens: int
    overlap: float

    def to_json(self) -> str:
        # Canonical (sorted keys, fixed separators): the text is compared in SQL to tell
        # the active generation of a collection from one a reindex is building.
        return json.dumps({"max_tokens": self.max_tokens, "overlap": self.overlap}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ChunkSettings:
        data = json.loads(text)
        return cls(max_tokens=int(data["max_tokens"]), overlap=float(data["overlap"]))

    @classmethod
    def defaults_of(cls, chunk: Callable[..., object]) -> ChunkSettings:
        """The chunker's own defaults, read from its signature: the chunking module stays the
        one place they are written."""
        params = inspect.signature(chunk).parameters
        return cls(max_tokens=int(params["max_tokens"].default), overlap=float(params["overlap"].default))


class DocumentStatus(Enum):
    INDEXED = "indexed"
    REFUSED = "refused"  # with a one-line reason
    PENDING = "pending"  # found, not indexed yet (or interrupted before its transaction)


@dataclass(frozen=True)
class CollectionInfo:
    id: int
    name: str
    embedder: str | None  # None until something was indexed
    chunking: ChunkSettings
    created: float
    documents: int  # every file of the active generation, whatever its status
    indexed: int
    refused: int
    pending: int
    chunks: int
    tokens: int  # sum of the indexed chunks' tokens (overlaps counted twice)
    sources: tuple[Path, ...]
    reindex_to: tuple[str, ChunkSettings] | None  # a reindex started and not finished


@dataclass(frozen=True)
class DocumentInfo:
    id: int
    path: Path
    status: DocumentStatus
    reason: str  # why it was refused, "" otherwise
    size: int | None
    mtime_ns: int | None
    sha256: str | None
    embedder: str
    chunk_count: int
    indexed_at: float | None


class IndexPhase(Enum):
    SCANNING = "scanning"
    INDEXING = "indexing"
    PAUSED = "paused"
    SWITCHING = "switching"  # a reindex's new generation replacing the old one
    DONE = "done"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class IndexProgress:
    phase: IndexPhase
    files_done: int
    files_total: int
    chunks_done: int  # chunks stored this run, embedded or reused
    chunks_per_s: float  # chunks embedded per second of this run's work (parsing included)
    seconds_left: float | None  # None until there is a rate to go by
    current: Path | None


@dataclass(frozen=True)
class IndexReport:
    collection: str
    files: int  # files the scan found
    indexed: int  # parsed, chunked and stored
    unchanged: int  # size and mtime as stored: not read
    touched: int  # content as stored (SHA-256): only the mtime written
    moved: int  # renamed or moved: path updated, nothing embedded
    removed: int
    refused: int
    chunks_embedded: int
    chunks_reused: int  # vectors kept from the document's earlier version
    cancelled: bool
    seconds: float


@dataclass(frozen=True)
class ReindexPlan:
    """What changing a collection's embedder or chunking costs, for the user to agree to."""

    collection: str
    from_embedder: str | None
    to_embedder: str
    from_chunking: ChunkSettings
    to_chunking: ChunkSettings
    documents: int
    chunks_to_embed: int  # an estimate when the chunking changes (the files are not read)
    chunks_done: int  # already built by an interrupted reindex to the same target
    chunks_per_s: float
    seconds: float

    @property
    def needed(self) -> bool:
        return (self.from_embedder, self.from_chunking) != (self.to_embedder, self.to_chunking)
