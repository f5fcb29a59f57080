"""One indexing run over a collection's generation: scan, then one transaction per file.

A file's stat is compared first (size and mtime unchanged: not read), then its SHA-256 (content
unchanged: only the mtime written), and only then is it parsed and chunked; of its chunks, only
those whose text was not embedded for this document before are embedded (an edit to one paragraph
embeds that paragraph's chunks). A file that vanished and reappears elsewhere with the same content
is moved, not embedded again. Everything a file needs is computed before its transaction opens and
written in that one transaction: a run killed at any moment loses at most the file it was on.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine.base.errors import EngineError
from engine.documents.embedder_protocol import TextEmbedder
from engine.documents.index_control import IndexControl
from engine.documents.index_inputs import (
    Chunk,
    Parse,
    Scan,
    file_sha,
    one_line,
    refusal_reason,
    text_sha,
)
from engine.documents.index_progress import Progress, RunMeter
from engine.documents.index_schema import transaction
from engine.documents.index_types import ChunkSettings, DocumentStatus, IndexPhase, IndexReport
from engine.documents.vector_matrix import vector_blob

if TYPE_CHECKING:
    from engine.documents.chunking import Chunk as DocumentChunk
    from engine.documents.errors import DocumentRefused

log = logging.getLogger(__name__)

EMBED_BATCH = 32  # texts per embed call: the call's overhead gone, a pause still answers quickly


@dataclass(frozen=True)
class Generation:
    """The rows of one collection built with one embedder and one chunking."""

    collection_id: int
    collection: str
    embedder: str
    chunking: ChunkSettings
    active: bool  # the one queries use; writes to it move the collection's revision


@dataclass
class _Row:
    id: int
    path: str
    size: int | None
    mtime_ns: int | None
    sha256: str | None
    status: DocumentStatus
    reason: str = ""


@dataclass(frozen=True)
class _Prepared:
    """A file read, parsed, chunked and embedded, waiting for its transaction."""

    chunks: Sequence[DocumentChunk]
    shas: list[str]
    vectors: dict[str, bytes]  # text sha -> blob for every chunk not kept from before


def in_scope(path: str, sources: Sequence[Path]) -> bool:
    candidate = Path(path)
    return any(candidate == source or source in candidate.parents for source in sources)


class IndexRun:
    """Brings one generation up to date with the files under ``sources``."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        generation: Generation,
        embedder: TextEmbedder,
        *,
        parse: Parse,
        chunk: Chunk,
        scan: Scan,
        progress: Progress | None,
        control: IndexControl | None,
        reuse_from: Generation | None = None,
    ) -> None:
        self.conn = conn
        self.gen = generation
        self.embedder = embedder
        self.parse = parse
        self.chunk = chunk
        self.scan = scan
        self.progress = progress
        self.control = control or IndexControl()
        self.reuse_from = reuse_from
        self.meter = RunMeter(generation.collection)

    # -- the run ---------------------------------------------------------------------------

    def run(self, sources: Sequence[Path]) -> IndexReport:
        self._emit(IndexPhase.SCANNING)
        result = self.scan(list(sources))
        files = [Path(os.path.abspath(p)) for p in result.files]
        refusals = list(result.refusals)
        existing = self._rows()
        self.meter.files_total = len(files) + len(refusals)
        found = {str(p) for p in files} | {str(Path(os.path.abspath(r.path))) for r in refusals}
        # A folder added that is not there at all (an unmounted drive, a network share that is
        # down) says nothing about its files: they are kept until it is back or the user removes it.
        present = [s for s in sources if os.path.lexists(s)]
        missing = [row for key, row in existing.items() if key not in found and in_scope(key, present)]
        stats = self._stats(files)
        if missing:
            self._move_renamed(files, stats, existing, missing)
        if missing:
            self._remove(missing)
        self._store_scan_refusals(refusals, existing)
        self._add_pending([p for p in files if str(p) not in existing], existing)

        todo: list[Path] = []
        for path in files:
            row, info = existing[str(path)], stats.get(str(path))
            if info is not None and _unchanged(row, info):
                self.meter.unchanged += 1
                self.meter.files_done += 1
            else:
                todo.append(path)
                self.meter.bytes_todo += info.st_size if info is not None else 0
        self.meter.files_done += len(refusals)
        self._emit(IndexPhase.INDEXING)

        cancelled = False
        for path in todo:
            if not self._checkpoint():
                cancelled = True
                break
            self.meter.begin_file(path)
            done = self._index_file(path, existing[str(path)], stats.get(str(path)))
            info = stats.get(str(path))
            self.meter.end_file(info.st_size if info is not None else None, done)
            if not done:
                cancelled = True
                break
            self._emit(IndexPhase.INDEXING)
        self.meter.current = None
        self._save_rate()
        self._emit(IndexPhase.CANCELLED if cancelled else IndexPhase.DONE)
        return self.meter.report(len(files) + len(refusals), cancelled)

    # -- reading the generation ------------------------------------------------------------

    def _rows(self) -> dict[str, _Row]:
        rows = self.conn.execute(
            "SELECT id, path, size, mtime_ns, sha256, status, reason FROM documents"
            " WHERE collection_id = ? AND embedder = ? AND chunking = ?",
            (self.gen.collection_id, self.gen.embedder, self.gen.chunking.to_json()),
        )
        return {
            r["path"]: _Row(
                r["id"],
                r["path"],
                r["size"],
                r["mtime_ns"],
                r["sha256"],
                DocumentStatus(r["status"]),
                r["reason"],
            )
            for r in rows
        }

    def _stats(self, files: Sequence[Path]) -> dict[str, os.stat_result]:
        stats = {}
        for path in files:
            # Gone since the scan, or unreadable: _index_file refuses it with the reason.
            with contextlib.suppress(OSError):
                stats[str(path)] = os.stat(path)
        return stats

    # -- renames, removals, refusals found by the scan -------------------------------------

    def _move_renamed(
        self,
        files: Sequence[Path],
        stats: dict[str, os.stat_result],
        existing: dict[str, _Row],
        missing: list[_Row],
    ) -> None:
        by_size: dict[int, list[_Row]] = defaultdict(list)
        for row in missing:
            if row.status is DocumentStatus.INDEXED and row.size is not None and row.sha256:
                by_size[row.size].append(row)
        for path in files:
            key, info = str(path), stats.get(str(path))
            # A rename keeps the size: only new files of a missing one's size are hashed here.
            if key in existing or info is None or not by_size.get(info.st_size):
                continue
            try:
                sha = file_sha(path)
            except OSError:
                continue
            row = next((r for r in by_size[info.st_size] if r.sha256 == sha), None)
            if row is None:
                continue
            with transaction(self.conn):
                self.conn.execute(
                    "UPDATE documents SET path = ?, size = ?, mtime_ns = ? WHERE id = ?",
                    (key, info.st_size, info.st_mtime_ns, row.id),
                )
                self._bump()
            by_size[info.st_size].remove(row)
            missing.remove(row)
            del existing[row.path]
            row.path, row.size, row.mtime_ns = key, info.st_size, info.st_mtime_ns
            existing[key] = row
            self.meter.moved += 1

    def _remove(self, missing: Sequence[_Row]) -> None:
        with transaction(self.conn):
            self.conn.executemany("DELETE FROM documents WHERE id = ?", [(row.id,) for row in missing])
            self._bump()
        self.meter.removed += len(missing)

    def _store_scan_refusals(self, refusals: Sequence[DocumentRefused], existing: dict[str, _Row]) -> None:
        changed = []
        for refusal in refusals:
            key, reason = str(Path(os.path.abspath(refusal.path))), one_line(refusal.reason)
            row = existing.get(key)
            if row is not None and row.status is DocumentStatus.REFUSED and row.reason == reason:
                self.meter.unchanged += 1  # refused before for the same reason: nothing to write
            else:
                changed.append((key, reason, row))
        if not changed:
            return
        with transaction(self.conn):
            for key, reason, row in changed:
                if row is None:
                    existing[key] = self._insert_row(key, DocumentStatus.REFUSED, reason)
                else:
                    self._refuse_row(row, reason, None, None)
            self._bump()
        self.meter.refused += len(changed)

    def _add_pending(self, paths: Sequence[Path], existing: dict[str, _Row]) -> None:
        """New files are listed at once, as pending: the user sees what is coming, and a run
        stopped before reaching them leaves them pending rather than unlisted."""
        if not paths:
            return
        with transaction(self.conn):
            for path in paths:
                existing[str(path)] = self._insert_row(str(path), DocumentStatus.PENDING, "")

    def _insert_row(self, path: str, status: DocumentStatus, reason: str) -> _Row:
        cursor = self.conn.execute(
            "INSERT INTO documents (collection_id, path, status, reason, embedder, chunking)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (
                self.gen.collection_id,
                path,
                status.value,
                one_line(reason),
                self.gen.embedder,
                self.gen.chunking.to_json(),
            ),
        )
        return _Row(int(cursor.lastrowid or 0), path, None, None, None, status, one_line(reason))

    def _refuse_row(self, row: _Row, reason: str, info: os.stat_result | None, sha: str | None) -> None:
        self.conn.execute("DELETE FROM chunks WHERE document_id = ?", (row.id,))
        self.conn.execute(
            "UPDATE documents SET status = 'refused', reason = ?, size = ?, mtime_ns = ?, sha256 = ?,"
            " chunk_count = 0, tokens = 0, indexed_at = ? WHERE id = ?",
            (
                reason,
                info.st_size if info else None,
                info.st_mtime_ns if info else None,
                sha,
                time.time(),
                row.id,
            ),
        )
        row.status, row.sha256, row.reason = DocumentStatus.REFUSED, sha, reason
        row.size, row.mtime_ns = (info.st_size, info.st_mtime_ns) if info else (None, None)

    # -- one file --------------------------------------------------------------------------

    def _index_file(self, path: Path, row: _Row, info: os.stat_result | None) -> bool:
        """False when cancelled before the file was written (nothing of it is)."""
        try:
            if info is None:
                info = os.stat(path)
            sha = file_sha(path)
        except OSError as error:
            self._refuse(row, refusal_reason(error), None, None)
            return True
        if row.sha256 == sha and row.status is not DocumentStatus.PENDING:
            with transaction(self.conn):
                self.conn.execute(
                    "UPDATE documents SET size = ?, mtime_ns = ? WHERE id = ?",
                    (info.st_size, info.st_mtime_ns, row.id),
                )
            row.size, row.mtime_ns = info.st_size, info.st_mtime_ns
            self.meter.touched += 1
            return True
        try:
            doc = self.parse(path)
            max_tokens = min(self.gen.chunking.max_tokens, self.embedder.window)
            chunks = list(
                self.chunk(
                    doc, self.embedder.count_tokens, max_tokens=max_tokens, overlap=self.gen.chunking.overlap
                )
            )
        except (EngineError, OSError) as error:
            self._refuse(row, refusal_reason(error), info, sha)
            return True
        except Exception as error:  # a reader's bug must not stop the rest of the collection
            log.exception("could not parse %s", path)
            self._refuse(row, refusal_reason(error), info, sha)
            return True
        if not chunks:
            self._refuse(row, "no text to index", info, sha)
            return True
        prepared = self._prepare(row, chunks)
        if prepared is None:
            return False
        self._write(row, prepared, info, sha)
        return True

    def _refuse(self, row: _Row, reason: str, info: os.stat_result | None, sha: str | None) -> None:
        with transaction(self.conn):
            self._refuse_row(row, reason, info, sha)
            self._bump()
        self.meter.refused += 1

    def _known_vectors(self, row: _Row) -> dict[str, bytes]:
        """Vectors already computed by this embedder for this document, by chunk text."""
        known = {
            r[0]: r[1]
            for r in self.conn.execute(
                "SELECT c.text_sha256, v.vector FROM chunks c JOIN vectors v ON v.chunk_id = c.id"
                " WHERE c.document_id = ? AND v.embedder = ?",
                (row.id, self.gen.embedder),
            )
        }
        other = self.reuse_from
        if other is not None and other.embedder == self.gen.embedder:
            for r in self.conn.execute(
                "SELECT c.text_sha256, v.vector FROM documents d JOIN chunks c ON c.document_id = d.id"
                " JOIN vectors v ON v.chunk_id = c.id"
                " WHERE d.collection_id = ? AND d.embedder = ? AND d.chunking = ? AND d.path = ?"
                " AND v.embedder = ?",
                (other.collection_id, other.embedder, other.chunking.to_json(), row.path, other.embedder),
            ):
                known.setdefault(r[0], r[1])
        return known

    def _prepare(self, row: _Row, chunks: Sequence[DocumentChunk]) -> _Prepared | None:
        shas = [text_sha(c.text) for c in chunks]
        known = self._known_vectors(row)
        wanted: dict[str, str] = {}
        for sha, c in zip(shas, chunks, strict=True):
            if sha not in known:
                wanted.setdefault(sha, c.text)
        self.meter.reused += sum(1 for sha in shas if sha in known)
        vectors = {sha: known[sha] for sha in shas if sha in known}
        pending = list(wanted.items())
        embedded_here = 0
        for begin in range(0, len(pending), EMBED_BATCH):
            if not self._checkpoint():
                return None
            batch = pending[begin : begin + EMBED_BATCH]
            started = time.monotonic()
            out = np.asarray(self.embedder.embed([text for _, text in batch]), dtype=np.float32)
            self.meter.embed_seconds += time.monotonic() - started
            if out.shape != (len(batch), self.embedder.dim):
                raise ValueError(f"embedder returned {out.shape}, expected {(len(batch), self.embedder.dim)}")
            for (sha, _), vector in zip(batch, out, strict=True):
                vectors[sha] = vector_blob(vector)
            self.meter.embedded += len(batch)
            embedded_here += len(batch)
            self._emit(IndexPhase.INDEXING, file_chunks=embedded_here)
        return _Prepared(chunks, shas, vectors)

    def _write(self, row: _Row, prepared: _Prepared, info: os.stat_result, sha: str) -> None:
        conn = self.conn
        with transaction(conn):
            # Chunks whose text is unchanged keep their row (and with it their vector and FTS
            # entry); only their place in the document is brought up to date.
            old: dict[str, list[sqlite3.Row]] = defaultdict(list)
            for r in conn.execute(
                'SELECT id, text_sha256, ordinal, page, heading, start, "end", tokens FROM chunks'
                " WHERE document_id = ? ORDER BY ordinal",
                (row.id,),
            ):
                old[r["text_sha256"]].append(r)
            for c, text_hash in zip(prepared.chunks, prepared.shas, strict=True):
                place = (c.ordinal, c.page, c.heading or "", c.start, c.end, c.tokens)
                kept = old.get(text_hash)
                if kept:
                    r = kept.pop(0)
                    if tuple(r)[2:] != place:
                        conn.execute(
                            'UPDATE chunks SET ordinal = ?, page = ?, heading = ?, start = ?, "end" = ?,'
                            " tokens = ? WHERE id = ?",
                            (*place, r["id"]),
                        )
                    continue
                cursor = conn.execute(
                    'INSERT INTO chunks (document_id, ordinal, text, page, heading, start, "end", tokens,'
                    " text_sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (row.id, c.ordinal, c.text, c.page, c.heading or "", c.start, c.end, c.tokens, text_hash),
                )
                conn.execute(
                    "INSERT INTO vectors (chunk_id, embedder, vector) VALUES (?, ?, ?)",
                    (cursor.lastrowid, self.gen.embedder, prepared.vectors[text_hash]),
                )
            gone = [(r["id"],) for rows in old.values() for r in rows]
            conn.executemany("DELETE FROM chunks WHERE id = ?", gone)
            conn.execute(
                "UPDATE documents SET status = 'indexed', reason = '', size = ?, mtime_ns = ?, sha256 = ?,"
                " chunk_count = ?, tokens = ?, indexed_at = ? WHERE id = ?",
                (
                    info.st_size,
                    info.st_mtime_ns,
                    sha,
                    len(prepared.chunks),
                    sum(c.tokens for c in prepared.chunks),
                    time.time(),
                    row.id,
                ),
            )
            self._bump()
        row.status, row.sha256, row.size, row.mtime_ns = (
            DocumentStatus.INDEXED,
            sha,
            info.st_size,
            info.st_mtime_ns,
        )
        self.meter.indexed += 1
        self.meter.stored += len(prepared.chunks)

    # -- bookkeeping -----------------------------------------------------------------------

    def _bump(self) -> None:
        if self.gen.active:
            self.conn.execute(
                "UPDATE collections SET revision = revision + 1 WHERE id = ?", (self.gen.collection_id,)
            )

    def _checkpoint(self) -> bool:
        began = time.monotonic()
        go_on = self.control.checkpoint(on_pause=lambda: self._emit(IndexPhase.PAUSED))
        waited = time.monotonic() - began
        self.meter.paused_seconds += waited
        if waited > 0.05 and go_on:
            self._emit(IndexPhase.INDEXING)
        return go_on

    def _save_rate(self) -> None:
        # A handful of chunks says more about start-up than about the rate.
        if self.meter.embedded < EMBED_BATCH or self.meter.embed_seconds <= 0:
            return
        save_rate(self.conn, self.gen.embedder, self.meter.embedded / self.meter.embed_seconds)

    def _emit(self, phase: IndexPhase, file_chunks: int = 0) -> None:
        if self.progress is not None:
            self.progress(self.meter.progress(phase, file_chunks))


def _unchanged(row: _Row, info: os.stat_result) -> bool:
    return (
        row.status is not DocumentStatus.PENDING
        and row.size == info.st_size
        and row.mtime_ns == info.st_mtime_ns
    )


def save_rate(conn: sqlite3.Connection, embedder: str, chunks_per_s: float) -> None:
    conn.execute(
        "INSERT INTO embed_rates (embedder, chunks_per_s, measured_at) VALUES (?, ?, ?)"
        " ON CONFLICT (embedder) DO UPDATE SET chunks_per_s = excluded.chunks_per_s,"
        " measured_at = excluded.measured_at",
        (embedder, chunks_per_s, time.time()),
    )
