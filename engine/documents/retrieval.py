"""From a question to numbered excerpts: BM25 and dense search fused, neighbours joined, fitted.

``retrieve`` ranks the turned-on collections' chunks twice, by FTS5's BM25 over the question's
words and by cosine to the question's embedding, fuses the two lists by reciprocal rank (a chunk
high in either list comes up; one high in both comes first), takes the best chunks that fit the
token budget, and joins chunks of one document that follow each other into one excerpt. When
everything the collections hold fits in about half the context, the documents go in whole
instead (``Retrieval.whole``), and the reply can say it read them all.

Token counts are the chunks' own (the embedder's tokenizer); the chat model's differ a little,
which the budget's margin absorbs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from engine.documents.embedder_protocol import TextEmbedder
from engine.documents.fts_query import MAX_POSTINGS, bounded_query
from engine.documents.index_errors import EmbedderMismatch
from engine.documents.index_store import ActiveCollection, IndexStore, StoredChunk

# Reciprocal-rank fusion's constant (Cormack et al., 2009, and GPT4All's): a chunk at rank r in
# a list adds 1 / (RRF_K + r). 60 keeps the top few ranks from drowning the rest.
RRF_K = 60
# How many chunks each ranker proposes before fusing: enough that a chunk ranked well by one
# and poorly by the other still meets the budget.
CANDIDATES = 50
# Excerpts (chunks, before neighbours are joined) a question gets by default.
DEFAULT_K = 5
# The share of the context retrieval may fill when no budget is given: the rest is the
# conversation and the reply.
BUDGET_SHARE = 4
# Documents go in whole when they all fit in context_tokens // WHOLE_SHARE.
WHOLE_SHARE = 2


class RetrievalMode(Enum):
    HYBRID = "hybrid"
    DENSE = "dense"  # vectors only (for the quality benchmark)
    BM25 = "bm25"  # words only; needs no embedder


@dataclass(frozen=True)
class Excerpt:
    n: int  # its number in the prompt, from 1: what the reply cites as [n]
    collection: str
    path: Path
    page: int | None  # the first chunk's page (PDFs)
    last_page: int | None  # the last chunk's page: an excerpt can run over a page break
    heading: str
    text: str
    score: float  # fused (hybrid), cosine (dense) or BM25; higher is better
    chunk_ids: tuple[int, ...]
    start: int  # character offsets in the document's full text
    end: int
    tokens: int


@dataclass(frozen=True)
class Retrieval:
    question: str
    excerpts: tuple[Excerpt, ...]
    whole: bool  # the documents are given whole, not searched
    mode: RetrievalMode
    tokens: int  # of the excerpts together

    def by_number(self, n: int) -> Excerpt | None:
        return next((e for e in self.excerpts if e.n == n), None)


def retrieve(
    index: IndexStore,
    collections: Sequence[str],
    question: str,
    embedder: TextEmbedder | None,
    k: int = DEFAULT_K,
    *,
    context_tokens: int,
    budget_tokens: int | None = None,
    mode: RetrievalMode = RetrievalMode.HYBRID,
    candidates: int = CANDIDATES,
    max_postings: int = MAX_POSTINGS,
) -> Retrieval:
    """Excerpts of ``collections`` for ``question``, best first, within ``budget_tokens``
    (default: a quarter of ``context_tokens``). ``max_postings`` bounds BM25's work (see
    ``fts_query``); the quality benchmark can raise it to compare."""
    budget = budget_tokens if budget_tokens is not None else context_tokens // BUDGET_SHARE
    active = [c for c in index.active(list(dict.fromkeys(collections))) if c.embedder is not None]
    empty = Retrieval(question, (), False, mode, 0)
    if not active:
        return empty
    total = index.total_tokens(active)
    if 0 < total <= context_tokens // WHOLE_SHARE:
        return _whole(index, active, question, mode)
    if k <= 0 or budget <= 0:
        return empty
    if mode is not RetrievalMode.BM25 and embedder is None:
        raise ValueError(f"{mode.value} retrieval needs an embedder")

    ranked = []
    if mode is not RetrievalMode.DENSE:
        ranked.append(bm25_ranking(index, active, question, candidates, max_postings))
    if mode is not RetrievalMode.BM25:
        assert embedder is not None
        # After BM25, not beside it on a thread: measured no faster on 2 cores, where the
        # question's embedding already takes both.
        ranked.append(dense_ranking(index, active, question, embedder, candidates))
    scored = fuse(ranked) if mode is RetrievalMode.HYBRID else ranked[0]
    picked = _fit(index, scored, k, budget)
    excerpts = join_neighbours(picked)
    return Retrieval(question, excerpts, False, mode, sum(e.tokens for e in excerpts))


def bm25_ranking(
    index: IndexStore,
    active: Sequence[ActiveCollection],
    question: str,
    n: int,
    max_postings: int = MAX_POSTINGS,
) -> list[tuple[int, float]]:
    return index.fts_search(active, bounded_query(question, index.term_postings, max_postings), n)


def dense_ranking(
    index: IndexStore, active: Sequence[ActiveCollection], question: str, embedder: TextEmbedder, n: int
) -> list[tuple[int, float]]:
    for c in active:
        if c.embedder != embedder.name:
            raise EmbedderMismatch(c.name, c.embedder or "", embedder.name)
    query = embedder.embed([question])[0]
    found: list[tuple[int, float]] = []
    for c in active:
        found += index.matrix(c).top_k(query, n)
    found.sort(key=lambda hit: (-hit[1], hit[0]))
    return found[:n]


def fuse(rankings: Sequence[Sequence[tuple[int, float]]], rrf_k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion: each list adds 1 / (rrf_k + rank) to its chunks (rank from 1);
    best first, equal scores by chunk id."""
    fused: dict[int, float] = defaultdict(float)
    for ranking in rankings:
        for rank, (chunk_id, _) in enumerate(ranking, start=1):
            fused[chunk_id] += 1.0 / (rrf_k + rank)
    return sorted(fused.items(), key=lambda hit: (-hit[1], hit[0]))


