"""The documents index: collections of the user's files, their chunks, FTS5 and vectors in SQLite.

``DocumentIndex(db_path)`` owns one SQLite file (WAL, foreign keys on; the connections and
retrieval's reads are ``IndexStore``'s, in ``index_store``). A collection answers with
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
from collections.abc import Iterable, Sequence
from pathlib import Path

from engine.documents.embedder_protocol import TextEmbedder
from engine.documents.index_control import IndexControl
from engine.documents.index_errors import (
    CollectionExists,
    EmbedderMismatch,
    InvalidCollectionName,
)
from engine.documents.index_inputs import Chunk, Parse, Scan, default_chunk, default_parse, default_scan
from engine.documents.index_progress import Progress, switching, without_done
from engine.documents.index_schema import transaction
from engine.documents.index_store import IndexStore
from engine.documents.index_types import (
    ChunkSettings,
    CollectionInfo,
    DocumentInfo,
    DocumentStatus,
    IndexPhase,
    IndexReport,
    ReindexPlan,
)
from engine.documents.indexing import (
    EMBED_BATCH,
    Generation,
    IndexRun,
    save_rate,
)

# The text embedded to measure an embedder's rate when the collection has no chunks yet.
_RATE_PROBE = "A paragraph of an ordinary document, long enough to be a typical chunk of text. " * 6


class DocumentIndex(IndexStore):
    def __init__(
        self,
        db_path: Path,
        *,
        parse: Parse | None = None,
        chunk: Chunk | None = None,
        scan: Scan | None = None,
    ) -> None:
        super().__init__(db_path)
        self._parse = parse
        self._chunk = chunk
        self._scan = scan
        self._runs: dict[int, threading.Lock] = {}

    def __enter__(self) -> DocumentIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def parse(self) -> Parse:
        return self._parse or default_parse()

    @property
    def chunk(self) -> Chunk:
        return self._chunk or default_chunk()

    @property
    def scan(self) -> Scan:
        return self._scan or default_scan()

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

    def document_pages(self, name: str) -> dict[int, int]:
        """Pages of each paged document of the collection (active generation), by document id:
        the last page its chunks reach (a PDF's pages without text hold no chunk)."""
        row = self._collection_row(name)
        rows = self._conn().execute(
            "SELECT d.id, MAX(c.page) FROM documents d JOIN chunks c ON c.document_id = d.id"
            " WHERE d.collection_id = ? AND d.embedder = ? AND d.chunking = ? AND c.page IS NOT NULL"
            " GROUP BY d.id",
            (row["id"], row["embedder"] or "", row["chunking"]),
        )
        return {r[0]: r[1] for r in rows}

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
        mismatch = row["embedder"] is not None and row["embedder"] != embedder.name
        if mismatch and row["target_embedder"] != embedder.name:
            raise EmbedderMismatch(name, row["embedder"], embedder.name)
        sources = [_absolute(p) for p in paths]
        self._add_sources(row["id"], sources)
        if mismatch:
            # A reindex to this embedder is under way: the new files join it.
            return self.reindex(
                name,
                embedder,
                ChunkSettings.from_json(row["target_chunking"]),
                progress=progress,
                control=control,
            )
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
                progress(switching(report))
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
                progress(switching(report, IndexPhase.DONE))
            return report

    # -- helpers ---------------------------------------------------------------------------

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
            progress=progress if final else without_done(progress),
            control=control,
            reuse_from=reuse_from,
        )
        return run.run(sources)


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
