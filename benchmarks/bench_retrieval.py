"""Retrieval latency at 100,000 chunks: from a question to its numbered excerpts.

A temporary documents index is filled through the real write path (``DocumentIndex.index_paths``:
one transaction per file, FTS5 kept by its triggers, vectors as BLOBs) with 1,000 generated
files of 100 chunks each. The text is drawn from a Zipf-distributed vocabulary of 20,000 made-up
words, about 110 words a chunk (some 150 tokens, the size real chunks have), so BM25 meets
common words that match most chunks as well as rare ones. The vectors are random unit vectors
of 384 dimensions (all-MiniLM-L6-v2's size); the quality of the ranking is not measured here,
its cost is.

Measured, over 200 questions made of words from random chunks (6 to 12 words, stopwords
included), each question answered by ``retrieve`` (hybrid, k=5, a 2,000-token budget):

- ``hybrid_ms``: p50/p95/max with the query's embedding **excluded** (the embedder is a
  lookup), i.e. BM25 + dense top-k + fusion + reading the chunks + joining neighbours;
- ``bm25_ms`` / ``dense_ms``: each ranking alone (``bm25_ranking`` / ``dense_ranking``);
- ``hybrid_with_embed_ms``: the same, with the query embedded by a stand-in that costs what a
  hashing embedder costs; with ``--embedder GGUF``, also ``hybrid_with_model_ms``: each
  question embedded by that model through ``engine.documents.embedding.Embedder`` (its
  vectors searched against the random ones: the ranking is meaningless, the time is real);
- ``first_query_ms``: the first question after opening, which reads the matrix from SQLite;
- ``after_commit_query_ms``: the first question after each of three more files (100 chunks
  each) was indexed, as when a collection is asked while it indexes: the matrix reads only the
  new vectors (the first change also moves it into a buffer with spare rows).

Target: p95 ≤ 150 ms on 2 cores. Run: ``.venv/bin/python -m benchmarks.bench_retrieval``
(writes ``benchmarks/results/retrieval.json``; about two minutes, most of it building the index).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from engine.documents.chunking import Chunk
from engine.documents.document import DocumentKind, ParsedDocument, Section
from engine.documents.index import DocumentIndex
from engine.documents.retrieval import RetrievalMode, bm25_ranking, dense_ranking, retrieve
from engine.documents.scanning import ScanResult

RESULTS = Path(__file__).resolve().parent / "results" / "retrieval.json"
DIM = 384
FILES = 1000
CHUNKS_PER_FILE = 100
WORDS_PER_CHUNK = 110
VOCABULARY = 20_000
QUESTIONS = 200
SEPARATOR = "\n\n"


# -- a corpus, parsed and chunked the simplest way (one paragraph, one chunk) ----------------


def _parse(path: Path) -> ParsedDocument:
    sections, offset = [], 0
    for block in path.read_text(encoding="utf-8").split(SEPARATOR):
        sections.append(Section(block, None, "", offset))
        offset += len(block) + len(SEPARATOR)
    return ParsedDocument(path, DocumentKind.TEXT, tuple(sections))


def _chunk(
    doc: ParsedDocument, count_tokens, max_tokens: int = 256, overlap: float = 0.15
) -> tuple[Chunk, ...]:
    return tuple(
        Chunk(i, s.text, None, "", s.start, s.start + len(s.text), count_tokens(s.text))
        for i, s in enumerate(doc.sections)
    )


def _scan(paths: Sequence[Path]) -> ScanResult:
    return ScanResult(tuple(sorted(p for root in paths for p in Path(root).glob("*.txt"))), ())


def _words(rng: np.random.Generator) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    out, seen = [], set()
    while len(out) < VOCABULARY:
        word = "".join(rng.choice(letters, size=int(rng.integers(3, 10))))
        if word not in seen:
            seen.add(word)
            out.append(word)
    return out


def write_corpus(folder: Path, files: int, seed: int = 0) -> list[str]:
    """The files, and the vocabulary in rank order (most common first)."""
    rng = np.random.default_rng(seed)
    vocab = _words(rng)
    weights = 1.0 / np.arange(1, VOCABULARY + 1)  # Zipf, s = 1: "the" of this language is word 0
    weights /= weights.sum()
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        picks = rng.choice(VOCABULARY, size=(CHUNKS_PER_FILE, WORDS_PER_CHUNK), p=weights)
        paragraphs = [" ".join(vocab[i] for i in row) + "." for row in picks]
        (folder / f"doc{f:04d}.txt").write_text(SEPARATOR.join(paragraphs), encoding="utf-8")
    return vocab


# -- embedders -------------------------------------------------------------------------------


class RandomEmbedder:
    """Random unit vectors, the same for the same text; questions looked up, not computed."""

    name = "random-384:000000000000"
    dim = DIM
    window = 512

    def __init__(self) -> None:
        self.queries: dict[str, np.ndarray] = {}

    def count_tokens(self, text: str) -> int:
        return int(len(text.split()) * 1.35)  # MiniLM's WordPiece splits made-up words a little

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            vector = self.queries.get(text)
            if vector is None:
                vector = _random_unit(text)
            out[i] = vector
        return out


class HashingQueryEmbedder(RandomEmbedder):
    """Computes every query's vector (hashing its words), as a model would, at a hashing cost."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                out[i, int.from_bytes(digest, "little") % DIM] += 1.0
            out[i] /= max(float(np.linalg.norm(out[i])), 1e-9)
        return out


def _random_unit(text: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    vector = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return vector / np.linalg.norm(vector)


# -- measuring -------------------------------------------------------------------------------


def _ms(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * len(ordered)) - 1)]
    return {
        "p50": round(statistics.median(ordered) * 1000, 2),
        "p95": round(p95 * 1000, 2),
        "max": round(ordered[-1] * 1000, 2),
    }


