"""Retrieval quality on the test corpus with the real embedder: recall@1, recall@5 and MRR per
mode (hybrid, dense, BM25) and per question kind, and the questions each mode missed.

The corpus (tests/engine/documents/corpus: 21 documents, 64 questions answered by file and page)
is indexed by all-MiniLM-L6-v2 (f16 GGUF, one thread) into a documents index cached in
``.test-cache/retrieval-quality/`` (tests/engine/documents/retrieval_quality.py, which the
quality test shares); each question is asked with k=5, a context whose half is below the
corpus's tokens (so the documents never go in whole) and a budget five chunks fit in.

Targets (issue 28): hybrid recall@5 ≥ 0.90, hybrid ≥ dense, hybrid ≥ BM25; every citation
shown points to the right file and page (``citation_errors``, 0 expected).

Run: ``.venv/bin/python -m benchmarks.bench_retrieval_quality`` (writes
``benchmarks/results/retrieval_quality.json``; about a minute the first time, seconds after).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from engine.documents.retrieval import CANDIDATES, RRF_K, RetrievalMode

RESULTS = Path(__file__).resolve().parent / "results" / "retrieval_quality.json"


def run() -> dict[str, object]:
    from benchmarks.bench_embedding import model_path
    from engine.documents.embedding import open_embedder
    from tests.engine.documents.retrieval_quality import (
        BUDGET_TOKENS,
        COLLECTION,
        K,
        ask_all,
        citation_errors,
        context_tokens_for,
        corpus_index,
        misses,
        render,
        table,
    )

    embedder = open_embedder(model_path(), n_threads=1)
    try:
        started = time.monotonic()
        index, _ = corpus_index(embedder)
        index_s = time.monotonic() - started
        with index:
            info = index.collection(COLLECTION)
            started = time.monotonic()
            asked = ask_all(index, embedder)
            ask_s = time.monotonic() - started
            result = table(asked)
            errors = citation_errors(index, [a.retrieval for a in asked])
            print(render(result))
            recall = {mode: result[mode.value]["all"]["recall@5"] for mode in RetrievalMode}
            hybrid = recall[RetrievalMode.HYBRID]
            return {
                "embedder": embedder.name,
                "corpus": {"documents": info.indexed, "chunks": info.chunks, "tokens": info.tokens},
                "settings": {
                    "k": K,
                    "context_tokens": context_tokens_for(index),
                    "budget_tokens": BUDGET_TOKENS,
                    "rrf_k": RRF_K,
                    "candidates": CANDIDATES,
                },
                "table": result,
                "targets": {
                    "hybrid_recall@5>=0.90": hybrid >= 0.90,
                    "hybrid>=dense": hybrid >= recall[RetrievalMode.DENSE],
                    "hybrid>=bm25": hybrid >= recall[RetrievalMode.BM25],
                    "citation_errors": len(errors),
                },
                "misses": misses(asked),
                "citation_errors": errors,
                "seconds": {"index_or_reuse": round(index_s, 2), "questions_all_modes": round(ask_s, 2)},
            }
    finally:
        embedder.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    result = run()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
