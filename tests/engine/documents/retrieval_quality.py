"""The retrieval test set measured: the corpus indexed by the real embedder, each question asked in
each mode, recall@1, recall@5 and MRR per mode and per question kind, and every excerpt's
citation checked against the file parsed again.

Shared by tests/engine/documents/test_retrieval_quality.py (the targets as assertions) and
benchmarks/bench_retrieval_quality.py (the same table into a JSON file).

The index is kept in ``.test-cache/retrieval-quality/`` under a key of everything it is made from
(the corpus, the embedder, the engine's parsing, chunking and indexing code): embedding the
corpus with one thread takes about a minute, and a second session reuses it. Retrieval's own code
is left out of the key, so changing the fusion does not rebuild the index.
"""

from __future__ import annotations

import hashlib
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.documents.document import full_text
from engine.documents.embedder_protocol import TextEmbedder
from engine.documents.index import DocumentIndex
from engine.documents.parsing import parse_document
from engine.documents.retrieval import Retrieval, RetrievalMode, retrieve
from tests.conftest import REPO, TEST_CACHE
from tests.engine.documents.corpus_fixture import cached_corpus, corpus_key
from tests.engine.documents.corpus_questions import Question, QuestionKind, load_questions

COLLECTION = "corpus"
K = 5
# Five chunks of at most 256 tokens each fit with room to spare: the budget never decides what
# is shown, only the ranking does.
BUDGET_TOKENS = 5 * 256 * 2
# The modules whose code decides what the index holds (retrieval's do not).
_QUERY_ONLY = {"retrieval.py", "fts_query.py", "citations.py", "grounding.py"}
ENGINE_DOCUMENTS = REPO / "engine" / "documents"


def index_key(embedder_name: str) -> str:
    digest = hashlib.sha256(f"{corpus_key()}\0{embedder_name}\0".encode())
    for path in sorted(ENGINE_DOCUMENTS.glob("*.py")):
        if path.name not in _QUERY_ONLY:
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def corpus_index(embedder: TextEmbedder, cache: Path = TEST_CACHE) -> tuple[DocumentIndex, Path]:
    """The corpus (in its cache folder, read-only) indexed by ``embedder``: reused when one was
    built from the same inputs, else built beside its place and renamed when complete."""
    corpus = cached_corpus(cache)
    root = cache / "retrieval-quality"
    root.mkdir(parents=True, exist_ok=True)
    db = root / f"{index_key(embedder.name)}.sqlite3"
    if not db.is_file():
        staging = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
        with DocumentIndex(staging / "index.sqlite3") as building:
            building.create_collection(COLLECTION)
            report = building.index_paths(COLLECTION, [corpus], embedder)
            if report.refused:
                raise AssertionError(f"the corpus has refused files: {building.documents(COLLECTION)}")
        (staging / "index.sqlite3").replace(db)
        for leftover in staging.iterdir():  # WAL and shared-memory files, checkpointed at close
            leftover.unlink()
        staging.rmdir()
        for old in root.glob("*.sqlite3*"):
            if not old.name.startswith(db.name):
                old.unlink(missing_ok=True)
    return DocumentIndex(db), corpus


def context_tokens_for(index: DocumentIndex) -> int:
    """A context whose half is below the corpus's tokens: the documents never go in whole."""
    total = index.collection(COLLECTION).tokens
    return total


@dataclass(frozen=True)
class Asked:
    question: Question
    mode: RetrievalMode
    retrieval: Retrieval
    rank: int | None  # 1-based rank of the first excerpt that answers it; None when none does

    @property
    def hit(self) -> bool:
        return self.rank is not None


def first_hit(question: Question, retrieval: Retrieval) -> int | None:
    """An excerpt answers when it is from an answer's file and, for a PDF, spans its page."""
    for rank, excerpt in enumerate(retrieval.excerpts, start=1):
        pages: Sequence[int | None]
        if excerpt.page is None or excerpt.last_page is None:
            pages = [excerpt.page]
        else:
            pages = range(excerpt.page, excerpt.last_page + 1)
        if any(question.is_answered_by(excerpt.path.name, page) for page in pages):
            return rank
    return None


