"""Incremental indexing: only what changed is embedded again, renames are moves, removals go,
and a run killed with SIGKILL loses at most the file it was on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.documents.index import DocumentIndex
from engine.documents.index_types import DocumentStatus
from tests.engine.documents.hashing_embedder import CountingEmbedder, HashingEmbedder
from tests.engine.documents.standins import SEPARATOR, make_index, paragraphs_of, write_doc

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def index(tmp_path: Path) -> DocumentIndex:
    idx = make_index(tmp_path / "documents.sqlite3")
    idx.create_collection("notes")
    yield idx
    idx.close()


def build(folder: Path, files: int, paragraphs: int) -> dict[str, list[str]]:
    texts = {f"f{i:03d}.txt": paragraphs_of(f"f{i:03d}", paragraphs) for i in range(files)}
    for name, paras in texts.items():
        write_doc(folder / name, paras)
    return texts


def bump_mtime(path: Path) -> None:
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def chunk_ids(index: DocumentIndex, path: Path) -> list[int]:
    rows = index._conn().execute(
        "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.path = ?"
        " ORDER BY c.ordinal",
        (str(path),),
    )
    return [r[0] for r in rows]


def table_counts(index: DocumentIndex) -> tuple[int, int, int]:
    conn = index._conn()
    return tuple(
        conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("documents", "chunks", "vectors")
    )


def test_editing_one_paragraph_of_one_file_of_a_thousand_embeds_only_that_paragraph(
    index: DocumentIndex, tmp_path: Path
) -> None:
    texts = build(tmp_path / "docs", files=1000, paragraphs=3)
    embedder = CountingEmbedder(HashingEmbedder())
    first = index.index_paths("notes", [tmp_path / "docs"], embedder)
    assert (first.indexed, first.chunks_embedded) == (1000, 3000)
    embedder.reset()
    edited = texts["f042.txt"][:]
    edited[2] = "A new second paragraph about otters."
    write_doc(tmp_path / "docs" / "f042.txt", edited)
    bump_mtime(tmp_path / "docs" / "f042.txt")
    report = index.index_paths("notes", [tmp_path / "docs"], embedder)
    assert embedder.texts == ["A new second paragraph about otters."]
    assert (report.indexed, report.unchanged, report.chunks_embedded, report.chunks_reused) == (1, 999, 1, 2)
    assert table_counts(index) == (1000, 3000, 3000)
    hits = (
        index._conn().execute("SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH 'otters'").fetchone()[0]
    )
    gone = index._conn().execute("SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH 'subject2 AND f042'")
    assert hits == 1 and gone.fetchone()[0] == 0


def test_a_restart_embeds_nothing(tmp_path: Path) -> None:
    build(tmp_path / "docs", files=20, paragraphs=3)
    with make_index(tmp_path / "i.sqlite3") as idx:
        idx.create_collection("notes")
        idx.index_paths("notes", [tmp_path / "docs"], HashingEmbedder())
    embedder = CountingEmbedder(HashingEmbedder())
    with make_index(tmp_path / "i.sqlite3") as idx:
        report = idx.index_paths("notes", [tmp_path / "docs"], embedder)
        again = idx.rescan("notes", embedder)
    assert embedder.texts == []
    assert (report.unchanged, report.indexed, again.unchanged) == (20, 0, 20)


def test_a_new_mtime_with_the_same_content_is_only_written_down(index: DocumentIndex, tmp_path: Path) -> None:
    build(tmp_path / "docs", files=3, paragraphs=3)
    index.index_paths("notes", [tmp_path / "docs"], HashingEmbedder())
    path = tmp_path / "docs" / "f001.txt"
    before = chunk_ids(index, path)
    bump_mtime(path)
    embedder = CountingEmbedder(HashingEmbedder())
    report = index.index_paths("notes", [tmp_path / "docs"], embedder)
    assert (report.touched, report.indexed, embedder.texts) == (1, 0, [])
    (doc,) = [d for d in index.documents("notes") if d.path == path]
    assert doc.mtime_ns == path.stat().st_mtime_ns and chunk_ids(index, path) == before
    assert index.index_paths("notes", [tmp_path / "docs"], embedder).unchanged == 3


def test_reordered_and_repeated_paragraphs_reuse_their_vectors(index: DocumentIndex, tmp_path: Path) -> None:
    texts = build(tmp_path / "docs", files=1, paragraphs=4)
    index.index_paths("notes", [tmp_path / "docs"], HashingEmbedder())
    path = tmp_path / "docs" / "f000.txt"
    paras = texts["f000.txt"]
    write_doc(path, [paras[3], paras[1], paras[0], paras[2], paras[1]])
    bump_mtime(path)
    embedder = CountingEmbedder(HashingEmbedder())
    report = index.index_paths("notes", [tmp_path / "docs"], embedder)
    assert embedder.texts == [] and report.chunks_reused == 5
    stored = (
        index._conn().execute("SELECT c.ordinal, c.text, c.start FROM chunks c ORDER BY c.ordinal").fetchall()
    )
    assert [r[1] for r in stored] == [paras[3], paras[1], paras[0], paras[2], paras[1]]
    full = path.read_text()
    assert all(full[r[2] : r[2] + len(r[1])] == r[1] for r in stored)
    assert table_counts(index) == (1, 5, 5)


def test_a_renamed_file_is_moved_not_embedded_again(index: DocumentIndex, tmp_path: Path) -> None:
    build(tmp_path / "docs", files=5, paragraphs=3)
    index.index_paths("notes", [tmp_path / "docs"], HashingEmbedder())
    old, new = tmp_path / "docs" / "f002.txt", tmp_path / "docs" / "sub" / "renamed.txt"
    before = chunk_ids(index, old)
    new.parent.mkdir()
    old.rename(new)
    embedder = CountingEmbedder(HashingEmbedder())
    report = index.index_paths("notes", [tmp_path / "docs"], embedder)
    assert (report.moved, report.removed, report.indexed, embedder.texts) == (1, 0, 0, [])
    assert chunk_ids(index, new) == before and chunk_ids(index, old) == []
    assert table_counts(index) == (5, 15, 15)
    assert index.index_paths("notes", [tmp_path / "docs"], embedder).unchanged == 5


def test_a_removed_file_is_deleted_with_its_chunks_vectors_and_fts_rows(
    index: DocumentIndex, tmp_path: Path
) -> None:
    build(tmp_path / "docs", files=4, paragraphs=3)
    index.index_paths("notes", [tmp_path / "docs"], HashingEmbedder())
    (tmp_path / "docs" / "f003.txt").unlink()
    report = index.index_paths("notes", [tmp_path / "docs"], HashingEmbedder())
    assert report.removed == 1
    assert {d.path.name for d in index.documents("notes")} == {"f000.txt", "f001.txt", "f002.txt"}
    assert table_counts(index) == (3, 9, 9)
    conn = index._conn()
    assert conn.execute("SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH 'f003'").fetchone()[0] == 0
    conn.execute("INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('integrity-check', 1)")


def test_a_folder_that_is_gone_whole_keeps_its_documents_until_it_is_back(
    index: DocumentIndex, tmp_path: Path
) -> None:
    build(tmp_path / "drive" / "docs", files=3, paragraphs=2)
    index.index_paths("notes", [tmp_path / "drive" / "docs"], HashingEmbedder())
    (tmp_path / "drive").rename(tmp_path / "unmounted")
    report = index.index_paths("notes", [tmp_path / "drive" / "docs"], HashingEmbedder())
    assert (report.removed, report.refused) == (0, 1) and table_counts(index)[1:] == (6, 6)
    statuses = {d.path.name: d.status for d in index.documents("notes")}
    assert statuses == {
        **{f"f00{i}.txt": DocumentStatus.INDEXED for i in range(3)},
        "docs": DocumentStatus.REFUSED,
    }
    (tmp_path / "unmounted").rename(tmp_path / "drive")
    embedder = CountingEmbedder(HashingEmbedder())
    report = index.index_paths("notes", [tmp_path / "drive" / "docs"], embedder)
    assert embedder.texts == [] and report.unchanged == 3 and table_counts(index) == (3, 6, 6)


def test_files_outside_the_paths_given_are_left_alone(index: DocumentIndex, tmp_path: Path) -> None:
    build(tmp_path / "one", files=2, paragraphs=2)
    build(tmp_path / "two", files=2, paragraphs=2)
    index.index_paths("notes", [tmp_path / "one"], HashingEmbedder())
    report = index.index_paths("notes", [tmp_path / "two"], HashingEmbedder())
    assert (report.removed, report.indexed) == (0, 2)
    assert index.collection("notes").indexed == 4


def test_a_new_file_embeds_only_its_own_chunks(index: DocumentIndex, tmp_path: Path) -> None:
    build(tmp_path / "docs", files=10, paragraphs=3)
    index.index_paths("notes", [tmp_path / "docs"], HashingEmbedder())
    write_doc(tmp_path / "docs" / "new.txt", ["First new thing.", "Second new thing."])
    embedder = CountingEmbedder(HashingEmbedder())
    report = index.index_paths("notes", [tmp_path / "docs"], embedder)
    assert embedder.texts == ["First new thing.", "Second new thing."] and report.unchanged == 10


def test_sigkill_mid_index_keeps_every_committed_file_and_a_resume_embeds_only_the_rest(
    tmp_path: Path,
) -> None:
    files, paragraphs = 8, 70  # three embedding batches per file: the kill lands inside one
    texts = build(tmp_path / "docs", files=files, paragraphs=paragraphs)
    db = tmp_path / "documents.sqlite3"
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.engine.documents.index_child", str(db), str(tmp_path / "docs")],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = []
    try:
        deadline = time.monotonic() + 60
        assert child.stdout is not None
        while time.monotonic() < deadline:
            line = child.stdout.readline().strip()
            lines.append(line)
            if line == "batch" or not line:
                break
        assert lines[-1] == "batch", (lines, child.stderr.read() if child.stderr else "")
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(10)
    assert child.returncode == -signal.SIGKILL
    committed = max(int(line.split()[1]) for line in lines if line.startswith("committed"))
    assert committed >= 3

    with make_index(db) as idx:
        conn = idx._conn()
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.execute("INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('integrity-check', 1)")
        docs = idx.documents("notes")
        done = [d for d in docs if d.status is DocumentStatus.INDEXED]
        assert len(done) == committed  # every committed file, and nothing of the one in progress
        assert all(d.status is DocumentStatus.PENDING for d in docs if d not in done)
        for doc in done:
            stored = conn.execute(
                "SELECT c.text FROM chunks c JOIN vectors v ON v.chunk_id = c.id WHERE c.document_id = ?"
                " ORDER BY c.ordinal",
                (doc.id,),
            ).fetchall()
            assert [r[0] for r in stored] == texts[doc.path.name]
        assert conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == committed * paragraphs

        embedder = CountingEmbedder(HashingEmbedder())
        report = idx.index_paths("notes", [tmp_path / "docs"], embedder)
        rest = sorted(set(texts) - {d.path.name for d in done})
        assert sorted(embedder.texts) == sorted(t for name in rest for t in texts[name])
        assert (report.unchanged, report.indexed) == (committed, files - committed)
        assert idx.collection("notes").chunks == files * paragraphs
        assert SEPARATOR.join(texts["f000.txt"]) == (tmp_path / "docs" / "f000.txt").read_text()
