"""The retrieval test set as values: its documents (manifest.json) and questions (questions.json).

A question is answered by any one of its answers: a retrieved excerpt from that file (and, for a
PDF, that page) counts as a hit. Each answer carries its evidence, a short exact phrase of the
document that proves the answer is there; tests/engine/documents/test_corpus.py finds every one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus"
QUESTIONS = CORPUS / "questions.json"
MANIFEST = CORPUS / "manifest.json"


class QuestionKind(StrEnum):
    FACTUAL = "factual"  # asks for a fact in words close to the document's
    PARAPHRASE = "paraphrase"  # the same need in other words: where dense retrieval should help
    KEYWORD = "keyword"  # an identifier, code or option name: where BM25 should help
    GENERIC = "generic"  # "what does X say about Y?": broad, the kind others answer with nothing


@dataclass(frozen=True)
class Answer:
    file: str
    page: int | None  # 1-based for PDFs, None for every other format
    evidence: str


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    kind: QuestionKind
    answers: tuple[Answer, ...]

    def is_answered_by(self, file: str, page: int | None) -> bool:
        """Whether an excerpt from ``file`` (at ``page``) is one of this question's answers."""
        return any(a.file == file and (a.page is None or a.page == page) for a in self.answers)


@dataclass(frozen=True)
class Document:
    file: str
    pages: int | None  # the page count a PDF must have; None for every other format
    topic: str


def load_questions(path: Path = QUESTIONS) -> tuple[Question, ...]:
    questions = tuple(_question(item) for item in json.loads(path.read_text(encoding="utf-8")))
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path.name}: question ids repeat")
    return questions


def _question(item: dict) -> Question:
    answers = tuple(Answer(a["file"], a["page"], a["evidence"]) for a in item["answers"])
    if not answers:
        raise ValueError(f"question {item['id']} has no answer")
    return Question(item["id"], item["question"], QuestionKind(item["kind"]), answers)


def load_manifest(path: Path = MANIFEST) -> tuple[Document, ...]:
    items = json.loads(path.read_text(encoding="utf-8"))["documents"]
    return tuple(Document(item["file"], item["pages"], item["topic"]) for item in items)
