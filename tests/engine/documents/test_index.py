"""The documents index: collections, what indexing stores,
refusals, progress, pause and cancel, and reindexing beside the old index."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import FrozenInstanceError
from pathlib import Path

import numpy as np
import pytest

from engine.documents.index import DocumentIndex
from engine.documents.index_control import IndexControl
from engine.documents.index_errors import (
    CollectionExists,
    CollectionNotFound,
    EmbedderMismatch,
    InvalidCollectionName,
)
from engine.documents.index_types import ChunkSettings, DocumentStatus, IndexPhase, IndexProgress
from engine.documents.indexing import EMBED_BATCH
from engine.documents.retrieval import RetrievalMode, retrieve
from tests.engine.documents import standins
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


def corpus(folder: Path, files: int = 3, paragraphs: int = 4) -> list[Path]:
    return [write_doc(folder / f"doc{i}.txt", paragraphs_of(f"doc{i}", paragraphs)) for i in range(files)]


def fts_integrity(index: DocumentIndex) -> None:
    # FTS5 raises "database disk image is malformed" when the index and its content differ.
    index._conn().execute("INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('integrity-check', 1)")


def rows(conn: sqlite3.Connection, sql: str) -> list[tuple]:
    return [tuple(r) for r in conn.execute(sql)]


def count(index: DocumentIndex, table: str) -> int:
    return index._conn().execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


# -- collections ---------------------------------------------------------------------------


def test_collections_are_created_listed_renamed_and_removed(index: DocumentIndex) -> None:
    made = index.create_collection("  Work notes ")
    assert made.name == "Work notes"
    assert made.embedder is None and made.documents == 0 and made.reindex_to is None
    index.create_collection("alpha")
    assert [c.name for c in index.collections()] == ["alpha", "Work notes"]
    index.rename_collection("alpha", "beta")
    assert [c.name for c in index.collections()] == ["beta", "Work notes"]
    index.remove_collection("beta")
    assert [c.name for c in index.collections()] == ["Work notes"]


def test_collection_errors_are_typed_one_liners(index: DocumentIndex) -> None:
    index.create_collection("a")
    index.create_collection("b")
    with pytest.raises(CollectionExists, match="already exists"):
        index.create_collection("a")
    with pytest.raises(CollectionExists):
        index.rename_collection("a", "b")
    with pytest.raises(CollectionNotFound, match="no collection named “zzz”"):
        index.collection("zzz")
    with pytest.raises(CollectionNotFound):
        index.remove_collection("zzz")
    for bad in ("", "   ", "two\nlines"):
        with pytest.raises(InvalidCollectionName):
            index.create_collection(bad)


def test_a_collection_takes_the_chunkers_own_defaults_unless_told(index: DocumentIndex) -> None:
    assert index.create_collection("a").chunking == ChunkSettings(max_tokens=64, overlap=0.0)
    chosen = ChunkSettings(max_tokens=128, overlap=0.1)
    assert index.create_collection("b", chosen).chunking == chosen
    assert ChunkSettings.from_json(chosen.to_json()) == chosen


def test_removing_a_collection_removes_its_documents_chunks_vectors_and_fts_rows(
    index: DocumentIndex, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    corpus(tmp_path / "docs")
    index.create_collection("a")
    index.index_paths("a", [tmp_path / "docs"], embedder)
    assert count(index, "vectors") == 12
    index.remove_collection("a")
    for table in ("documents", "chunks", "vectors", "sources"):
        assert count(index, table) == 0, table
    assert (
        index._conn().execute("SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH 'notes'").fetchone()[0]
        == 0
    )
    fts_integrity(index)


# -- what indexing stores ------------------------------------------------------------------


def test_indexing_stores_chunks_with_their_places_fts_rows_and_the_embedders_vectors(
    index: DocumentIndex, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    path = write_doc(
        tmp_path / "docs" / "paper.txt",
        [
            "[page 1]",
            "# Intro",
            "Kangaroos hop across the plain.",
            "[page 2]",
            "Wombats dig burrows at night.",
        ],
    )
    index.create_collection("a")
    report = index.index_paths("a", [tmp_path / "docs"], embedder)
    assert (report.indexed, report.chunks_embedded, report.files) == (1, 3, 1)
    rows = (
        index._conn()
        .execute('SELECT ordinal, text, page, heading, start, "end", tokens FROM chunks')
        .fetchall()
    )
    text = (tmp_path / "docs" / "paper.txt").read_text()
    full = standins.SEPARATOR.join(s.text for s in standins.parse(path).sections)
    assert [tuple(r) for r in rows] == [
        (0, "# Intro", 1, "Intro", 0, 7, 2),
        (1, "Kangaroos hop across the plain.", 1, "Intro", 9, 40, 6),
        (2, "Wombats dig burrows at night.", 2, "Intro", 42, 71, 6),
    ]
    assert all(full[r["start"] : r["end"]] == r["text"] for r in rows) and "Wombats" in text
    (doc,) = index.documents("a")
    assert doc.status is DocumentStatus.INDEXED and doc.chunk_count == 3 and doc.reason == ""
    assert doc.path == path.absolute() and doc.size == path.stat().st_size and len(doc.sha256 or "") == 64
    blobs = index._conn().execute(
        "SELECT v.vector FROM vectors v JOIN chunks c ON c.id = v.chunk_id ORDER BY c.ordinal"
    )
    stored = np.stack([np.frombuffer(b[0], dtype="<f4") for b in blobs])
    assert np.array_equal(stored, HashingEmbedder().embed([r["text"] for r in rows]))
    hits = index._conn().execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'burrow'").fetchall()
    assert len(hits) == 1  # porter: "burrow" finds "burrows"
    fts_integrity(index)
    info = index.collection("a")
    assert (info.embedder, info.indexed, info.chunks, info.tokens) == (embedder.name, 1, 3, 14)


def test_texts_are_embedded_in_batches_of_32(
    index: DocumentIndex, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    write_doc(tmp_path / "docs" / "long.txt", paragraphs_of("long", 70))
    index.create_collection("a")
    index.index_paths("a", [tmp_path / "docs"], embedder)
    assert EMBED_BATCH == 32
    assert embedder.calls == [32, 32, 6]


def test_refusals_are_listed_with_their_line_and_the_rest_indexes(
    index: DocumentIndex, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    corpus(tmp_path / "docs", files=2)
    (tmp_path / "docs" / "binary.txt").write_bytes(b"\x00\x01\x02 not text")
    (tmp_path / "docs" / "empty.txt").write_text("\n\n\n")
    index.create_collection("a")
    report = index.index_paths("a", [tmp_path / "docs", tmp_path / "nowhere.txt"], embedder)
    assert (report.indexed, report.refused) == (2, 3)
    listed = {d.path.name: (d.status, d.reason) for d in index.documents("a")}
    assert listed == {
        "binary.txt": (DocumentStatus.REFUSED, "binary file, not text"),
        "doc0.txt": (DocumentStatus.INDEXED, ""),
        "doc1.txt": (DocumentStatus.INDEXED, ""),
        "empty.txt": (DocumentStatus.REFUSED, "empty document"),
        "nowhere.txt": (DocumentStatus.REFUSED, "not found"),
    }
    assert index.collection("a").refused == 3
    revision = index.active(["a"])[0].revision
    again = index.index_paths("a", [tmp_path / "docs", tmp_path / "nowhere.txt"], embedder)
    # Refused files unchanged, or refused again for the same reason: not read, nothing written.
    assert (again.unchanged, again.indexed, again.refused) == (5, 0, 0)
    assert index.active(["a"])[0].revision == revision


def test_a_readers_crash_refuses_that_file_only(tmp_path: Path, embedder: CountingEmbedder) -> None:
    corpus(tmp_path / "docs", files=3)

    def parse(path: Path) -> standins.Doc:
        if path.name == "doc1.txt":
            raise RuntimeError("reader bug\nwith a second line")
        return standins.parse(path)

    with DocumentIndex(tmp_path / "i.sqlite3", parse=parse, chunk=standins.chunk, scan=standins.scan) as idx:
        idx.create_collection("a")
        report = idx.index_paths("a", [tmp_path / "docs"], embedder)
        assert (report.indexed, report.refused) == (2, 1)
        (bad,) = [d for d in idx.documents("a") if d.status is DocumentStatus.REFUSED]
        assert bad.path.name == "doc1.txt"
        assert bad.reason == "could not be read (RuntimeError: reader bug with a second line)"


def test_a_file_that_becomes_unreadable_loses_its_chunks(
    index: DocumentIndex, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    (path,) = corpus(tmp_path / "docs", files=1)
    index.create_collection("a")
    index.index_paths("a", [tmp_path / "docs"], embedder)
    path.write_bytes(b"\x00 now binary")
    index.index_paths("a", [tmp_path / "docs"], embedder)
    (doc,) = index.documents("a")
    assert doc.status is DocumentStatus.REFUSED and doc.chunk_count == 0
    assert count(index, "chunks") == 0 and count(index, "vectors") == 0
    fts_integrity(index)


def test_indexing_with_another_embedder_is_refused(index: DocumentIndex, tmp_path: Path) -> None:
    corpus(tmp_path / "docs", files=1)
    index.create_collection("a")
    index.index_paths("a", [tmp_path / "docs"], HashingEmbedder())
    other = HashingEmbedder(dim=64, name="other:111111111111")
    with pytest.raises(EmbedderMismatch, match="reindex it"):
        index.index_paths("a", [tmp_path / "elsewhere"], other)
    assert index.collection("a").sources == ((tmp_path / "docs").absolute(),)  # nothing added


def test_chunks_are_cut_to_the_embedders_window(tmp_path: Path) -> None:
    seen: list[int] = []

    def chunk(doc, count_tokens, max_tokens, overlap):  # type: ignore[no-untyped-def]
        seen.append(max_tokens)
        return standins.chunk(doc, count_tokens)

    corpus(tmp_path / "docs", files=1)
    with DocumentIndex(tmp_path / "i.sqlite3", parse=standins.parse, chunk=chunk, scan=standins.scan) as idx:
        idx.create_collection("a", ChunkSettings(max_tokens=256, overlap=0.15))
        idx.index_paths("a", [tmp_path / "docs"], HashingEmbedder(window=100))
    assert seen == [100]


def test_remove_paths_forgets_a_folder_and_its_documents(
    index: DocumentIndex, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    corpus(tmp_path / "one", files=2)
    corpus(tmp_path / "two", files=1)
    index.create_collection("a")
    index.index_paths("a", [tmp_path / "one", tmp_path / "two"], embedder)
    assert index.remove_paths("a", [tmp_path / "one"]) == 2
    info = index.collection("a")
    assert info.sources == ((tmp_path / "two").absolute(),) and info.indexed == 1
    assert {d.path.parent.name for d in index.documents("a")} == {"two"}
    fts_integrity(index)


# -- progress, pause, cancel ---------------------------------------------------------------


def test_progress_counts_files_and_chunks_up_to_done(
    index: DocumentIndex, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    corpus(tmp_path / "docs", files=4, paragraphs=3)
    index.create_collection("a")
    events: list[IndexProgress] = []
    index.index_paths("a", [tmp_path / "docs"], embedder, progress=events.append)
    assert events[0].phase is IndexPhase.SCANNING
    assert events[-1].phase is IndexPhase.DONE
    assert (events[-1].files_done, events[-1].files_total, events[-1].chunks_done) == (4, 4, 12)
    assert events[-1].seconds_left == 0.0 and events[-1].chunks_per_s > 0
    done = [e.files_done for e in events if e.phase is IndexPhase.INDEXING]
    assert done == sorted(done) and done[-1] == 4
    assert {e.current.name for e in events if e.current} == {f"doc{i}.txt" for i in range(4)}
    assert any(e.seconds_left is not None and e.seconds_left > 0 for e in events)
    with pytest.raises(FrozenInstanceError):
        events[0].files_done = 3  # type: ignore[misc]


def test_pause_holds_the_run_between_files_and_resume_finishes_it(
    index: DocumentIndex, tmp_path: Path
) -> None:
    corpus(tmp_path / "docs", files=3)
    index.create_collection("a")
    control = IndexControl()
    paused = threading.Event()
    events: list[IndexProgress] = []

    def on_progress(event: IndexProgress) -> None:
        events.append(event)
        if (
            event.phase is IndexPhase.INDEXING
            and event.files_done == 1
            and not control.paused
            and not paused.is_set()
        ):
            control.pause()
        if event.phase is IndexPhase.PAUSED:
            paused.set()

    result = []
    worker = threading.Thread(
        target=lambda: result.append(
            index.index_paths(
                "a", [tmp_path / "docs"], HashingEmbedder(), progress=on_progress, control=control
            )
        )
    )
    worker.start()
    assert paused.wait(10)
    assert worker.is_alive()
    assert index.collection("a").indexed == 1  # nothing moves while paused
    control.resume()
    worker.join(10)
    assert result[0].indexed == 3 and not result[0].cancelled
    phases = [e.phase for e in events]
    assert phases.index(IndexPhase.PAUSED) < len(phases) - 1 and phases[-1] is IndexPhase.DONE


def test_cancel_between_files_keeps_what_was_committed(index: DocumentIndex, tmp_path: Path) -> None:
    corpus(tmp_path / "docs", files=4)
    index.create_collection("a")
    control = IndexControl()

    def on_progress(event: IndexProgress) -> None:
        if event.phase is IndexPhase.INDEXING and event.files_done == 2:
            control.cancel()

    report = index.index_paths(
        "a", [tmp_path / "docs"], HashingEmbedder(), progress=on_progress, control=control
    )
    assert report.cancelled and report.indexed == 2
    statuses = sorted(d.status.value for d in index.documents("a"))
    assert statuses == ["indexed", "indexed", "pending", "pending"]
    embedder = CountingEmbedder(HashingEmbedder())
    resumed = index.index_paths("a", [tmp_path / "docs"], embedder)
    assert (resumed.unchanged, resumed.indexed, len(embedder.texts)) == (2, 2, 8)


def test_cancel_between_batches_writes_nothing_of_that_file(index: DocumentIndex, tmp_path: Path) -> None:
    write_doc(tmp_path / "docs" / "a.txt", paragraphs_of("a", 3))
    write_doc(tmp_path / "docs" / "b.txt", paragraphs_of("b", 80))
    index.create_collection("a")
    control = IndexControl()

    def before_batch(texts: object) -> None:
        if embedder.calls == [3, 32]:  # b.txt's second batch done: stop before its third
            control.cancel()

    embedder = CountingEmbedder(HashingEmbedder(), before_batch=before_batch)
    report = index.index_paths("a", [tmp_path / "docs"], embedder, control=control)
    assert report.cancelled and report.indexed == 1
    assert {d.path.name: d.status for d in index.documents("a")} == {
        "a.txt": DocumentStatus.INDEXED,
        "b.txt": DocumentStatus.PENDING,
    }
    assert count(index, "chunks") == 3


# -- reindexing ----------------------------------------------------------------------------


def test_plan_reindex_says_what_a_new_embedder_costs_from_a_measured_rate(
    index: DocumentIndex, tmp_path: Path
) -> None:
    corpus(tmp_path / "docs", files=3, paragraphs=20)
    index.create_collection("a")
    index.index_paths("a", [tmp_path / "docs"], HashingEmbedder())
    new = CountingEmbedder(HashingEmbedder(dim=64, name="new:222222222222"))
    plan = index.plan_reindex("a", new)
    assert plan.needed and plan.from_embedder == HashingEmbedder().name and plan.to_embedder == new.name
    assert (plan.documents, plan.chunks_to_embed, plan.chunks_done) == (3, 60, 0)
    assert plan.chunks_per_s > 0 and plan.seconds == pytest.approx(60 / plan.chunks_per_s)
    assert new.calls == [
        1,
        EMBED_BATCH,
    ]  # measured: a warm-up text, then one batch of the collection's chunks
    again = index.plan_reindex("a", new)
    assert again.chunks_per_s == plan.chunks_per_s and new.calls == [1, EMBED_BATCH]  # the rate is kept
    same = index.plan_reindex("a", HashingEmbedder())
    assert not same.needed and same.chunks_to_embed == 0 and same.seconds == 0


def test_plan_reindex_estimates_chunks_for_new_chunking_from_the_tokens(
    index: DocumentIndex, tmp_path: Path
) -> None:
    corpus(tmp_path / "docs", files=2, paragraphs=10)
    index.create_collection("a", ChunkSettings(max_tokens=64, overlap=0.0))
    index.index_paths("a", [tmp_path / "docs"], HashingEmbedder())
    tokens = index.collection("a").tokens
    plan = index.plan_reindex("a", HashingEmbedder(), ChunkSettings(max_tokens=50, overlap=0.2))
    per_doc = -(-(tokens // 2) // 40)
    assert plan.needed and plan.chunks_to_embed == 2 * per_doc


def test_reindex_builds_beside_the_old_index_which_answers_until_the_switch(
    index: DocumentIndex, tmp_path: Path
) -> None:
    corpus(tmp_path / "docs", files=3, paragraphs=5)
    index.create_collection("a")
    old = HashingEmbedder()
    index.index_paths("a", [tmp_path / "docs"], old)
    new_inner = HashingEmbedder(dim=64, name="new:333333333333")
    during: list[tuple[str | None, int]] = []

    def before_batch(texts: object) -> None:
        info = index.collection("a")
        hits = retrieve(index, ["a"], "subject3 item3", old, k=3, context_tokens=0, budget_tokens=1000)
        during.append((info.embedder, len(hits.excerpts)))

    new = CountingEmbedder(new_inner, before_batch=before_batch)
    report = index.reindex("a", new)
    assert report.indexed == 3 and len(new.texts) == 15
    assert during and all(state == (old.name, 3) for state in during)  # the old index kept answering
    info = index.collection("a")
    assert info.embedder == new.name and info.reindex_to is None and info.indexed == 3 and info.chunks == 15
    assert rows(index._conn(), "SELECT DISTINCT embedder FROM vectors") == [(new.name,)]
    assert count(index, "documents") == 3
    fts_integrity(index)
    hits = retrieve(index, ["a"], "subject3 item3", new_inner, k=3, context_tokens=0, budget_tokens=1000)
    assert len(hits.excerpts) == 3
    with pytest.raises(EmbedderMismatch):
        retrieve(index, ["a"], "subject3", old, k=3, context_tokens=0, budget_tokens=1000)


def test_an_interrupted_reindex_keeps_the_old_index_and_resumes_where_it_stopped(
    index: DocumentIndex, tmp_path: Path
) -> None:
    corpus(tmp_path / "docs", files=4, paragraphs=5)
    index.create_collection("a")
    old = HashingEmbedder()
    index.index_paths("a", [tmp_path / "docs"], old)
    control = IndexControl()

    def on_progress(event: IndexProgress) -> None:
        if event.phase is IndexPhase.INDEXING and event.files_done == 2:
            control.cancel()

    new = CountingEmbedder(HashingEmbedder(dim=64, name="new:444444444444"))
    report = index.reindex("a", new, progress=on_progress, control=control)
    assert report.cancelled and len(new.texts) == 10
    info = index.collection("a")
    assert info.embedder == old.name and info.reindex_to == (new.name, info.chunking) and info.chunks == 20
    plan = index.plan_reindex("a", new)
    assert (plan.chunks_done, plan.chunks_to_embed) == (10, 10)
    # Indexing with the new model while its reindex is pending continues that reindex.
    new.reset()
    events: list[IndexProgress] = []
    resumed = index.index_paths("a", [tmp_path / "docs"], new, progress=events.append)
    assert not resumed.cancelled and len(new.texts) == 10 and resumed.unchanged == 2
    assert [e.phase for e in events][-2:] == [IndexPhase.SWITCHING, IndexPhase.DONE]
    assert index.collection("a").embedder == new.name and index.collection("a").chunks == 20


def test_reindex_with_new_chunking_reuses_the_vectors_of_unchanged_chunk_texts(tmp_path: Path) -> None:
    def chunk(doc, count_tokens, max_tokens, overlap):  # type: ignore[no-untyped-def]
        pieces = standins.chunk(doc, count_tokens)
        # A larger size joins paragraphs two by two; the last one, alone, keeps its text.
        if max_tokens <= 64:
            return pieces
        joined = []
        for i in range(0, len(pieces), 2):
            group = pieces[i : i + 2]
            text = standins.SEPARATOR.join(p.text for p in group)
            joined.append(
                standins.Piece(i // 2, text, None, "", group[0].start, group[-1].end, count_tokens(text))
            )
        return tuple(joined)

    corpus(tmp_path / "docs", files=1, paragraphs=5)
    with DocumentIndex(tmp_path / "i.sqlite3", parse=standins.parse, chunk=chunk, scan=standins.scan) as idx:
        idx.create_collection("a", ChunkSettings(max_tokens=64, overlap=0.0))
        embedder = CountingEmbedder(HashingEmbedder())
        idx.index_paths("a", [tmp_path / "docs"], embedder)
        embedder.reset()
        report = idx.reindex("a", embedder, ChunkSettings(max_tokens=128, overlap=0.0))
        assert (report.chunks_embedded, report.chunks_reused) == (2, 1)
        assert len(embedder.texts) == 2
        info = idx.collection("a")
        assert info.chunking == ChunkSettings(max_tokens=128, overlap=0.0) and info.chunks == 3
        assert count(idx, "chunks") == 3 and count(idx, "vectors") == 3
        fts_integrity(idx)


def test_reindex_of_a_collection_never_indexed_only_records_the_choice(index: DocumentIndex) -> None:
    index.create_collection("a")
    settings = ChunkSettings(max_tokens=100, overlap=0.1)
    report = index.reindex("a", HashingEmbedder(), settings)
    assert report.files == 0
    info = index.collection("a")
    assert (info.embedder, info.chunking, info.reindex_to) == (HashingEmbedder().name, settings, None)


def test_bm25_mode_answers_from_the_index_alone(index: DocumentIndex, tmp_path: Path) -> None:
    corpus(tmp_path / "docs", files=2)
    index.create_collection("a")
    index.index_paths("a", [tmp_path / "docs"], HashingEmbedder())
    got = retrieve(
        index, ["a"], "subject2", None, k=2, context_tokens=0, budget_tokens=500, mode=RetrievalMode.BM25
    )
    assert {e.text.split(":")[0] for e in got.excerpts} == {"Paragraph 2 of doc0", "Paragraph 2 of doc1"}


def test_the_fts_check_used_above_catches_an_fts_out_of_step(
    index: DocumentIndex, tmp_path: Path, embedder: CountingEmbedder
) -> None:
    corpus(tmp_path / "docs", files=1)
    index.create_collection("a")
    index.index_paths("a", [tmp_path / "docs"], embedder)
    conn = index._conn()
    conn.execute("DROP TRIGGER chunks_fts_delete")
    conn.execute("DELETE FROM chunks WHERE ordinal = 0")
    with pytest.raises(sqlite3.DatabaseError):
        fts_integrity(index)


def test_questions_are_answered_from_another_thread_while_a_collection_indexes(
    index: DocumentIndex, tmp_path: Path
) -> None:
    corpus(tmp_path / "docs", files=6, paragraphs=4)
    index.create_collection("a")
    index.index_paths("a", [tmp_path / "docs" / "doc0.txt"], HashingEmbedder())
    embedder = CountingEmbedder(HashingEmbedder(), before_batch=lambda texts: threading.Event().wait(0.03))
    errors: list[BaseException] = []

    def work() -> None:
        try:
            index.index_paths("a", [tmp_path / "docs"], embedder)
        except BaseException as error:  # surfaced below
            errors.append(error)

    worker = threading.Thread(target=work)
    worker.start()

    def chunks_found() -> int:
        got = retrieve(
            index, ["a"], "notes subject1", HashingEmbedder(), k=30, context_tokens=0, budget_tokens=10**6
        )
        return sum(len(e.chunk_ids) for e in got.excerpts)

    seen = []
    while worker.is_alive():
        seen.append(chunks_found())
    worker.join()
    assert errors == [] and len(seen) > 1
    assert seen == sorted(seen) and seen[0] >= 4  # committed files only ever add up
    assert chunks_found() == 24
