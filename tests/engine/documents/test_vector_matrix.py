"""Exact dense search over a collection's matrix, and the cache that reloads it when it changes."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from engine.documents.vector_matrix import MatrixCache, VectorMatrix, vector_blob
from tests.engine.documents.hashing_embedder import HashingEmbedder
from tests.engine.documents.standins import make_index, paragraphs_of, write_doc


def random_matrix(n: int, dim: int, seed: int = 0) -> VectorMatrix:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = rng.permutation(np.arange(10, 10 + n, dtype=np.int64) * 3)
    return VectorMatrix(ids, vectors)


def test_top_k_is_the_exact_cosine_order_of_a_full_sort() -> None:
    matrix = random_matrix(2000, 48)
    query = np.random.default_rng(1).standard_normal(48).astype(np.float32) * 7  # not normalised
    got = matrix.top_k(query, 10)
    scores = matrix.vectors.astype(np.float64) @ (query / np.linalg.norm(query))
    best = np.argsort(-scores)[:10]
    assert [chunk_id for chunk_id, _ in got] == [int(matrix.ids[i]) for i in best]
    assert np.allclose([s for _, s in got], scores[best], atol=1e-5)
    assert all(a[1] >= b[1] for a, b in itertools.pairwise(got))


def test_k_larger_than_the_matrix_returns_everything_in_order() -> None:
    matrix = random_matrix(5, 8)
    got = matrix.top_k(matrix.vectors[2], 50)
    assert len(got) == 5 and got[0] == (int(matrix.ids[2]), pytest.approx(1.0, abs=1e-6))


def test_equal_scores_come_in_chunk_id_order() -> None:
    vectors = np.tile(np.array([[1.0, 0.0]], dtype=np.float32), (6, 1))
    matrix = VectorMatrix(np.array([9, 3, 7, 1, 5, 2], dtype=np.int64), vectors)
    assert [i for i, _ in matrix.top_k(np.array([1.0, 0.0]), 4)] == [1, 2, 3, 5]


def test_nothing_to_find_gives_nothing() -> None:
    assert VectorMatrix.empty(4).top_k(np.ones(4), 3) == []
    matrix = random_matrix(4, 4)
    assert matrix.top_k(np.ones(4), 0) == []
    assert matrix.top_k(np.zeros(4), 3) == []  # a zero query has no direction


def test_a_query_of_the_wrong_size_is_an_error() -> None:
    with pytest.raises(ValueError, match="query has 3 values"):
        random_matrix(4, 4).top_k(np.ones(3), 2)


def test_from_rows_fills_one_matrix_and_checks_the_rows() -> None:
    rows = [(5, vector_blob(np.array([0.6, 0.8]))), (8, vector_blob(np.array([1.0, 0.0])))]
    matrix = VectorMatrix.from_rows(2, rows)
    assert matrix.ids.tolist() == [5, 8] and matrix.vectors.dtype == np.float32
    assert np.allclose(matrix.vectors, [[0.6, 0.8], [1.0, 0.0]]) and matrix.dim == 2 and len(matrix) == 2
    assert matrix.nbytes == 2 * 2 * 4 + 2 * 8
    assert len(VectorMatrix.from_rows(3, rows)) == 2  # fewer rows than announced: what came
    with pytest.raises(ValueError, match="more than the 1"):
        VectorMatrix.from_rows(1, rows)
    with pytest.raises(ValueError, match="has 3 values, not 2"):
        VectorMatrix.from_rows(2, [*rows[:1], (9, vector_blob(np.ones(3)))])
    assert len(VectorMatrix.from_rows(0, [])) == 0


def test_the_cache_loads_once_per_revision_handing_over_what_it_held() -> None:
    loads: list[tuple[str, bool]] = []

    def load(key: object, held: VectorMatrix | None) -> VectorMatrix:
        loads.append((str(key), held is not None))
        return random_matrix(3, 2)

    cache = MatrixCache(load)
    first = cache.get("a", 1)
    assert cache.get("a", 1) is first and loads == [("a", False)]
    assert cache.get("a", 2) is not first and loads == [("a", False), ("a", True)]
    cache.get("b", 2)
    cache.invalidate("a")
    cache.get("a", 2)
    cache.get("b", 2)
    assert loads == [("a", False), ("a", True), ("b", False), ("a", False)]
    assert cache.nbytes == 2 * (3 * 2 * 4 + 3 * 8)
    cache.invalidate()
    cache.get("b", 2)
    assert loads[-1] == ("b", False)


def test_updated_drops_rows_gone_and_reads_only_new_ones() -> None:
    matrix = random_matrix(6, 4)
    extra = random_matrix(2, 4, seed=5)
    extra_ids = np.array([1000, 1001], dtype=np.int64)
    now = np.sort(np.concatenate([matrix.ids[[0, 2, 3]], extra_ids]))
    asked: list[list[int]] = []

    def rows(new: np.ndarray) -> list[tuple[int, bytes]]:
        asked.append(new.tolist())
        return [(int(i), vector_blob(extra.vectors[int(i) - 1000])) for i in new]

    got = matrix.updated(now, rows)
    assert asked == [[1000, 1001]]
    assert sorted(got.ids.tolist()) == now.tolist()
    by_id = dict(zip(got.ids.tolist(), got.vectors, strict=True))
    for i in (0, 2, 3):
        assert np.array_equal(by_id[int(matrix.ids[i])], matrix.vectors[i])
    assert np.array_equal(by_id[1001], extra.vectors[1])
    assert len(VectorMatrix.empty(4).updated(extra_ids, rows)) == 2
    with pytest.raises(ValueError, match="new vectors have 3 values"):
        matrix.updated(np.array([5000]), lambda new: [(5000, vector_blob(np.ones(3)))])


def test_the_index_keeps_a_collections_matrix_until_a_commit_changes_it(tmp_path: Path) -> None:
    for i in range(3):
        write_doc(tmp_path / "docs" / f"d{i}.txt", paragraphs_of(f"d{i}", 4))
    embedder = HashingEmbedder(dim=32)
    with make_index(tmp_path / "i.sqlite3") as index:
        index.create_collection("a")
        index.index_paths("a", [tmp_path / "docs"], embedder)
        (active,) = index.active(["a"])
        matrix = index.matrix(active)
        assert len(matrix) == 12 and matrix.dim == 32
        ids = index._conn().execute("SELECT id, text FROM chunks ORDER BY id").fetchall()
        assert matrix.ids.tolist() == [r[0] for r in ids]
        assert np.array_equal(matrix.vectors, embedder.embed([r[1] for r in ids]))
        assert index.matrix(index.active(["a"])[0]) is matrix  # nothing changed: no reload
        write_doc(tmp_path / "docs" / "d3.txt", paragraphs_of("d3", 2))
        index.index_paths("a", [tmp_path / "docs"], embedder)
        (moved,) = index.active(["a"])
        assert moved.revision > active.revision
        assert len(index.matrix(moved)) == 14
        index.index_paths("a", [tmp_path / "docs"], embedder)  # unchanged files write nothing
        assert index.active(["a"])[0].revision == moved.revision


def test_after_an_edit_the_index_reads_only_the_new_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.documents import index_store as index_module

    paragraphs = paragraphs_of("d", 5)
    write_doc(tmp_path / "docs" / "d.txt", paragraphs)
    write_doc(tmp_path / "docs" / "e.txt", paragraphs_of("e", 3))
    embedder = HashingEmbedder(dim=16)
    read: list[int] = []
    original = index_module._vector_rows

    def counting(conn, ids):  # type: ignore[no-untyped-def]
        read.extend(int(i) for i in ids)
        return original(conn, ids)

    monkeypatch.setattr(index_module, "_vector_rows", counting)
    with make_index(tmp_path / "i.sqlite3") as index:
        index.create_collection("a")
        index.index_paths("a", [tmp_path / "docs"], embedder)
        assert len(index.matrix(index.active(["a"])[0])) == 8 and read == []  # the first read is one pass
        paragraphs[1] = "An edited paragraph."
        write_doc(tmp_path / "docs" / "d.txt", paragraphs)
        (tmp_path / "docs" / "e.txt").unlink()
        index.index_paths("a", [tmp_path / "docs"], embedder)
        matrix = index.matrix(index.active(["a"])[0])
        rows = index._conn().execute("SELECT id, text FROM chunks ORDER BY id").fetchall()
        (new_id,) = [r[0] for r in rows if r[1] == "An edited paragraph."]
        assert read == [new_id]
        order = np.argsort(matrix.ids)
        assert matrix.ids[order].tolist() == [r[0] for r in rows]
        assert np.array_equal(matrix.vectors[order], embedder.embed([r[1] for r in rows]))


def _blobs(matrix: VectorMatrix):  # type: ignore[no-untyped-def]
    by_id = {int(i): vector_blob(v) for i, v in zip(matrix.ids, matrix.vectors, strict=True)}
    return lambda new: [(int(i), by_id[int(i)]) for i in new]


def test_new_rows_go_into_the_spare_rows_and_older_matrices_stay_as_they_were() -> None:
    source = random_matrix(200, 8)
    ids = np.sort(source.ids)
    first = VectorMatrix.from_rows(100, _blobs(source)(ids[:100]))
    second = first.updated(ids[:110], _blobs(source))  # the first change: moved into a buffer with room
    assert second.spare is not None and second.spare.shape[0] >= 110 + 27
    third = second.updated(ids[:120], _blobs(source))  # written into the room: no copy
    assert third.spare is second.spare and np.shares_memory(third.vectors, second.vectors)
    assert len(second) == 110 and len(third) == 120
    query = source.vectors[0]
    assert second.top_k(query, 200) == VectorMatrix.from_rows(110, _blobs(source)(ids[:110])).top_k(
        query, 200
    )
    assert third.top_k(query, 5) == VectorMatrix.from_rows(120, _blobs(source)(ids[:120])).top_k(query, 5)


def test_rows_of_chunks_gone_are_never_found_and_many_gone_compacts() -> None:
    source = random_matrix(100, 8)
    ids = np.sort(source.ids)
    matrix = VectorMatrix.from_rows(100, _blobs(source)(ids)).updated(ids, _blobs(source))
    fewer = matrix.updated(ids[10:], _blobs(source))  # 10 of 100 gone: marked, not moved
    assert fewer.spare is matrix.spare and len(fewer) == 90 and fewer.ids.size == 100
    found = {i for i, _ in fewer.top_k(source.vectors[0], 1000)}
    assert found == set(ids[10:].tolist())
    target = int(ids[3])
    assert target not in {i for i, _ in fewer.top_k(source.vectors[list(source.ids).index(target)], 3)}
    most = fewer.updated(ids[60:], _blobs(source))  # 60 gone: the live rows move
    assert most.spare is not matrix.spare and most.ids.size == 40 and len(most) == 40
    assert (
        VectorMatrix(ids[:2], source.vectors[:2])
        .updated(np.array([], dtype=np.int64), _blobs(source))
        .top_k(source.vectors[0], 3)
        == []
    )
