"""Exact dense search: one collection's vectors as a float32 matrix in memory, scored with numpy.

Each collection's ``(n, dim)`` matrix and its chunk ids are read from SQLite the first time a
question needs them and kept until the collection's revision moves (any committed change to its
chunks, from this process or another). A query is one matrix-vector product and an
``argpartition``: exact cosine (the rows and the query are L2-normalised), no approximation to
tune or to drift.

Where it stops scaling: memory is ``n × dim × 4`` bytes per collection (100k chunks of a
384-dimension model: 154 MB; 1M chunks: 1.5 GB; a quarter more once it has changed, the
spare rows new chunks are written into) and a query reads all of it, ~``n × dim``
multiply-adds, memory-bound (on 2 cores about 10-20 ms per 100k × 384). Past a few hundred
thousand chunks per collection, or with models of 768-1024 dimensions, an approximate index
takes over: HNSW (usearch, hnswlib) or IVF-PQ (faiss), or sqlite-vec inside the same file;
they keep the same ``top_k`` shape. The first question reads the whole vectors table (~1 s
per 100k chunks here); after a change only the new chunks' vectors are read, and the chunk
ids (~0.1 s per 100k), so a collection asked while it indexes pays that after each file.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

import numpy as np

VECTOR_DTYPE = np.dtype("<f4")


def vector_blob(vector: np.ndarray) -> bytes:
    """One vector as it is stored: float32, little-endian."""
    return np.ascontiguousarray(vector, dtype=VECTOR_DTYPE).tobytes()


# Rows a matrix keeps free after it is first changed, as a share of its size: new chunks of a
# collection being indexed are written into them instead of copying the whole matrix.
SPARE_SHARE = 0.25
# An id that marks a row of a chunk gone (never a chunk's: SQLite's ids start at 1).
GONE = -1


@dataclass(frozen=True, eq=False)
class VectorMatrix:
    """``ids[i]`` is the chunk of row ``vectors[i]``, or ``GONE``; ``spare``, when there is one,
    is the buffer ``vectors`` is the start of, with free rows after it."""

    ids: np.ndarray  # (rows,) int64 chunk ids
    vectors: np.ndarray  # (rows, dim) float32, rows L2-normalised
    spare: np.ndarray | None = None

    @classmethod
    def empty(cls, dim: int = 0) -> VectorMatrix:
        return cls(np.empty(0, dtype=np.int64), np.empty((0, dim), dtype=np.float32))

    @classmethod
    def from_rows(cls, count: int, rows: Iterable[tuple[int, bytes]]) -> VectorMatrix:
        """``count`` rows of (chunk id, blob), filled into one preallocated matrix: the peak
        memory is the matrix, not the matrix plus every blob."""
        ids = np.empty(count, dtype=np.int64)
        vectors: np.ndarray | None = None
        filled = 0
        for chunk_id, blob in rows:
            if filled == count:
                raise ValueError(f"more than the {count} vector rows announced")
            row = np.frombuffer(blob, dtype=VECTOR_DTYPE)
            if vectors is None:
                vectors = np.empty((count, row.size), dtype=np.float32)
            elif row.size != vectors.shape[1]:
                raise ValueError(f"vector of chunk {chunk_id} has {row.size} values, not {vectors.shape[1]}")
            ids[filled] = chunk_id
            vectors[filled] = row
            filled += 1
        if vectors is None:
            return cls.empty()
        return cls(ids[:filled], vectors[:filled])

    def updated(
        self, ids_now: np.ndarray, rows: Callable[[np.ndarray], Iterable[tuple[int, bytes]]]
    ) -> VectorMatrix:
        """This matrix brought to the chunk ids ``ids_now``: only the new ids' vectors are read
        (``rows(new_ids)``); chunk ids are never reused, so a row kept is still right.

        New rows go into the spare rows and rows of chunks gone are only marked, so a
        collection indexed while it is asked is not copied after every file; once the spare
        runs out, or a quarter of the rows are gone, the live rows move to a new buffer with
        ``SPARE_SHARE`` free. The rows this matrix reads are never written: a question still
        using it on another thread sees it unchanged."""
        keep = np.isin(self.ids, ids_now)
        new_ids = np.setdiff1d(ids_now, self.ids[keep], assume_unique=True)
        added = VectorMatrix.from_rows(int(new_ids.size), rows(new_ids))
        if len(added) and self.dim and added.dim != self.dim:
            raise ValueError(f"new vectors have {added.dim} values, the matrix {self.dim}")
        dim = self.dim if self.dim else added.dim
        rows_now = self.ids.size + added.ids.size
        gone = self.ids.size - int(keep.sum())
        if self.spare is not None and self.spare.shape[0] >= rows_now and gone <= rows_now // 4:
            self.spare[self.ids.size : rows_now] = added.vectors.reshape(-1, dim)
            ids = np.concatenate([np.where(keep, self.ids, GONE), added.ids])
            return VectorMatrix(ids, self.spare[:rows_now], self.spare)
        live = int(keep.sum()) + added.ids.size
        spare = np.empty((live + int(live * SPARE_SHARE) + 64, dim), dtype=np.float32)
        spare[: keep.sum()] = self.vectors[keep].reshape(-1, dim)
        spare[keep.sum() : live] = added.vectors.reshape(-1, dim)
        return VectorMatrix(np.concatenate([self.ids[keep], added.ids]), spare[:live], spare)

    def __len__(self) -> int:
        """The chunks it holds (rows marked gone not counted)."""
        return int(np.count_nonzero(self.ids != GONE))

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @property
    def nbytes(self) -> int:
        held = self.spare if self.spare is not None else self.vectors
        return int(held.nbytes + self.ids.nbytes)

    def top_k(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` chunks nearest ``query`` by cosine, best first, as (chunk id, score)."""
        rows = int(self.ids.size)
        if rows == 0 or k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.size != self.dim:
            raise ValueError(f"query has {q.size} values, the vectors {self.dim}")
        norm = float(np.linalg.norm(q))
        if norm == 0.0:
            return []
        # einsum, not ``@``: OpenBLAS's threads spin after each call and, on 2 cores, starve
        # llama.cpp's threads embedding the next question (its p95 went from 11 to 270 ms).
        # A matrix-vector product is memory-bound: one thread is as fast.
        scores = np.einsum("ij,j->i", self.vectors, q / norm)
        gone = self.ids == GONE
        if gone.any():
            scores[gone] = -np.inf
            k = min(k, rows - int(gone.sum()))
            if k == 0:
                return []
        picked = self._best(scores, k) if k < rows else np.arange(rows)
        # Best first; equal scores by chunk id, so a query always returns the same order.
        order = picked[np.lexsort((self.ids[picked], -scores[picked]))]
        return [(int(self.ids[i]), float(scores[i])) for i in order]

    def _best(self, scores: np.ndarray, k: int) -> np.ndarray:
        """Indices of the ``k`` highest scores; of those tied at the cut, the lowest chunk ids
        (argpartition alone would pick among them arbitrarily)."""
        cut = scores[np.argpartition(-scores, k - 1)[:k]].min()
        above = np.flatnonzero(scores > cut)
        tied = np.flatnonzero(scores == cut)
        tied = tied[np.argsort(self.ids[tied], kind="stable")[: k - above.size]]
        return np.concatenate([above, tied])


class MatrixCache:
    """Matrices by key, each reloaded when the revision it was read at is no longer current."""

    # The loader gets (key, the matrix held so far or None).

    def __init__(self, load: Callable[[Hashable, VectorMatrix | None], VectorMatrix]) -> None:
        self._load = load
        self._lock = threading.Lock()
        self._held: dict[Hashable, tuple[int, VectorMatrix]] = {}

    def get(self, key: Hashable, revision: int) -> VectorMatrix:
        with self._lock:
            held = self._held.get(key)
            if held is not None and held[0] == revision:
                return held[1]
            # Loaded under the lock: two questions at once read the table once, not twice. The
            # matrix held before is handed over, so a loader can read only what changed.
            matrix = self._load(key, held[1] if held is not None else None)
            self._held[key] = (revision, matrix)
            return matrix

    def invalidate(self, key: Hashable | None = None) -> None:
        with self._lock:
            if key is None:
                self._held.clear()
            else:
                self._held.pop(key, None)

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(matrix.nbytes for _, matrix in self._held.values())
