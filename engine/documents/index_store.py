"""The documents index's SQLite file as a store: a connection per thread, and what retrieval reads.

``IndexStore`` opens the file (migrating its schema), gives each thread its own connection (WAL:
a question is answered from what is committed while another thread writes a file), and answers
retrieval's questions about a collection's active generation: its vectors as an in-memory
matrix, BM25 over FTS5, chunks by id, token totals. ``DocumentIndex`` builds on it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.documents.index_errors import CollectionNotFound
from engine.documents.index_schema import connect, migrate
from engine.documents.index_types import ChunkSettings
from engine.documents.vector_matrix import MatrixCache, VectorMatrix


@dataclass(frozen=True)
class StoredChunk:
    """A chunk as retrieval reads it back, with the document it belongs to."""

    id: int
    document_id: int
    collection: str
    path: Path
    ordinal: int
    text: str
    page: int | None
    heading: str
    start: int
    end: int
    tokens: int


@dataclass(frozen=True)
class ActiveCollection:
    """What a question is answered from: a collection's active generation at one revision."""

    id: int
    name: str
    embedder: str | None
    chunking: ChunkSettings
    revision: int


class IndexStore:
    def __init__(self, db_path: Path) -> None:
        self.db_path = Path(db_path)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._active_docs: dict[Hashable, tuple[int, frozenset[int]]] = {}
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        migrate(self._conn())
        self.matrices = MatrixCache(self._load_matrix)

    # -- connections -----------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.db_path)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()
        self.matrices.invalidate()
        self._active_docs.clear()

    def _collection_row(self, name: str) -> sqlite3.Row:
        row = self._conn().execute("SELECT * FROM collections WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise CollectionNotFound(name)
        return row

    # -- reads for retrieval ---------------------------------------------------------------

    def active(self, names: Sequence[str]) -> list[ActiveCollection]:
        out = []
        for name in names:
            row = self._collection_row(name)
            out.append(
                ActiveCollection(
                    id=row["id"],
                    name=row["name"],
                    embedder=row["embedder"],
                    chunking=ChunkSettings.from_json(row["chunking"]),
                    revision=row["revision"],
                )
            )
        return out

    def matrix(self, collection: ActiveCollection) -> VectorMatrix:
        """The collection's vectors of its active embedder, kept in memory between questions."""
        return self.matrices.get(
            (collection.id, collection.embedder, collection.chunking), collection.revision
        )

    def _load_matrix(self, key: Hashable, held: VectorMatrix | None) -> VectorMatrix:
        collection_id, embedder, chunking = key  # type: ignore[misc]
        if embedder is None:
            return VectorMatrix.empty()
        active = (
            " FROM documents d JOIN chunks c ON c.document_id = d.id JOIN vectors v ON v.chunk_id = c.id"
            " WHERE d.collection_id = ? AND d.embedder = ? AND d.chunking = ? AND d.status = 'indexed'"
            " AND v.embedder = ?"
        )
        args = (collection_id, embedder, chunking.to_json(), embedder)
        # Every chunk of an indexed document got its vector in the same transaction: the ids
        # come from the chunks' index alone, without reading a vector row (150 MB at 100k).
        ids_only = (
            "SELECT c.id FROM documents d JOIN chunks c ON c.document_id = d.id"
            " WHERE d.collection_id = ? AND d.embedder = ? AND d.chunking = ? AND d.status = 'indexed'"
        )
        # Its own connection and one read transaction: the ids and the vectors read are of the
        # same commit, whatever the thread's own connection is doing.
        conn = connect(self.db_path)
        try:
            conn.execute("BEGIN")
            if held is None or not len(held):
                count = conn.execute("SELECT COUNT(*)" + active, args).fetchone()[0]
                rows = conn.execute("SELECT v.chunk_id, v.vector" + active, args)
                matrix = VectorMatrix.from_rows(count, ((r[0], r[1]) for r in rows))
            else:
                # After a commit (a collection being indexed while it is asked): only the
                # vectors of chunks new since the matrix was read are read.
                ids = np.fromiter((r[0] for r in conn.execute(ids_only, args[:3])), dtype=np.int64)
                matrix = held.updated(np.unique(ids), lambda new: _vector_rows(conn, new))
            conn.execute("COMMIT")
        finally:
            conn.close()
        return matrix

    def active_documents(self, collection: ActiveCollection) -> frozenset[int]:
        """Ids of the collection's indexed documents, kept until its revision moves."""
        key = (collection.id, collection.embedder, collection.chunking)
        with self._lock:
            held = self._active_docs.get(key)
            if held is not None and held[0] == collection.revision:
                return held[1]
        rows = self._conn().execute(
            "SELECT id FROM documents WHERE collection_id = ? AND embedder = ? AND chunking = ?"
            " AND status = 'indexed'",
            (collection.id, collection.embedder or "", collection.chunking.to_json()),
        )
        ids = frozenset(r[0] for r in rows)
        with self._lock:
            self._active_docs[key] = (collection.revision, ids)
        return ids

    def fts_search(
        self, collections: Sequence[ActiveCollection], match: str, limit: int
    ) -> list[tuple[int, float]]:
        """(chunk id, BM25 score, higher is better) for an FTS5 ``match`` expression, best first,
        among the collections' active chunks."""
        if not collections or not match or limit <= 0:
            return []
        documents = frozenset().union(*(self.active_documents(c) for c in collections))
        # The best rows of the whole FTS table first (FTS5 ranks them without a join), then
        # those of the collections asked: other collections and a reindex's rows share the
        # table, so ask for more until enough are left or there are no more.
        conn = self._conn()
        fetch = limit * 4
        while True:
            hits = conn.execute(
                "SELECT rowid, bm25(chunks_fts) AS score FROM chunks_fts WHERE chunks_fts MATCH ?"
                " ORDER BY score, rowid LIMIT ?",
                (match, fetch),
            ).fetchall()
            owner = _documents_of(conn, [h[0] for h in hits])
            found = [(h[0], -float(h[1])) for h in hits if owner.get(h[0]) in documents]
            if len(found) >= limit or len(hits) < fetch:
                return found[:limit]
            fetch *= 4

    def term_postings(self, match: str, cap: int) -> int:
        """How many chunks (of the whole table) ``match`` finds, counted up to ``cap`` only:
        the cost of looking is bounded by the cap, not by how common the words are."""
        row = (
            self._conn()
            .execute(
                "SELECT COUNT(*) FROM (SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT ?)",
                (match, cap),
            )
            .fetchone()
        )
        return int(row[0])

    def chunks(self, ids: Iterable[int]) -> dict[int, StoredChunk]:
        ids = list(dict.fromkeys(ids))
        out: dict[int, StoredChunk] = {}
        conn = self._conn()
        for begin in range(0, len(ids), 500):
            part = ids[begin : begin + 500]
            marks = ",".join("?" for _ in part)
            for r in conn.execute(_CHUNK_SELECT + f" WHERE c.id IN ({marks})", part):
                out[r["id"]] = _stored(r)
        return out

    def total_tokens(self, collections: Sequence[ActiveCollection]) -> int:
        """Tokens of every indexed chunk of the collections (overlaps counted twice)."""
        total = 0
        conn = self._conn()
        for c in collections:
            row = conn.execute(
                "SELECT COALESCE(SUM(tokens), 0) FROM documents"
                " WHERE collection_id = ? AND embedder = ? AND chunking = ? AND status = 'indexed'",
                (c.id, c.embedder or "", c.chunking.to_json()),
            ).fetchone()
            total += row[0]
        return int(total)

    def all_chunks(self, collections: Sequence[ActiveCollection]) -> list[StoredChunk]:
        """Every indexed chunk of the collections, by document path then ordinal."""
        out: list[StoredChunk] = []
        for c in collections:
            rows = self._conn().execute(
                _CHUNK_SELECT + " WHERE d.collection_id = ? AND d.embedder = ? AND d.chunking = ?"
                " AND d.status = 'indexed' ORDER BY d.path, c.ordinal",
                (c.id, c.embedder or "", c.chunking.to_json()),
            )
            out += [_stored(r) for r in rows]
        return out


_CHUNK_SELECT = (
    "SELECT c.id, c.document_id, k.name AS collection, d.path, c.ordinal, c.text, c.page, c.heading,"
    ' c.start, c."end", c.tokens FROM chunks c JOIN documents d ON d.id = c.document_id'
    " JOIN collections k ON k.id = d.collection_id"
)


def _in_batches(ids: Sequence[int], size: int = 500) -> Iterable[Sequence[int]]:
    for begin in range(0, len(ids), size):
        yield ids[begin : begin + size]


def _documents_of(conn: sqlite3.Connection, chunk_ids: Sequence[int]) -> dict[int, int]:
    owner: dict[int, int] = {}
    for part in _in_batches(chunk_ids):
        marks = ",".join("?" * len(part))
        owner.update(conn.execute(f"SELECT id, document_id FROM chunks WHERE id IN ({marks})", list(part)))
    return owner


def _vector_rows(conn: sqlite3.Connection, ids: np.ndarray) -> Iterable[tuple[int, bytes]]:
    for part in _in_batches([int(i) for i in ids]):
        marks = ",".join("?" * len(part))
        yield from conn.execute(
            f"SELECT chunk_id, vector FROM vectors WHERE chunk_id IN ({marks})", list(part)
        )


def _stored(r: sqlite3.Row) -> StoredChunk:
    return StoredChunk(
        id=r["id"],
        document_id=r["document_id"],
        collection=r["collection"],
        path=Path(r["path"]),
        ordinal=r["ordinal"],
        text=r["text"],
        page=r["page"],
        heading=r["heading"],
        start=r["start"],
        end=r["end"],
        tokens=r["tokens"],
    )