def questions(index: DocumentIndex, rng: np.random.Generator) -> list[str]:
    conn = index._conn()
    total = conn.execute("SELECT MAX(id) FROM chunks").fetchone()[0]
    out = []
    for _ in range(QUESTIONS):
        text = conn.execute(
            "SELECT text FROM chunks WHERE id = ?", (int(rng.integers(1, total + 1)),)
        ).fetchone()[0]
        words = text.rstrip(".").split()
        start = int(rng.integers(0, len(words) - 12))
        out.append("what about " + " ".join(words[start : start + int(rng.integers(6, 13))]) + "?")
    return out


def _time(fn, items: Sequence[str]) -> list[float]:
    samples = []
    for item in items:
        began = time.perf_counter()
        fn(item)
        samples.append(time.perf_counter() - began)
    return samples


class _Renamed:
    """A real embedder answering to the index's name, so its queries search the random vectors."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.name = RandomEmbedder.name
        self.dim = inner.dim  # type: ignore[attr-defined]
        self.window = inner.window  # type: ignore[attr-defined]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed(texts)  # type: ignore[attr-defined]

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)  # type: ignore[attr-defined]


def _model_embedder(path: Path) -> _Renamed:
    from engine.documents.embedding import open_embedder

    return _Renamed(open_embedder(path))


def run(work: Path, files: int = FILES, model: Path | None = None) -> dict[str, object]:
    started = time.perf_counter()
    write_corpus(work / "docs", files)
    wrote = time.perf_counter() - started
    embedder = RandomEmbedder()
    db = work / "documents.sqlite3"
    index = DocumentIndex(db, parse=_parse, chunk=_chunk, scan=_scan)
    index.create_collection("bench")
    began = time.perf_counter()
    report = index.index_paths("bench", [work / "docs"], embedder)
    built = time.perf_counter() - began
    info = index.collection("bench")
    index.close()

    index = DocumentIndex(db, parse=_parse, chunk=_chunk, scan=_scan)
    rng = np.random.default_rng(1)
    asked = questions(index, rng)
    for question in asked:
        embedder.queries[question] = _random_unit("q:" + question)
    options = {"k": 5, "context_tokens": 8192, "budget_tokens": 2000}
    began = time.perf_counter()
    first = retrieve(index, ["bench"], asked[0], embedder, **options)
    first_ms = (time.perf_counter() - began) * 1000
    active = index.active(["bench"])
    hybrid = _time(lambda q: retrieve(index, ["bench"], q, embedder, **options), asked)
    bm25 = _time(lambda q: bm25_ranking(index, active, q, 50), asked)
    dense = _time(lambda q: dense_ranking(index, active, q, embedder, 50), asked)
    hashing = HashingQueryEmbedder()
    with_embed = _time(lambda q: retrieve(index, ["bench"], q, hashing, **options), asked)
    bm25_only = _time(
        lambda q: retrieve(index, ["bench"], q, None, mode=RetrievalMode.BM25, **options), asked[:50]
    )
    with_model = None
    if model is not None:
        real = _model_embedder(model)
        real.embed([asked[0]])  # warm
        with_model = _ms(_time(lambda q: retrieve(index, ["bench"], q, real, **options), asked))
        real.inner.close()  # type: ignore[attr-defined]
    matrix = index.matrix(active[0])
    excerpts = [len(retrieve(index, ["bench"], q, embedder, **options).excerpts) for q in asked[:20]]
    (work / "more").mkdir()
    after_commit_ms = []
    for n in range(3):
        text = (work / "docs" / f"doc{n:04d}.txt").read_text().upper()
        (work / "more" / f"extra{n}.txt").write_text(text, encoding="utf-8")
        index.index_paths("bench", [work / "more"], embedder)
        began = time.perf_counter()
        retrieve(index, ["bench"], asked[n + 1], embedder, **options)
        after_commit_ms.append(round((time.perf_counter() - began) * 1000, 1))
    index.close()
    return {
        "benchmark": "retrieval",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "sqlite": __import__("sqlite3").sqlite_version,
        "numpy": np.__version__,
        "corpus": {
            "files": files,
            "chunks": info.chunks,
            "words_per_chunk": WORDS_PER_CHUNK,
            "tokens_per_chunk": round(info.tokens / info.chunks, 1),
            "vocabulary": VOCABULARY,
            "dim": DIM,
            "db_mb": round(db.stat().st_size / 1e6, 1),
            "write_files_s": round(wrote, 1),
            "index_paths_s": round(built, 1),
            "index_paths_chunks_per_s": round(report.chunks_embedded / built),
        },
        "questions": len(asked),
        "k": 5,
        "budget_tokens": 2000,
        "first_query_ms": round(first_ms, 1),
        "first_query_excerpts": len(first.excerpts),
        "after_commit_query_ms": after_commit_ms,
        "hybrid_ms": _ms(hybrid),
        "hybrid_with_embed_ms": _ms(with_embed),
        "hybrid_with_model_ms": with_model,
        "model": model.name if model is not None else None,
        "bm25_ms": _ms(bm25),
        "dense_ms": _ms(dense),
        "bm25_mode_ms": _ms(bm25_only),
        "excerpts_per_question": statistics.mean(excerpts),
        "matrix_mb": round(matrix.nbytes / 1e6, 1),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "target_p95_ms": 150,
        "meets_target": _ms(hybrid)["p95"] <= 150,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--files", type=int, default=FILES, help=f"{CHUNKS_PER_FILE} chunks each")
    parser.add_argument("--embedder", type=Path, help="an embedding GGUF: also time questions embedded by it")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hearth-bench-retrieval-") as tmp:
        result = run(Path(tmp), args.files, args.embedder)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if result["meets_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
