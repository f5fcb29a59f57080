"""``POST /v1/embeddings``: Hearth's API server against llama.cpp's own ``llama-server
--embedding`` on the same GGUF (all-MiniLM-L6-v2, f16), side by side in one run.

Both servers run as their own processes on loopback, each with the same thread count; this
process is the client, the official ``openai`` SDK (``client.embeddings.create``), sending
the same requests to both: batches of 32 texts of about 190 tokens each ([CLS]/[SEP]
included), cut from the 21 real documents of tests/engine/documents/corpus. Rounds
alternate which server goes first; one server is idle while the other is timed.

Reported per thread count: chunks/s per round and their median for each side, the ratio
Hearth / llama-server (issue 28's target: at least 1.0), and the cosine between the two
servers' vectors for every text (target: at least 0.999).

The peer is ``benchmarks.peer_server``'s build (``python -m benchmarks.peer_server`` builds
it, 10-20 minutes on 2 cores). Its context: ``--parallel`` slots of 512 tokens each, batches
of 512 (``-c 512*np -np np -b 512 -ub 512``), so it can pack several texts into one decode as
Hearth's embedder does; ``--peer-slots 1`` gives it one slot (one text per decode).

Run: ``.venv/bin/python -m benchmarks.bench_embeddings_api [--rounds 5] [--batches 2]
[--threads 1,2] [--peer-slots 4] [--encoding float]``; writes
``benchmarks/results/embeddings_api.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "embeddings_api.json"
CORPUS = REPO / "tests" / "engine" / "documents" / "corpus" / "documents"
BATCH = 32
TOKENS_PER_TEXT = 190
WINDOW = 512  # the embedder's window: one decode of at most this many tokens, both sides
MIN_COSINE = 0.999
MIN_RATIO = 1.0
START_TIMEOUT = 120.0


def model_path() -> Path:
    from benchmarks.bench_embedding import model_path as default_embedder

    return default_embedder()


def corpus_texts(count_tokens: Callable[[str], int], n: int) -> list[str]:
    """``n`` texts of about TOKENS_PER_TEXT tokens each, consecutive runs of the corpus' words
    (wrapping round it; a text never spans two documents)."""
    documents = [p.read_text(errors="replace").split() for p in sorted(CORPUS.iterdir()) if p.is_file()]
    documents = [words for words in documents if words]
    texts: list[str] = []
    doc, at = 0, 0
    while len(texts) < n:
        words = documents[doc % len(documents)]
        if at >= len(words):
            doc, at = doc + 1, 0
            continue
        # Grow by a few words at a time, then trim back: the tokenizer is slow in Python.
        end = at
        while end < len(words) and count_tokens(" ".join(words[at : end + 8])) + 2 <= TOKENS_PER_TEXT:
            end += 8
        while end < len(words) and count_tokens(" ".join(words[at : end + 1])) + 2 <= TOKENS_PER_TEXT:
            end += 1
        if count_tokens(" ".join(words[at:end])) < TOKENS_PER_TEXT // 2:  # a short tail: next document
            doc, at = doc + 1, 0
            continue
        texts.append(" ".join(words[at:end]))
        at = end
    return texts


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- Hearth's side: the API server with only an embedder, in a child process -----------------


def serve_hearth(path: Path, threads: int, port: int) -> None:
    """The child: Hearth's ApiServer serving only ``path``'s embedder until SIGTERM."""
    from app.api import ApiServer, ServerConfig
    from engine.documents.embedding import open_embedder

    embedder = open_embedder(path, n_threads=threads)

    async def run() -> None:
        server = ApiServer(ServerConfig(host="127.0.0.1", port=port), lambda: None, embedder=lambda: embedder)
        await server.start()
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        print(json.dumps({"address": server.address, "threads": embedder.n_threads}), flush=True)
        await stop.wait()
        await server.stop()

    try:
        asyncio.run(run())
    finally:
        embedder.close()


def wait_healthy(url: str, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited ({process.returncode}) before it was ready.")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{what} was not ready after {START_TIMEOUT:.0f} s.")


def start_hearth(path: Path, threads: int) -> tuple[subprocess.Popen, str, list[str]]:
    port = free_port()
    command = [sys.executable, "-m", "benchmarks.bench_embeddings_api", "--serve-hearth", str(path)]
    command += ["--threads", str(threads), "--port", str(port)]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise SystemExit(f"Hearth's server exited ({process.wait()}) before it was ready.")
    return process, json.loads(line)["address"], command


def peer_command(binary: Path, path: Path, threads: int, slots: int, port: int) -> list[str]:
    return [
        *(str(binary), "-m", str(path), "--embedding", "--pooling", "mean"),
        *("--host", "127.0.0.1", "--port", str(port)),
        *("-c", str(WINDOW * slots), "-np", str(slots), "-b", str(WINDOW), "-ub", str(WINDOW)),
        *("-t", str(threads), "-tb", str(threads), "-fa", "on", "--no-webui"),
    ]


def start_peer(binary: Path, path: Path, threads: int, slots: int) -> tuple[subprocess.Popen, str, list[str]]:
    port = free_port()
    command = peer_command(binary, path, threads, slots, port)
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-peer-{port}.log", "w")  # noqa: SIM115
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    wait_healthy(f"http://127.0.0.1:{port}/health", process, f"llama-server (log: {log.name})")
    return process, f"http://127.0.0.1:{port}/v1", command


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- the client -------------------------------------------------------------------------------


def embed_all(client: Any, sets: Sequence[list[str]], encoding: str) -> tuple[np.ndarray, int]:
    """Every batch, one request each: the vectors (rows in input order, normalised here) and
    the prompt tokens the server counted."""
    rows: list[np.ndarray] = []
    tokens = 0
    for texts in sets:
        response = client.embeddings.create(model="embedder", input=texts, encoding_format=encoding)
        data = sorted(response.data, key=lambda d: d.index)
        if len(data) != len(texts):
            raise SystemExit(f"{len(data)} vectors for {len(texts)} texts.")
        for d in data:
            # The SDK decodes base64 itself only when it chose the encoding; here it is asked.
            raw = d.embedding
            rows.append(np.frombuffer(base64.b64decode(raw), dtype="<f4") if isinstance(raw, str) else raw)
        tokens += response.usage.prompt_tokens if response.usage else 0
    vectors = np.stack(rows).astype(np.float64)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True), tokens


def compare(
    path: Path, binary: Path, threads: int, slots: int, sets: list[list[str]], rounds: int, encoding: str
) -> dict[str, Any]:
    import openai

    hearth, hearth_url, hearth_command = start_hearth(path, threads)
    try:
        peer, peer_url, command = start_peer(binary, path, threads, slots)
        try:
            clients = {
                "hearth": openai.OpenAI(base_url=hearth_url, api_key="none", max_retries=0, timeout=300),
                "peer": openai.OpenAI(base_url=peer_url, api_key="none", max_retries=0, timeout=300),
            }
            vectors = {}
            tokens = {}
            for side, client in clients.items():  # warm: weights paged in, buffers grown
                vectors[side], tokens[side] = embed_all(client, sets, encoding)
            runs: dict[str, list[float]] = {"hearth": [], "peer": []}
            chunks = BATCH * len(sets)
            for r in range(rounds):
                for side in ("hearth", "peer") if r % 2 == 0 else ("peer", "hearth"):
                    start = time.perf_counter()
                    vectors[side], _ = embed_all(clients[side], sets, encoding)
                    runs[side].append(chunks / (time.perf_counter() - start))
        finally:
            stop(peer)
    finally:
        stop(hearth)
    cosines = (vectors["hearth"] * vectors["peer"]).sum(axis=1)
    hearth_median = statistics.median(runs["hearth"])
    peer_median = statistics.median(runs["peer"])
    return {
        "threads": threads,
        "peer_slots": slots,
        "encoding_format": encoding,
        "batch_texts": BATCH,
        "batches_per_round": len(sets),
        "rounds": rounds,
        "prompt_tokens_per_text_mean": {side: n / chunks for side, n in tokens.items()},
        "hearth_chunks_per_s": hearth_median,
        "peer_chunks_per_s": peer_median,
        "ratio_hearth_over_peer": hearth_median / peer_median,
        "hearth_runs": runs["hearth"],
        "peer_runs": runs["peer"],
        "cosine_min": float(cosines.min()),
        "cosine_mean": float(cosines.mean()),
        "texts_compared": len(cosines),
        "hearth_command": hearth_command,
        "peer_command": command,
        "cosine_ok": bool(cosines.min() >= MIN_COSINE),
        "speed_ok": hearth_median / peer_median >= MIN_RATIO,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=2, help="requests of 32 texts per round")
    parser.add_argument("--threads", default="1,2", help="thread counts, both servers, e.g. 1,2")
    parser.add_argument("--peer-slots", type=int, default=4, help="llama-server's --parallel")
    parser.add_argument("--encoding", choices=("float", "base64"), default="float")
    parser.add_argument("--model", type=Path, default=None, help="the GGUF (default: the default embedder)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--serve-hearth", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_hearth:
        serve_hearth(args.serve_hearth, int(args.threads), args.port)
        return 0

    from benchmarks.peer_server import peer_server
    from engine.documents.embedding import open_embedder
    from engine.machine.cpu_load import logical_cpus, physical_cores
    from engine.machine.hardware import cpu_name

    binary = peer_server()
    if binary is None:
        raise SystemExit("llama-server is not built: run `python -m benchmarks.peer_server` first.")
    path = args.model or model_path()
    tokenizer = open_embedder(path, n_threads=1)
    texts = corpus_texts(tokenizer.count_tokens, BATCH * args.batches)
    text_tokens = [tokenizer.count_tokens(t) + 2 for t in texts]
    tokenizer.close()
    sets = [texts[i : i + BATCH] for i in range(0, len(texts), BATCH)]
    result: dict[str, Any] = {
        "machine": {"cpu": cpu_name(), "physical_cores": physical_cores(), "logical_cpus": logical_cpus()},
        "model": path.name,
        "model_bytes": path.stat().st_size,
        "peer_binary": str(binary),
        "texts": len(texts),
        "tokens_per_text": {
            "mean": statistics.mean(text_tokens),
            "min": min(text_tokens),
            "max": max(text_tokens),
        },
        "targets": {"cosine_min": MIN_COSINE, "ratio_min": MIN_RATIO},
        "load_average_before": os.getloadavg(),
        "runs": [],
    }
    for threads in (int(n) for n in args.threads.split(",")):
        s = compare(path, binary, threads, args.peer_slots, sets, args.rounds, args.encoding)
        result["runs"].append(s)
        print(
            f"{threads} thread(s): Hearth {s['hearth_chunks_per_s']:.1f} chunks/s, "
            f"llama-server {s['peer_chunks_per_s']:.1f} ({args.peer_slots} slots), "
            f"ratio {s['ratio_hearth_over_peer']:.3f}; cosine min {s['cosine_min']:.6f} "
            f"mean {s['cosine_mean']:.6f}",
            flush=True,
        )
        # Written after every thread count: a long run cut short keeps what it measured.
        result["load_average_after"] = os.getloadavg()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
