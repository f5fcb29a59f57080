"""The documents index's SQLite file: its connection settings and its schema, versioned.

The index has its own file (the app puts it at ``data_dir/"documents.sqlite3"``) so that a long
indexing run never holds a lock the chat store needs. A schema change is a new entry at the end
of ``MIGRATIONS``, applied once in order: collections built by an older Hearth keep answering
after an upgrade instead of coming back empty.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.documents.index_errors import SchemaTooNew

# How long a connection waits for another writer (the CLI indexing while the window reads)
# before SQLite reports "database is locked".
BUSY_TIMEOUT_MS = 10_000

_V1 = """
CREATE TABLE collections (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    -- the embedder and chunking the collection answers with; NULL embedder until first indexed
    embedder TEXT,
    chunking TEXT NOT NULL,
    -- a reindex in progress builds this generation beside the active one
    target_embedder TEXT,
    target_chunking TEXT,
    -- bumped by every transaction that changes the collection's chunks or vectors: readers
    -- (the in-memory vector matrix) reload when it moved, in this process or another
    revision INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL
);

-- The files and folders the user added: a rescan walks these again.
CREATE TABLE sources (
    collection_id INTEGER NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    added REAL NOT NULL,
    PRIMARY KEY (collection_id, path)
);

-- One row per file per generation (embedder, chunking): a reindex writes new rows beside the
-- old ones and the switch deletes the old generation.
CREATE TABLE documents (
    id INTEGER PRIMARY KEY,
    collection_id INTEGER NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    size INTEGER,
    mtime_ns INTEGER,
    sha256 TEXT,
    status TEXT NOT NULL CHECK (status IN ('indexed', 'refused', 'pending')),
    reason TEXT NOT NULL DEFAULT '',
    embedder TEXT NOT NULL,
    chunking TEXT NOT NULL,
    chunk_count INTEGER NOT NULL DEFAULT 0,
    -- its chunks' tokens summed: whether a collection fits the context whole is read from
    -- here, not from summing every chunk per question
    tokens INTEGER NOT NULL DEFAULT 0,
    indexed_at REAL,
    UNIQUE (collection_id, embedder, chunking, path)
);
CREATE INDEX documents_by_sha ON documents (collection_id, sha256);

-- AUTOINCREMENT: an id is never given twice, so a chunk id read once (the in-memory matrix,
-- a saved citation) always means the same text and the same vector.
CREATE TABLE chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL,
    page INTEGER,
    heading TEXT NOT NULL DEFAULT '',
    start INTEGER NOT NULL,
    "end" INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    text_sha256 TEXT NOT NULL
);
CREATE INDEX chunks_by_document ON chunks (document_id, ordinal);

-- External content over chunks.text, rowid = chunk id. The triggers keep it in step inside
-- the transaction that changes chunks (cascaded deletes fire them too), so BM25 is never
-- rebuilt at query time and never out of date.
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    text, content='chunks', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TRIGGER chunks_fts_update AFTER UPDATE OF text ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO chunks_fts (rowid, text) VALUES (new.id, new.text);
END;

-- float32 little-endian, dim values per row, L2-normalised. One per chunk, its rowid the
-- chunk's id (the matrix is read in one pass, in order); the embedder is named on every
-- row, and a reindex to another model writes new chunks and vectors beside the old ones
-- (the documents of the new generation), so both can be read until the switch.
CREATE TABLE vectors (
    chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    embedder TEXT NOT NULL,
    vector BLOB NOT NULL
);

-- Chunks per second each embedder reached here, for the time a reindex will take.
CREATE TABLE embed_rates (
    embedder TEXT PRIMARY KEY,
    chunks_per_s REAL NOT NULL,
    measured_at REAL NOT NULL
);
"""

# Index i holds the script that takes the schema from version i to i + 1.
MIGRATIONS: tuple[str, ...] = (_V1,)
SCHEMA_VERSION = len(MIGRATIONS)


def connect(path: Path) -> sqlite3.Connection:
    """A connection with the index's settings; any thread may use it (one at a time)."""
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA journal_mode = WAL")
    # In WAL mode NORMAL still survives a killed process (only an OS crash may lose the last
    # commits), and it saves an fsync per file: indexing thousands of files writes far less.
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction, taken at once (no upgrade from a read lock that could fail)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema up to ``SCHEMA_VERSION``; returns the version found before."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = conn.execute("SELECT version FROM schema_version").fetchone()
        found = row[0] if row else 0
        if row is None:
            conn.execute("INSERT INTO schema_version (version) VALUES (0)")
        if found > SCHEMA_VERSION:
            # refusing beats silently misreading a newer layout
            raise SchemaTooNew(found, SCHEMA_VERSION)
        for version in range(found, SCHEMA_VERSION):
            for statement in _statements(MIGRATIONS[version]):
                conn.execute(statement)
        conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return found


def _statements(script: str) -> list[str]:
    """``script`` split into complete statements (triggers hold semicolons inside)."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        if line.lstrip().startswith("--"):
            continue
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip():
        raise ValueError(f"incomplete statement in migration: {current.strip()[:60]}")
    return statements
