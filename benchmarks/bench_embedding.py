"""The default embedder (all-MiniLM-L6-v2, f16 GGUF): memory it adds, and chunks per second.

Memory: a child process imports llama.cpp and brings up its backend, then opens the
embedder and embeds one batch; RSS and USS growth over that baseline (psutil) are set
against ``estimate_embedder_memory``. The target: at most 150 MB.

Speed: batches of 32 texts of about 192 tokens each ([CLS]/[SEP] included), the size of a
document chunk, embedded by Hearth's ``Embedder`` (texts packed into 512-token decodes on
the embedder's own thread) and by ``llama_cpp.Llama.embed`` on the same GGUF with the same
context (n_ctx = n_batch = n_ubatch = 512, flash attention on). Rounds alternate between the two; medians are
reported, with the vectors' agreement between them.

Run: ``.venv/bin/python -m benchmarks.bench_embedding [--rounds 5] [--batches 4] [--threads 1,2]``
(default threads: 1 and the machine's physical cores); writes ``benchmarks/results/embedding.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "embedding.json"
MIB = 1 << 20
BATCH = 32
TOKENS_PER_TEXT = 192
TARGET_RSS_BYTES = 150 * 1000 * 1000

_SENTENCES = (
    "The committee reviewed the quarterly figures and noted a steady rise in heating costs.",
    "A retrieval system splits each document into chunks and embeds every chunk once.",
    "Reciprocal rank fusion merges the keyword ranking with the vector ranking.",
    "The river flooded the lower fields twice this spring, delaying the planting by weeks.",
    "Her thesis compares three ways of caching intermediate results in a compiler.",
    "Invoices older than ninety days are sent to the collections department automatically.",
    "The telescope's new mirror was polished to within a few nanometres of the design.",
    "def tokenize(text): return [piece for piece in text.split() if piece]",
    "Patients reported fewer side effects with the lower dose after the second week.",
    "Install the package, then run the setup command to download the default model.",
)


def model_path() -> Path:
    """The default embedder as setup-default-model makes it, converted into .test-cache/."""
    from app.platform.embedding_model import EMBEDDER_NAME, MODEL_LABEL, source_folder
    from engine.documents.bert_convert import ensure_converted

    target = REPO / ".test-cache" / "embedders" / EMBEDDER_NAME
    return ensure_converted(source_folder(), target, name=MODEL_LABEL)


def chunk_texts(count_tokens: Any, n: int, offset: int = 0) -> list[str]:
    """``n`` different texts of about TOKENS_PER_TEXT tokens (specials included)."""
    texts = []
    for i in range(n):
        words: list[str] = []
        k = offset + i
        while True:
            sentence = _SENTENCES[k % len(_SENTENCES)]
            k += 3
            candidate = [*words, f"({offset + i})", sentence]
            if count_tokens(" ".join(candidate)) + 2 > TOKENS_PER_TEXT:
                break
            words = candidate
        texts.append(" ".join(words))
    return texts


def memory_child(path: Path, threads: int | None) -> dict[str, Any]:
    import psutil

    from engine.native import ensure_backend

    process = psutil.Process()
    ensure_backend()
    before = process.memory_full_info()
    from engine.documents.embedding import open_embedder
    from engine.documents.embedding_file import embedder_memory

    embedder = open_embedder(path, n_threads=threads)
    opened = process.memory_full_info()
    texts = chunk_texts(embedder.count_tokens, BATCH)
    embedder.embed(texts)
    embedder.embed(["word " * 1000])  # one text at the full window: the largest decode
    after = process.memory_full_info()
    estimate = embedder_memory(embedder.info)
    embedder.close()
    closed = process.memory_full_info()
    return {
        "rss_added_open": opened.rss - before.rss,
        "rss_added": after.rss - before.rss,
        "uss_added": after.uss - before.uss,
        "rss_left_after_close": closed.rss - before.rss,
        "estimate": {**estimate.__dict__, "total": estimate.total},
        "baseline_rss": before.rss,
    }


def run_memory_child(path: Path, threads: int | None) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.bench_embedding", "--child", str(path)]
    if threads:
        command += ["--threads", str(threads)]
    out = subprocess.run(command, capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(out.stdout.strip().splitlines()[-1])


def speed(path: Path, rounds: int, batches: int, threads: int | None) -> dict[str, Any]:
    import llama_cpp

    from engine.documents.embedding import open_embedder

    embedder = open_embedder(path, n_threads=threads)
    n_threads = embedder.n_threads
    peer = llama_cpp.Llama(
        str(path),
        embedding=True,
        n_ctx=embedder.window,
        n_batch=embedder.window,
        n_ubatch=embedder.window,
        n_threads=n_threads,
        n_threads_batch=n_threads,
        pooling_type=int(embedder.info.pooling),
        flash_attn=True,  # as Hearth's context (auto: on for the CPU); Llama's default is off
        verbose=False,
    )
    sets = [chunk_texts(embedder.count_tokens, BATCH, offset=b * BATCH) for b in range(batches)]
    tokens = [sum(len(embedder.tokenize(t)) for t in texts) for texts in sets]
    embedder.embed(sets[0])  # warm: weights paged in, buffers grown
    peer.embed(sets[0], normalize=True)
    ours: list[float] = []
    theirs: list[float] = []
    agreement = 1.0
    for r in range(rounds):
        for which in ("ours", "llama") if r % 2 == 0 else ("llama", "ours"):
            start = time.perf_counter()
            for texts in sets:
                if which == "ours":
                    mine = embedder.embed(texts)
                else:
                    peer_rows = np.asarray(peer.embed(texts, normalize=True), dtype=np.float32)
            seconds = time.perf_counter() - start
            (ours if which == "ours" else theirs).append(BATCH * batches / seconds)
        agreement = min(agreement, float((mine * peer_rows).sum(axis=1).min()))
    embedder.close()
    peer.close()
    return {
        "threads": n_threads,
        "batch_texts": BATCH,
        "batches_per_round": batches,
        "tokens_per_text_mean": statistics.mean(tokens) / BATCH,
        "rounds": rounds,
        "hearth_chunks_per_s": statistics.median(ours),
        "llama_embed_chunks_per_s": statistics.median(theirs),
        "hearth_runs": ours,
        "llama_embed_runs": theirs,
        "hearth_tokens_per_s": statistics.median(ours) * statistics.mean(tokens) / BATCH,
        "min_cosine_hearth_vs_llama_embed": agreement,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=4, help="batches of 32 texts per round")
    parser.add_argument("--threads", default=None, help="thread counts, e.g. 1,2 (default: 1 and the cores)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(memory_child(Path(args.child), int(args.threads) if args.threads else None)))
        return 0

    from engine.machine.cpu_load import logical_cpus, physical_cores
    from engine.machine.hardware import cpu_name

    counts = [int(n) for n in args.threads.split(",")] if args.threads else sorted({1, physical_cores()})
    path = model_path()
    memory = run_memory_child(path, counts[0])
    print(
        f"RSS added {memory['rss_added'] / MIB:.1f} MiB "
        f"(after opening: {memory['rss_added_open'] / MIB:.1f}), USS {memory['uss_added'] / MIB:.1f} MiB, "
        f"estimate {memory['estimate']['total'] / MIB:.1f} MiB",
        flush=True,
    )
    result = {
        "machine": {"cpu": cpu_name(), "physical_cores": physical_cores(), "logical_cpus": logical_cpus()},
        "model": path.name,
        "model_bytes": path.stat().st_size,
        "memory": {
            **memory,
            "target_rss_bytes": TARGET_RSS_BYTES,
            "within_target": memory["rss_added"] <= TARGET_RSS_BYTES,
        },
        "load_average_before": os.getloadavg(),
        "speed": [],
    }
    for threads in counts:
        s = speed(path, args.rounds, args.batches, threads)
        result["speed"].append(s)
        print(
            f"{s['hearth_chunks_per_s']:.1f} chunks/s (Hearth) vs "
            f"{s['llama_embed_chunks_per_s']:.1f} (Llama.embed), "
            f"{s['tokens_per_text_mean']:.0f} tokens each, {s['threads']} threads; "
            f"min cosine {s['min_cosine_hearth_vs_llama_embed']:.6f}",
            flush=True,
        )
    result["load_average_after"] = os.getloadavg()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