def ask_all(
    index: DocumentIndex, embedder: TextEmbedder, modes: Sequence[RetrievalMode] = tuple(RetrievalMode)
) -> list[Asked]:
    context = context_tokens_for(index)
    asked = []
    for question in load_questions():
        for mode in modes:
            got = retrieve(
                index,
                [COLLECTION],
                question.question,
                embedder,
                k=K,
                context_tokens=context,
                budget_tokens=BUDGET_TOKENS,
                mode=mode,
            )
            asked.append(Asked(question, mode, got, first_hit(question, got)))
    return asked


@dataclass(frozen=True)
class Scores:
    questions: int
    recall_at_1: float
    recall_at_5: float
    mrr: float

    def as_json(self) -> dict[str, float | int]:
        return {
            "questions": self.questions,
            "recall@1": round(self.recall_at_1, 4),
            "recall@5": round(self.recall_at_5, 4),
            "mrr": round(self.mrr, 4),
        }


def scores(asked: Sequence[Asked]) -> Scores:
    if not asked:
        return Scores(0, 0.0, 0.0, 0.0)
    return Scores(
        questions=len(asked),
        recall_at_1=statistics.fmean(a.rank == 1 for a in asked),
        recall_at_5=statistics.fmean(a.hit for a in asked),
        mrr=statistics.fmean(1 / a.rank if a.rank else 0.0 for a in asked),
    )


def table(asked: Sequence[Asked]) -> dict[str, dict[str, dict[str, float | int]]]:
    """{mode: {"all" | kind: scores}}."""
    out: dict[str, dict[str, dict[str, float | int]]] = {}
    for mode in RetrievalMode:
        mine = [a for a in asked if a.mode is mode]
        if not mine:
            continue
        row = {"all": scores(mine).as_json()}
        for kind in QuestionKind:
            row[kind.value] = scores([a for a in mine if a.question.kind is kind]).as_json()
        out[mode.value] = row
    return out


def render(result: dict[str, dict[str, dict[str, float | int]]]) -> str:
    kinds = ["all", *(k.value for k in QuestionKind)]
    lines = [f"{'mode':<7} {'kind':<11} {'n':>3} {'R@1':>6} {'R@5':>6} {'MRR':>6}"]
    for mode, row in result.items():
        for kind in kinds:
            s = row[kind]
            lines.append(
                f"{mode:<7} {kind:<11} {s['questions']:>3} {s['recall@1']:>6.3f} {s['recall@5']:>6.3f}"
                f" {s['mrr']:>6.3f}"
            )
    return "\n".join(lines)


def misses(asked: Sequence[Asked]) -> list[str]:
    return [
        f"{a.mode.value} {a.question.id} ({a.question.kind.value}): {a.question.question!r} →"
        f" {[(e.path.name, e.page) for e in a.retrieval.excerpts]}"
        for a in asked
        if not a.hit
    ]


def citation_errors(index: DocumentIndex, retrievals: Sequence[Retrieval]) -> list[str]:
    """Every excerpt's file, page(s) and text against the file parsed again: each chunk's text is
    at its offsets in the document's full text, inside a section on the chunk's page; the
    excerpt names the first and last chunk's pages and holds every chunk's text."""
    errors: list[str] = []
    parsed: dict[Path, tuple[str, list[tuple[int, int, int | None]]]] = {}
    for retrieval in retrievals:
        for e in retrieval.excerpts:
            if e.path not in parsed:
                doc = parse_document(e.path)
                parsed[e.path] = (full_text(doc), [(s.start, s.end, s.page) for s in doc.sections])
            text, sections = parsed[e.path]
            chunks = index.chunks(e.chunk_ids)
            run = [chunks[i] for i in e.chunk_ids]
            where = f"[{e.n}] {e.path.name} p{e.page}-{e.last_page} for {retrieval.question!r}"
            if (e.page, e.last_page) != (run[0].page, run[-1].page):
                errors.append(f"{where}: pages are not its chunks' {run[0].page}-{run[-1].page}")
            for c in run:
                if c.path != e.path:
                    errors.append(f"{where}: chunk {c.id} is from {c.path}")
                if text[c.start : c.end] != c.text:
                    errors.append(f"{where}: chunk {c.id} is not at {c.start}:{c.end} of the file")
                if c.text not in e.text:
                    errors.append(f"{where}: chunk {c.id}'s text is missing from the excerpt")
                home = [page for start, end, page in sections if start <= c.start and c.end <= end]
                if home != [c.page]:
                    errors.append(f"{where}: chunk {c.id} is on page(s) {home}, cited as {c.page}")
    return errors
