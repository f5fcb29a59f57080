"""A generating chat while the embedder indexes: how much slower it decodes, and what yielding buys.

A chat model (Gemma 3 270M Q4_K_M from ``.test-cache``, as tests/conftest.py's ``gemma_path``
assembles it; ``--chat-threads``, default the machine's physical cores, as the planner gives a
chat on an idle machine) answers the same greedy request (``--tokens``, default 128) in three cases:

- ``alone``: nothing else runs in the process;
- ``indexing``: a ``DocumentIndex.index_paths`` run on its own thread indexes the retrieval
  corpus (PDFs, DOCXs, text; a fresh index each time, so it has work) with all-MiniLM-L6-v2
  (``--embed-threads``), started a second before the request;
- ``courteous``: the same, the run given ``CourteousEmbedder(embedder, Courtesy(busy))``
  (engine/documents/yielding.py), ``busy`` saying whether the chat is generating (here an
  event set from submit to the reply, as the app's reply-in-flight would).

The cases alternate within each round, each round starting one case later, so drifting load
(other programs on a shared machine) hits them alike; medians over ``--rounds``. Decode tok/s
and the time to first token come from the Completion's timings; ``chunks_per_s_while_chat``
is what the indexing run embedded while the reply was computed. Target: decode ≤ 10% slower
than alone.

On a machine other programs keep busy, a chat on every core is timed by their load more than by
ours (llama.cpp's threads wait for each other at every barrier, so one descheduled thread stalls
them all: ``alone`` itself then ranges 3 to 48 tok/s); there, ``--chat-threads 1`` measures the
interference and not the neighbours.

Run: ``.venv/bin/python -m benchmarks.bench_embed_interference [--rounds 5]``
(writes ``benchmarks/results/embed_interference.json``; a few minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "embed_interference.json"
PROMPT = "Explain in a few paragraphs how a bicycle stays upright while moving."
TOKENS = 128
CASES = ("alone", "indexing", "courteous")
TARGET_SLOWDOWN = 0.10


def load_chat(threads: int) -> Any:
    from app.platform.default_model import ensure_default_model
    from engine import Engine, LoadRequest, inspect_model, plan_load, take_snapshot

    path = ensure_default_model(REPO / ".test-cache")
    request = LoadRequest(context_per_conversation=2048, parallel=1, threads=threads)
    plan = plan_load(inspect_model(path), take_snapshot(), request)
    assert plan.params.n_threads == threads
    return path, Engine.load(plan).wait_ready(300)


def ask(model: Any, generating: threading.Event, tokens: int = TOKENS) -> dict[str, Any]:
    from engine import GREEDY, ChatMessage, ChatRequest

    request = ChatRequest(messages=(ChatMessage("user", PROMPT),), sampling=GREEDY, max_tokens=tokens)
    generating.set()
    try:
        completion = model.submit(request).wait(600)
    finally:
        generating.clear()
    t = completion.timings
    return {
        "decode_tps": round(t.decode_tokens_per_second, 2),
        "ttft_s": round(t.ttft, 3),
        "tokens": completion.usage.completion_tokens,
    }


class Indexing:
    """An index run on its own thread, counting the chunks it embeds, cancelled on exit."""

    def __init__(self, embedder: Any, folder: Path, db: Path) -> None:
        from engine.documents.index import DocumentIndex
        from engine.documents.index_control import IndexControl

        self.embedder, self.folder = embedder, folder
        self.index = DocumentIndex(db)
        self.index.create_collection("c")
        self.control = IndexControl()
        self.embedded = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="bench-indexing", daemon=True)

    def _run(self) -> None:
        counted = _Counting(self.embedder, self)
        try:
            self.index.index_paths("c", [self.folder], counted, control=self.control)
        except BaseException as error:
            self.error = error

    def __enter__(self) -> Indexing:
        self.thread.start()
        time.sleep(1.0)  # into its steady state: parsing done, embedding
        return self

    def __exit__(self, *_: object) -> None:
        self.control.cancel()
        self.thread.join()
        self.index.close()
        if self.error is not None:
            raise self.error
        if not self.thread_did_work():
            raise RuntimeError("the indexing run embedded nothing: no interference was measured")

    def thread_did_work(self) -> bool:
        return self.embedded > 0


class _Counting:
    def __init__(self, inner: Any, run: Indexing) -> None:
        self.inner, self.run = inner, run
        self.name, self.dim, self.window = inner.name, inner.dim, inner.window

    def embed(self, texts: Any) -> Any:
        out = self.inner.embed(texts)
        self.run.embedded += len(texts)
        return out

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


def one_case(
    case: str, model: Any, embedder: Any, folder: Path, work: Path, n: int, tokens: int
) -> dict[str, Any]:
    from engine.documents.yielding import CourteousEmbedder, Courtesy

    generating = threading.Event()
    load_before = os.getloadavg()[0]
    if case == "alone":
        result = ask(model, generating, tokens)
    else:
        courtesy = Courtesy(generating.is_set) if case == "courteous" else None
        indexer = CourteousEmbedder(embedder, courtesy) if courtesy is not None else embedder
        with Indexing(indexer, folder, work / f"{case}-{n}.sqlite3") as run:
            before, started = run.embedded, time.monotonic()
            result = ask(model, generating, tokens)
            seconds = time.monotonic() - started
            # Counted per embed call (32 texts): over one reply it is coarse, so the rate over
            # a few replies' median is what to read.
            result["chunks_embedded_during_reply"] = run.embedded - before
            result["reply_seconds"] = round(seconds, 2)
        if courtesy is not None:
            stats = courtesy.stats()
            result["courtesy"] = {
                "waits": stats.waits,
                "seconds_waited": round(stats.seconds_waited, 2),
                "forced": stats.forced,
            }
    result["loadavg_1m_before"] = round(load_before, 2)
    return result


def summarize(runs: list[dict[str, Any]], alone_tps: float | None) -> dict[str, Any]:
    tps = statistics.median(r["decode_tps"] for r in runs)
    out: dict[str, Any] = {
        "decode_tps_median": round(tps, 2),
        "ttft_s_median": round(statistics.median(r["ttft_s"] for r in runs), 3),
        "runs": runs,
    }
    if alone_tps:
        out["slowdown"] = round(1 - tps / alone_tps, 4)
        out["within_target"] = 1 - tps / alone_tps <= TARGET_SLOWDOWN
    return out


def run(rounds: int, chat_threads: int, embed_threads: int, tokens: int = TOKENS) -> dict[str, Any]:
    from benchmarks.bench_embedding import model_path
    from benchmarks.bench_indexing import machine, mixed_documents
    from engine.documents.embedding import open_embedder

    result: dict[str, Any] = {
        "machine": machine(),
        "chat_threads": chat_threads,
        "embed_threads": embed_threads,
    }
    chat_path, model = load_chat(chat_threads)
    embedder = open_embedder(model_path(), n_threads=embed_threads)
    result["chat_model"], result["embedder"] = chat_path.name, embedder.name
    result["reply_tokens"] = tokens
    runs: dict[str, list[dict[str, Any]]] = {case: [] for case in CASES}
    try:
        with tempfile.TemporaryDirectory(prefix="hearth-bench-interference-") as tmp:
            work = Path(tmp)
            folder = mixed_documents(work / "docs", 1)
            ask(model, threading.Event())  # warm-up: the first reply pays for loading pages
            for r in range(rounds):
                for i in range(len(CASES)):
                    case = CASES[(r + i) % len(CASES)]
                    got = one_case(case, model, embedder, folder, work, r, tokens)
                    print(case, got, flush=True)
                    runs[case].append(got)
    finally:
        embedder.close()
        model.unload()
    alone = statistics.median(r["decode_tps"] for r in runs["alone"])
    result["cases"] = {case: summarize(runs[case], None if case == "alone" else alone) for case in CASES}
    result["target_slowdown"] = TARGET_SLOWDOWN
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=TOKENS, help="reply tokens per request")
    parser.add_argument("--chat-threads", type=int, default=None, help="default: physical cores")
    parser.add_argument("--embed-threads", type=int, default=None, help="default: the embedder's default")
    args = parser.parse_args()
    from engine.documents.embedding import default_threads
    from engine.machine.hardware import physical_cores

    chat_threads = args.chat_threads or physical_cores()
    embed_threads = args.embed_threads or default_threads()
    result = run(args.rounds, chat_threads, embed_threads, args.tokens)
    for case in CASES:
        c = result["cases"][case]
        print(case, c["decode_tps_median"], c.get("slowdown"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
