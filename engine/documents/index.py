"""The documents index: collections of the user's files, their chunks, FTS5 and vectors in SQLite.

``DocumentIndex(db_path)`` owns one SQLite file (WAL, foreign keys on). Each thread gets its own
connection: the window's worker indexes while questions are answered from another thread, and
WAL lets them read what is committed while a file is being written. A collection answers with
one embedder and one chunking (its active generation); changing either builds a new generation
beside it (``reindex``), switched to in one transaction when complete.

Parsing, chunking and scanning are passed in (the real ones by default), so the index is
exercised by its tests with simple stand-ins and a deterministic embedder.
"""

from __future__ import annotations

import math
import os
import sqlite3
import threading
import time
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.documents.embedder_protocol import TextEmbedder
from engine.documents.index_control import IndexControl
from engine.documents.index_errors import (
    CollectionExists,
    CollectionNotFound,
    EmbedderMismatch,
    InvalidCollectionName,
)
from engine.documents.index_schema import connect, migrate
from engine.documents.index_types import (
    ChunkSettings,
    CollectionInfo,
    DocumentInfo,
    DocumentStatus,
    IndexPhase,
    IndexProgress,
    IndexReport,
    ReindexPlan,
)
from engine.documents.indexing import (
    EMBED_BATCH,
    Chunk,
    Generation,
    IndexRun,
    Parse,
    Progress,
    Scan,
    save_rate,
    transaction,
)
from engine.documents.vector_matrix import MatrixCache, VectorMatrix

# The text embedded to measure an embedder's rate when the collection has no chunks yet.
_RATE_PROBE = "A paragraph of an ordinary document, long enough to be a typical chunk of text. " * 6


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


def _default_parse() -> Parse:
    from engine.documents.parsing import parse_document

    return parse_document


def _default_chunk() -> Chunk:
    from engine.documents.chunking import chunk_document

    return chunk_document


def _default_scan() -> Scan:
    from engine.documents.scanning import scan_paths

    return scan_paths


