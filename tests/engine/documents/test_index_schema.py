"""The documents index's file: WAL, foreign keys, a busy timeout, and a schema that migrates
once, in one transaction, and refuses a newer one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engine.documents import index_schema
from engine.documents.index import DocumentIndex
from engine.documents.index_errors import SchemaTooNew
from tests.engine.documents.hashing_embedder import CountingEmbedder, HashingEmbedder
from tests.engine.documents.standins import make_index, paragraphs_of, write_doc


@pytest.fixture
def index(tmp_path: Path) -> DocumentIndex:
    idx = make_index(tmp_path / "documents.sqlite3")
    yield idx
    idx.close()


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder(HashingEmbedder())


def rows(conn: sqlite3.Connection, sql: str) -> list[tuple]:
    return [tuple(r) for r in conn.execute(sql)]


def corpus(folder: Path, files: int = 3, paragraphs: int = 4) -> list[Path]:
    return [write_doc(folder / f"doc{i}.txt", paragraphs_of(f"doc{i}", paragraphs)) for i in range(files)]


def test_the_file_is_wal_with_foreign_keys_a_busy_timeout_and_a_schema_version(index: DocumentIndex) -> None:
    conn = index._conn()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == index_schema.BUSY_TIMEOUT_MS
    assert rows(conn, "SELECT version FROM schema_version") == [(index_schema.SCHEMA_VERSION,)]
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert {"collections", "documents", "chunks", "chunks_fts", "vectors", "sources"} <= tables


def test_reopening_keeps_the_data_and_does_not_migrate_again(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    corpus(tmp_path / "docs")
    with make_index(tmp_path / "i.sqlite3") as idx:
        idx.create_collection("notes")
        idx.index_paths("notes", [tmp_path / "docs"], embedder)
    with make_index(tmp_path / "i.sqlite3") as idx:
        assert index_schema.migrate(idx._conn()) == index_schema.SCHEMA_VERSION
        assert idx.collection("notes").chunks == 12


def test_a_new_migration_runs_once_over_an_old_file_and_keeps_its_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with make_index(tmp_path / "i.sqlite3") as idx:
        idx.create_collection("old")
    v2 = "ALTER TABLE collections ADD COLUMN colour TEXT NOT NULL DEFAULT 'blue';"
    monkeypatch.setattr(index_schema, "MIGRATIONS", (*index_schema.MIGRATIONS, v2))
    monkeypatch.setattr(index_schema, "SCHEMA_VERSION", len(index_schema.MIGRATIONS))
    conn = index_schema.connect(tmp_path / "i.sqlite3")
    assert index_schema.migrate(conn) == 1
    assert index_schema.migrate(conn) == 2  # a second open finds it done: the ALTER does not run again
    assert rows(conn, "SELECT name, colour FROM collections") == [("old", "blue")]
    conn.close()


def test_a_file_from_a_newer_hearth_is_refused(tmp_path: Path) -> None:
    with make_index(tmp_path / "i.sqlite3") as idx:
        idx._conn().execute("UPDATE schema_version SET version = 99")
    with pytest.raises(SchemaTooNew, match="newer Hearth"):
        make_index(tmp_path / "i.sqlite3")


def test_a_failed_migration_leaves_the_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with make_index(tmp_path / "i.sqlite3") as idx:
        idx.create_collection("old")
    broken = "CREATE TABLE extra (x INTEGER);\nINSERT INTO no_such_table VALUES (1);"
    monkeypatch.setattr(index_schema, "MIGRATIONS", (*index_schema.MIGRATIONS, broken))
    monkeypatch.setattr(index_schema, "SCHEMA_VERSION", 2)
    conn = index_schema.connect(tmp_path / "i.sqlite3")
    with pytest.raises(sqlite3.OperationalError):
        index_schema.migrate(conn)
    assert conn.execute("SELECT version FROM schema_version").fetchone()[0] == 1
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'extra'").fetchone() is None
    conn.close()
