"""Indexing speed with the real parts, and what bounds it; then incremental indexing at 1,000 files.

**Speed.** The retrieval corpus (tests/engine/documents/corpus: PDFs, DOCXs, Markdown, text,
code, HTML) copied ``--copies`` times, each copy's files renamed and their text changed (a line
naming the copy at the top; the PDFs and DOCXs generated again from their sources with that
line), so no two files share content. ``DocumentIndex.index_paths`` indexes the folder end to
end with all-MiniLM-L6-v2 (f16 GGUF, ``--threads``), the real parser and chunker passed in
wrapped in timers, and the embedder wrapped the same way, which splits the time into:

- ``parse``: files into sections (PDFium, python-docx, the text readers);
- ``tokenize``: the embedder's tokenizer counting tokens for the chunker;
- ``chunk``: the chunker's own work, tokenizing left out;
- ``embed``: the embedder's calls (its own tokenizing of the texts included);
- ``rest``: everything else the run does: scanning, stat, SHA-256, the SQLite transactions
  (chunks, FTS5 triggers, vector BLOBs), progress.

Pages: a PDF's real pages, and for every other file one page per 3,000 characters of its
extracted text (about 500 words, a printed page), rounded up; ``pages_per_s`` counts both.

**Incremental.** 1,000 small text files (one with several chunks), indexed; then one file
edited in one paragraph: only its changed chunks are embedded; then the index opened again
(a restart) and the folder indexed again: nothing embedded. The counts and seconds of each.

Run: ``.venv/bin/python -m benchmarks.bench_indexing [--copies 5] [--threads 1] [--small-files 1000]``
(writes ``benchmarks/results/indexing.json``; a few minutes on 2 cores, nearly all of it embedding).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.documents.chunking import chunk_document
from engine.documents.document import ParsedDocument, full_text
from engine.documents.index import DocumentIndex
from engine.documents.parsing import parse_document

RESULTS = Path(__file__).resolve().parent / "results" / "indexing.json"
CHARS_PER_PAGE = 3000
COPIES = 5
SMALL_FILES = 1000


def machine() -> dict[str, Any]:
    """The machine as Hearth's planner sees it (engine.machine), with the load when measured."""
    from engine.machine.hardware import take_snapshot

    snap = take_snapshot(cpu_window=0.5)
    return {
        "cpu": snap.cpu_name,
        "physical_cores": snap.physical_cores,
        "logical_cores": snap.logical_cores,
        "simd_build": list(snap.simd),
        "simd_cpu": list(snap.cpu_simd),
        "ram_total_bytes": snap.ram_total,
        "cpus_busy_elsewhere": round(snap.cpu_busy_elsewhere, 2),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


# -- timing wrappers -----------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {"parse": 0.0, "chunk_total": 0.0, "tokenize": 0.0, "embed": 0.0}
        self.counts: dict[str, int] = {"files": 0, "pdf_pages": 0, "page_equivalents": 0, "characters": 0}
        self.texts_embedded = 0

    def timed(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        # wraps: the index reads the chunker's defaults from its signature.
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[phase] += time.perf_counter() - started

        return call

    def parse(self, path: Path) -> ParsedDocument:
        doc = self.timed("parse", parse_document)(path)
        self.counts["files"] += 1
        self.counts["pdf_pages"] += pdf_pages(doc)
        self.counts["page_equivalents"] += pages_of(doc)
        self.counts["characters"] += len(full_text(doc))
        return doc


class TimedEmbedder:
    """The real embedder, its calls timed: what the index sees is the same embedder."""

    def __init__(self, inner: Any, clock: Clock) -> None:
        self.inner, self.clock = inner, clock
        self.name, self.dim, self.window = inner.name, inner.dim, inner.window

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.clock.texts_embedded += len(texts)
        return self.clock.timed("embed", self.inner.embed)(texts)

    def count_tokens(self, text: str) -> int:
        return self.clock.timed("tokenize", self.inner.count_tokens)(text)


def pdf_pages(doc: ParsedDocument) -> int:
    return len({s.page for s in doc.sections if s.page is not None})


def pages_of(doc: ParsedDocument) -> int:
    if doc.kind.value == "pdf":
        return pdf_pages(doc)
    return max(1, math.ceil(len(full_text(doc)) / CHARS_PER_PAGE))


# -- the mixed documents -------------------------------------------------------------------------


def copy_line(i: int) -> str:
    return f"Copy {i} of this document, kept in the archive under number {1000 + i}."


def tweaked_text(name: str, text: str, i: int) -> str:
    line = copy_line(i)
    if name.endswith((".py", ".sh")):
        if text.startswith("#!"):
            first, _, rest = text.partition("\n")
            return f"{first}\n# {line}\n{rest}"
        return f"# {line}\n{text}"
    if name.endswith(".rs"):
        return f"// {line}\n{text}"
    if name.endswith((".html", ".htm")):
        return (
            text.replace("<body>", f"<body>\n<p>{line}</p>", 1)
            if "<body>" in text
            else text + f"<p>{line}</p>"
        )
    return f"{line}\n\n{text}"


def mixed_documents(folder: Path, copies: int) -> Path:
    """``copies`` of the corpus, every file with its own name and content."""
    from tests.engine.documents import make_corpus
    from tests.engine.documents.corpus_fixture import committed_documents
    from tests.engine.documents.make_corpus import Paragraph

    sources = make_corpus.read_sources()
    for i in range(copies):
        target = folder / f"copy{i:02d}"
        target.mkdir(parents=True)
        for path in committed_documents():
            text = path.read_text(encoding="utf-8")
            (target / f"c{i:02d}_{path.name}").write_text(tweaked_text(path.name, text, i), encoding="utf-8")
        variants = []
        for s in sources:
            first = (Paragraph(copy_line(i)), *s.pages[0])
            variants.append(dataclasses.replace(s, name=f"c{i:02d}_{s.name}", pages=(first, *s.pages[1:])))
        make_corpus.generate(target, variants)
    return folder


def speed(work: Path, embedder: Any, copies: int) -> dict[str, Any]:
    docs = mixed_documents(work / "mixed", copies)
    clock = Clock()
    timed = TimedEmbedder(embedder, clock)
    index = DocumentIndex(
        work / "speed.sqlite3", parse=clock.parse, chunk=clock.timed("chunk_total", chunk_document)
    )
    with index:
        index.create_collection("mixed")
        started = time.perf_counter()
        report = index.index_paths("mixed", [docs], timed)
        total = time.perf_counter() - started
        info = index.collection("mixed")
    s = clock.seconds
    split = {
        "parse": s["parse"],
        "tokenize": s["tokenize"],
        "chunk": s["chunk_total"] - s["tokenize"],
        "embed": s["embed"],
    }
    split["rest"] = total - sum(split.values())
    pages = clock.counts["page_equivalents"]
    return {
        "copies": copies,
        "files": report.files,
        "indexed": report.indexed,
        "refused": report.refused,
        "pages": pages,
        "pdf_pages": clock.counts["pdf_pages"],
        "characters": clock.counts["characters"],
        "chunks": info.chunks,
        "chunk_tokens": info.tokens,
        "chunks_embedded": report.chunks_embedded,
        "seconds": round(total, 2),
        "pages_per_s": round(pages / total, 3),
        "chunks_per_s": round(info.chunks / total, 3),
        "embed_only_chunks_per_s": round(clock.texts_embedded / max(s["embed"], 1e-9), 3),
        "phase_seconds": {k: round(v, 3) for k, v in split.items()},
        "phase_share": {k: round(v / total, 4) for k, v in split.items()},
        "bound_by": max(split, key=lambda k: split[k]),
    }


# -- incremental ---------------------------------------------------------------------------------

_WORDS = (
    *("river", "meadow", "lantern", "harbour", "orchard", "copper", "window", "garden"),
    *("signal", "ledger", "marble", "thistle", "anchor", "bridge", "candle", "saddle"),
    *("quarry", "timber", "beacon", "compass", "kettle", "ribbon", "pebble", "furnace"),
)


def small_text(i: int) -> str:
    rng = np.random.default_rng(i)
    words = [_WORDS[j] for j in rng.integers(0, len(_WORDS), 30)]
    return f"Note {i}. " + " ".join(words).capitalize() + "."


def long_text(version: int) -> str:
    paragraphs = [
        f"Paragraph {p} of the long note. " + " ".join(_WORDS[(p + j) % len(_WORDS)] for j in range(90)) + "."
        for p in range(8)
    ]
    if version:
        paragraphs[5] = "This paragraph was rewritten: the quarry closed and the orchard moved north."
    return "\n\n".join(paragraphs)


def incremental(work: Path, embedder: Any, files: int) -> dict[str, Any]:
    folder = work / "small"
    folder.mkdir()
    (folder / "note_0000.txt").write_text(long_text(0), encoding="utf-8")
    for i in range(1, files):
        (folder / f"note_{i:04d}.txt").write_text(small_text(i), encoding="utf-8")
    db = work / "incremental.sqlite3"

    def step(index: DocumentIndex) -> dict[str, Any]:
        started = time.perf_counter()
        r = index.index_paths("small", [folder], embedder)
        return {
            "files": r.files,
            "indexed": r.indexed,
            "unchanged": r.unchanged,
            "touched": r.touched,
            "chunks_embedded": r.chunks_embedded,
            "chunks_reused": r.chunks_reused,
            "seconds": round(time.perf_counter() - started, 3),
        }

    with DocumentIndex(db) as index:
        index.create_collection("small")
        first = step(index)
        long_chunks = next(d.chunk_count for d in index.documents("small") if d.path.name == "note_0000.txt")
        edited = folder / "note_0000.txt"
        edited.write_text(long_text(1), encoding="utf-8")
        after_edit = step(index)
        os.utime(folder / f"note_{files // 2:04d}.txt")  # a touch that changes no byte
        after_touch = step(index)
    with DocumentIndex(db) as index:  # a restart: a new process would open the file the same way
        restart = step(index)
    return {
        "files": files,
        "edited_file_chunks": long_chunks,
        "first_index": first,
        "one_paragraph_edited": after_edit,
        "mtime_touched_only": after_touch,
        "restart_reindex": restart,
    }


def run(copies: int, threads: int, small_files: int) -> dict[str, Any]:
    from benchmarks.bench_embedding import model_path
    from engine.documents.embedding import open_embedder

    result: dict[str, Any] = {"machine": machine(), "threads": threads}
    embedder = open_embedder(model_path(), n_threads=threads)
    try:
        result["embedder"] = embedder.name
        with tempfile.TemporaryDirectory(prefix="hearth-bench-indexing-") as tmp:
            work = Path(tmp)
            result["speed"] = speed(work, embedder, copies)
            print(json.dumps(result["speed"], indent=2))
            shutil.rmtree(work / "mixed")
            if small_files:
                result["incremental"] = incremental(work, embedder, small_files)
                print(json.dumps(result["incremental"], indent=2))
    finally:
        embedder.close()
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--copies", type=int, default=COPIES)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--small-files", type=int, default=SMALL_FILES)
    args = parser.parse_args()
    result = run(args.copies, args.threads, args.small_files)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