def _fit(
    index: IndexStore, scored: Sequence[tuple[int, float]], k: int, budget: int
) -> list[tuple[StoredChunk, float]]:
    """The best ``k`` chunks whose tokens together stay within ``budget``; a chunk too large for
    what is left is passed over for smaller ones after it."""
    picked: list[tuple[StoredChunk, float]] = []
    used = 0
    # Read a few more chunks than are needed at a time: most questions take the first k.
    step = max(2 * k, 10)
    for begin in range(0, len(scored), step):
        part = scored[begin : begin + step]
        rows = index.chunks(chunk_id for chunk_id, _ in part)
        for chunk_id, score in part:
            chunk = rows.get(chunk_id)
            if chunk is None or used + chunk.tokens > budget:
                continue
            picked.append((chunk, score))
            used += chunk.tokens
            if len(picked) == k:
                return picked
    return picked


def join_neighbours(picked: Sequence[tuple[StoredChunk, float]]) -> tuple[Excerpt, ...]:
    """Chunks of one document with consecutive ordinals become one excerpt (scored by its best
    chunk); excerpts best first, numbered from 1."""
    by_document: dict[int, list[tuple[StoredChunk, float]]] = defaultdict(list)
    for chunk, score in picked:
        by_document[chunk.document_id].append((chunk, score))
    runs: list[tuple[list[StoredChunk], float]] = []
    for members in by_document.values():
        members.sort(key=lambda m: m[0].ordinal)
        run, best = [members[0][0]], members[0][1]
        for chunk, score in members[1:]:
            if chunk.ordinal == run[-1].ordinal + 1:
                run.append(chunk)
                best = max(best, score)
            else:
                runs.append((run, best))
                run, best = [chunk], score
        runs.append((run, best))
    runs.sort(key=lambda r: (-r[1], r[0][0].id))
    return tuple(_excerpt(n, run, score) for n, (run, score) in enumerate(runs, start=1))


def _whole(
    index: IndexStore, active: Sequence[ActiveCollection], question: str, mode: RetrievalMode
) -> Retrieval:
    """Every document, in order, one excerpt per run of pages (so a citation still names its
    page), or one per document without pages."""
    runs: list[list[StoredChunk]] = []
    for chunk in index.all_chunks(active):
        last = runs[-1][-1] if runs else None
        if last is not None and last.document_id == chunk.document_id and last.page == chunk.page:
            runs[-1].append(chunk)
        else:
            runs.append([chunk])
    excerpts = tuple(_excerpt(n, run, 1.0) for n, run in enumerate(runs, start=1))
    return Retrieval(question, excerpts, True, mode, sum(e.tokens for e in excerpts))


def _excerpt(n: int, run: Sequence[StoredChunk], score: float) -> Excerpt:
    first, last = run[0], run[-1]
    return Excerpt(
        n=n,
        collection=first.collection,
        path=first.path,
        page=first.page,
        last_page=last.page,
        heading=first.heading,
        text=stitch(run),
        score=score,
        chunk_ids=tuple(c.id for c in run),
        start=first.start,
        end=max(c.end for c in run),
        tokens=sum(c.tokens for c in run),
    )


def stitch(run: Sequence[StoredChunk]) -> str:
    """Consecutive chunks as one text: the overlap a chunk repeats from the one before is cut
    (by their character offsets), a gap between them kept as a space or a paragraph break."""
    text, end = run[0].text, run[0].end
    for chunk in run[1:]:
        if chunk.start >= end:
            gap = chunk.start - end
            text += ("" if gap == 0 else " " if gap == 1 else "\n\n") + chunk.text
        elif chunk.end > end:
            text += chunk.text[end - chunk.start :]
        end = max(end, chunk.end)
    return text
