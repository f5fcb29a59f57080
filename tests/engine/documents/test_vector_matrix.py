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
    scores = matrix.vectors @ (query / np.linalg.norm(query))
    best = np.argsort(-scores)[:10]
    assert [chunk_id for chunk_id, _ in got] == [int(matrix.ids[i]) for i in best]
    assert np.allclose([s for _, s in got], scores[best], atol=1e-6)
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


def test_the_cache_loads_once_per_revision() -> None:
    loads: list[str] = []

    def load(key: object) -> VectorMatrix:
        loads.append(str(key))
        return random_matrix(3, 2)

    cache = MatrixCache(load)
    first = cache.get("a", 1)
    assert cache.get("a", 1) is first and loads == ["a"]
    assert cache.get("a", 2) is not first and loads == ["a", "a"]
    cache.get("b", 2)
    cache.invalidate("a")
    cache.get("a", 2)
    cache.get("b", 2)
    assert loads == ["a", "a", "b", "a"]
    assert cache.nbytes == 2 * (3 * 2 * 4 + 3 * 8)
    cache.invalidate()
    cache.get("b", 2)
    assert loads[-1] == "b"


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