class DocumentIndex:
    def __init__(
        self,
        db_path: Path,
        *,
        parse: Parse | None = None,
        chunk: Chunk | None = None,
        scan: Scan | None = None,
    ) -> None:
        self.db_path = Path(db_path)
        self._parse = parse
        self._chunk = chunk
        self._scan = scan
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._runs: dict[int, threading.Lock] = {}
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

    def __enter__(self) -> DocumentIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def parse(self) -> Parse:
        return self._parse or _default_parse()

    @property
    def chunk(self) -> Chunk:
        return self._chunk or _default_chunk()

    @property
    def scan(self) -> Scan:
        return self._scan or _default_scan()

    # -- collections -----------------------------------------------------------------------

    def create_collection(self, name: str, chunking: ChunkSettings | None = None) -> CollectionInfo:
        name = _checked_name(name)
        settings = chunking or ChunkSettings.defaults_of(self.chunk)
        conn = self._conn()
        try:
            with transaction(conn):
                conn.execute(
                    "INSERT INTO collections (name, chunking, created) VALUES (?, ?, ?)",
                    (name, settings.to_json(), time.time()),
                )
        except sqlite3.IntegrityError:
            raise CollectionExists(name) from None
        return self.collection(name)

    def collections(self) -> list[CollectionInfo]:
        rows = self._conn().execute("SELECT name FROM collections ORDER BY name COLLATE NOCASE, name")
        return [self.collection(r["name"]) for r in rows.fetchall()]

    def collection(self, name: str) -> CollectionInfo:
        conn = self._conn()
        row = self._collection_row(name)
        counts = conn.execute(
            "SELECT COUNT(*) AS documents,"
            " COALESCE(SUM(status = 'indexed'), 0) AS indexed,"
            " COALESCE(SUM(status = 'refused'), 0) AS refused,"
            " COALESCE(SUM(status = 'pending'), 0) AS pending,"
            " COALESCE(SUM(chunk_count), 0) AS chunks,"
            " COALESCE(SUM(tokens), 0) AS tokens"
            " FROM documents WHERE collection_id = ? AND embedder = ? AND chunking = ?",
            (row["id"], row["embedder"] or "", row["chunking"]),
        ).fetchone()
        sources = conn.execute(
            "SELECT path FROM sources WHERE collection_id = ? ORDER BY added, path", (row["id"],)
        ).fetchall()
        target = None
        if row["target_embedder"] is not None:
            target = (row["target_embedder"], ChunkSettings.from_json(row["target_chunking"]))
        return CollectionInfo(
            id=row["id"],
            name=row["name"],
            embedder=row["embedder"],
            chunking=ChunkSettings.from_json(row["chunking"]),
            created=row["created"],
            documents=counts["documents"],
            indexed=counts["indexed"],
            refused=counts["refused"],
            pending=counts["pending"],
            chunks=counts["chunks"],
            tokens=counts["tokens"],
            sources=tuple(Path(s["path"]) for s in sources),
            reindex_to=target,
        )

    def rename_collection(self, old: str, new: str) -> CollectionInfo:
        new = _checked_name(new)
        conn = self._conn()
        row = self._collection_row(old)
        try:
            with transaction(conn):
                conn.execute("UPDATE collections SET name = ? WHERE id = ?", (new, row["id"]))
        except sqlite3.IntegrityError:
            raise CollectionExists(new) from None
        return self.collection(new)

    def remove_collection(self, name: str) -> None:
        conn = self._conn()
        row = self._collection_row(name)
        with transaction(conn):
            conn.execute("DELETE FROM collections WHERE id = ?", (row["id"],))
        self.matrices.invalidate(row["id"])

    def documents(self, name: str) -> list[DocumentInfo]:
        """The collection's files (active generation), with their status and refusal reason."""
        row = self._collection_row(name)
        rows = self._conn().execute(
            "SELECT * FROM documents WHERE collection_id = ? AND embedder = ? AND chunking = ? ORDER BY path",
            (row["id"], row["embedder"] or "", row["chunking"]),
        )
        return [
            DocumentInfo(
                id=r["id"],
                path=Path(r["path"]),
                status=DocumentStatus(r["status"]),
                reason=r["reason"],
                size=r["size"],
                mtime_ns=r["mtime_ns"],
                sha256=r["sha256"],
                embedder=r["embedder"],
                chunk_count=r["chunk_count"],
                indexed_at=r["indexed_at"],
            )
            for r in rows
        ]

    def remove_paths(self, name: str, paths: Iterable[Path | str]) -> int:
        """Forget files or folders (not on disk: in the collection); returns documents removed."""
        row = self._collection_row(name)
        gone = [_absolute(p) for p in paths]
        conn = self._conn()
        docs = conn.execute("SELECT id, path FROM documents WHERE collection_id = ?", (row["id"],)).fetchall()
        doomed = [(d["id"],) for d in docs if any(_within(Path(d["path"]), g) for g in gone)]
        with transaction(conn):
            conn.executemany("DELETE FROM documents WHERE id = ?", doomed)
            conn.executemany(
                "DELETE FROM sources WHERE collection_id = ? AND path = ?",
                [(row["id"], str(g)) for g in gone],
            )
            conn.execute("UPDATE collections SET revision = revision + 1 WHERE id = ?", (row["id"],))
        return len(doomed)

    # -- indexing --------------------------------------------------------------------------

    def index_paths(
        self,
        name: str,
        paths: Iterable[Path | str],
        embedder: TextEmbedder,
        *,
        progress: Progress | None = None,
        control: IndexControl | None = None,
    ) -> IndexReport:
        """Add ``paths`` (files or folders) to the collection and bring what is under them up
        to date: new and changed files indexed, unchanged ones skipped, removed ones forgotten."""
        row = self._collection_row(name)
        sources = [_absolute(p) for p in paths]
        self._add_sources(row["id"], sources)
        if row["embedder"] is not None and row["embedder"] != embedder.name:
            if row["target_embedder"] == embedder.name:
                # A reindex to this embedder is under way: the new files join it.
                return self.reindex(
                    name,
                    embedder,
                    ChunkSettings.from_json(row["target_chunking"]),
                    progress=progress,
                    control=control,
                )
            raise EmbedderMismatch(name, row["embedder"], embedder.name)
        with self._run_lock(row["id"]):
            row = self._claim_embedder(row, embedder)
            generation = _generation(row, active=True)
            return self._run(generation, sources, embedder, progress, control)

    def rescan(
        self,
        name: str,
        embedder: TextEmbedder,
        *,
        progress: Progress | None = None,
        control: IndexControl | None = None,
    ) -> IndexReport:
        """Every source of the collection looked at again (what a file watcher triggers)."""
        info = self.collection(name)
        return self.index_paths(name, info.sources, embedder, progress=progress, control=control)

    def plan_reindex(
        self, name: str, embedder: TextEmbedder, chunking: ChunkSettings | None = None
    ) -> ReindexPlan:
        """What moving the collection to ``embedder`` (and ``chunking``) would embed and take."""
        info = self.collection(name)
        target = chunking or info.chunking
        conn = self._conn()
        same = (info.embedder, info.chunking) == (embedder.name, target)
        if same or info.embedder is None:
            estimate = 0
        elif target == info.chunking:
            estimate = info.chunks  # the same cuts in another tokenizer: about as many chunks
        else:
            # Per document: its text's tokens (its chunks' less their overlaps) over the new
            # step. The files are not read to plan; this is an estimate, and it counts every
            # chunk even where the embedder is the same and some could be kept.
            old_step = 1.0 - info.chunking.overlap
            new_step = max(1.0, target.max_tokens * (1.0 - target.overlap))
            estimate = 0
            for r in conn.execute(
                "SELECT tokens FROM documents WHERE collection_id = ? AND embedder = ? AND chunking = ?"
                " AND status = 'indexed'",
                (info.id, info.embedder, info.chunking.to_json()),
            ):
                estimate += max(1, math.ceil(r[0] * old_step / new_step))
        done = 0
        if not same and info.reindex_to == (embedder.name, target):
            done = conn.execute(
                "SELECT COALESCE(SUM(chunk_count), 0) FROM documents"
                " WHERE collection_id = ? AND embedder = ? AND chunking = ? AND status = 'indexed'",
                (info.id, embedder.name, target.to_json()),
            ).fetchone()[0]
        to_embed = max(0, estimate - done)
        rate = self.embed_rate(embedder, sample_from=info.name) if to_embed else 0.0
        return ReindexPlan(
            collection=info.name,
            from_embedder=info.embedder,
            to_embedder=embedder.name,
            from_chunking=info.chunking,
            to_chunking=target,
            documents=info.indexed,
            chunks_to_embed=to_embed,
            chunks_done=done,
            chunks_per_s=rate,
            seconds=to_embed / rate if rate > 0 else 0.0,
        )

    def embed_rate(self, embedder: TextEmbedder, sample_from: str | None = None) -> float:
        """Chunks per second ``embedder`` reached here: the last run's, else measured now on one
        batch of the collection's own chunks."""
        conn = self._conn()
        row = conn.execute(
            "SELECT chunks_per_s FROM embed_rates WHERE embedder = ?", (embedder.name,)
        ).fetchone()
        if row is not None:
            return float(row[0])
        texts: list[str] = []
        if sample_from is not None:
            collection = self._collection_row(sample_from)
            texts = [
                r[0]
                for r in conn.execute(
                    "SELECT c.text FROM documents d JOIN chunks c ON c.document_id = d.id"
                    " WHERE d.collection_id = ? LIMIT ?",
                    (collection["id"], EMBED_BATCH),
                )
            ]
        texts += [_RATE_PROBE] * (EMBED_BATCH - len(texts))
        embedder.embed(texts[:1])  # the first call pays for warming up, not for the rate
        started = time.monotonic()
        embedder.embed(texts)
        rate = len(texts) / max(time.monotonic() - started, 1e-6)
        with transaction(conn):
            save_rate(conn, embedder.name, rate)
        return rate

    def reindex(
        self,
        name: str,
        embedder: TextEmbedder,
        chunking: ChunkSettings | None = None,
        *,
        progress: Progress | None = None,
        control: IndexControl | None = None,
    ) -> IndexReport:
        """Build the collection again with ``embedder`` and ``chunking`` beside the current index,
        which keeps answering; switch to the new one only when every file is done. Interrupted,
        the next call resumes where it stopped."""
        row = self._collection_row(name)
        target = chunking or ChunkSettings.from_json(row["chunking"])
        conn = self._conn()
        with self._run_lock(row["id"]):
            if row["embedder"] is None:
                with transaction(conn):
                    conn.execute(
                        "UPDATE collections SET embedder = ?, chunking = ?, target_embedder = NULL,"
                        " target_chunking = NULL, revision = revision + 1 WHERE id = ?",
                        (embedder.name, target.to_json(), row["id"]),
                    )
                row = self._collection_row(name)
                sources = [Path(p) for p in self._sources(row["id"])]
                return self._run(_generation(row, active=True), sources, embedder, progress, control)
            active = _generation(row, active=True)
            if (active.embedder, active.chunking) == (embedder.name, target):
                return self._run(
                    active, [Path(p) for p in self._sources(row["id"])], embedder, progress, control
                )
            with transaction(conn):
                conn.execute(
                    "UPDATE collections SET target_embedder = ?, target_chunking = ? WHERE id = ?",
                    (embedder.name, target.to_json(), row["id"]),
                )
                # A reindex to another target, abandoned: its rows are of no use now.
                conn.execute(
                    "DELETE FROM documents WHERE collection_id = ? AND NOT (embedder = ? AND chunking = ?)"
                    " AND NOT (embedder = ? AND chunking = ?)",
                    (row["id"], active.embedder, active.chunking.to_json(), embedder.name, target.to_json()),
                )
            building = Generation(row["id"], row["name"], embedder.name, target, active=False)
            sources = [Path(p) for p in self._sources(row["id"])]
            report = self._run(building, sources, embedder, progress, control, reuse_from=active, final=False)
            if report.cancelled:
                return report
            if progress is not None:
                progress(_switching(report))
            with transaction(conn):
                conn.execute(
                    "UPDATE collections SET embedder = ?, chunking = ?, target_embedder = NULL,"
                    " target_chunking = NULL, revision = revision + 1 WHERE id = ?",
                    (embedder.name, target.to_json(), row["id"]),
                )
                conn.execute(
                    "DELETE FROM documents WHERE collection_id = ? AND NOT (embedder = ? AND chunking = ?)",
                    (row["id"], embedder.name, target.to_json()),
                )
            self.matrices.invalidate(row["id"])
            if progress is not None:
                progress(_switching(report, IndexPhase.DONE))
            return report

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
                ids = np.fromiter(
                    (r[0] for r in conn.execute("SELECT v.chunk_id" + active, args)), dtype=np.int64
                )
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

    # -- helpers ---------------------------------------------------------------------------

    def _collection_row(self, name: str) -> sqlite3.Row:
        row = self._conn().execute("SELECT * FROM collections WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise CollectionNotFound(name)
        return row

    def _sources(self, collection_id: int) -> list[str]:
        rows = self._conn().execute(
            "SELECT path FROM sources WHERE collection_id = ? ORDER BY added, path", (collection_id,)
        )
        return [r[0] for r in rows]

    def _add_sources(self, collection_id: int, sources: Sequence[Path]) -> None:
        conn = self._conn()
        with transaction(conn):
            conn.executemany(
                "INSERT OR IGNORE INTO sources (collection_id, path, added) VALUES (?, ?, ?)",
                [(collection_id, str(s), time.time()) for s in sources],
            )

    def _claim_embedder(self, row: sqlite3.Row, embedder: TextEmbedder) -> sqlite3.Row:
        if row["embedder"] is None:
            conn = self._conn()
            with transaction(conn):
                conn.execute(
                    "UPDATE collections SET embedder = ? WHERE id = ? AND embedder IS NULL",
                    (embedder.name, row["id"]),
                )
            row = self._collection_row(row["name"])
            if row["embedder"] != embedder.name:
                raise EmbedderMismatch(row["name"], row["embedder"], embedder.name)
        return row

    def _run_lock(self, collection_id: int) -> threading.Lock:
        # One run per collection at a time in this process: two would race on the same rows.
        with self._lock:
            return self._runs.setdefault(collection_id, threading.Lock())

    def _run(
        self,
        generation: Generation,
        sources: Sequence[Path],
        embedder: TextEmbedder,
        progress: Progress | None,
        control: IndexControl | None,
        reuse_from: Generation | None = None,
        final: bool = True,
    ) -> IndexReport:
        run = IndexRun(
            self._conn(),
            generation,
            embedder,
            parse=self.parse,
            chunk=self.chunk,
            scan=self.scan,
            progress=progress if final else _without_done(progress),
            control=control,
            reuse_from=reuse_from,
        )
        return run.run(sources)


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


def _generation(row: sqlite3.Row, *, active: bool) -> Generation:
    return Generation(
        row["id"], row["name"], row["embedder"], ChunkSettings.from_json(row["chunking"]), active
    )


def _checked_name(name: str) -> str:
    name = name.strip()
    if not name or "\n" in name or "\r" in name:
        raise InvalidCollectionName(name)
    return name


def _absolute(path: Path | str) -> Path:
    # Absolute but not resolved: a folder reached through a symlink keeps the name the user
    # gave it, and the paths listed are the ones they know.
    return Path(os.path.abspath(os.path.expanduser(str(path))))


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _switching(report: IndexReport, phase: IndexPhase = IndexPhase.SWITCHING) -> IndexProgress:
    return IndexProgress(
        phase=phase,
        files_done=report.files,
        files_total=report.files,
        chunks_done=report.chunks_embedded + report.chunks_reused,
        chunks_per_s=0.0,
        seconds_left=0.0,
        current=None,
    )


def _without_done(progress: Progress | None) -> Progress | None:
    """A reindex's build reports everything but its DONE: the switch comes after it."""
    if progress is None:
        return None

    def forward(event: IndexProgress) -> None:
        if event.phase is not IndexPhase.DONE:
            progress(event)

    return forward
