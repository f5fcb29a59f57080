"""Hearth against llama-server, bracketed (issue 30, part 0): for each model and 1, 2, 4 and 8
concurrent streams, llama-server runs, then Hearth, then llama-server again; Hearth's tokens/s
over the mean of the two peer runs around it is that round's ratio, and the median of the
rounds' ratios is reported. Bracketing cancels slow drifts in what else the machine runs.

Both servers are their own processes, kept up side by side and started in both orders (the
first-started ran slower here, whichever it was: ``run_model``): ``hearth serve`` and the
peer ``llama-server`` from ``benchmarks.peer_server``, same threads, 8 slots of 2,048 tokens,
batch 512. A stream is one ``/v1/completions`` request streamed with
``ignore_eos``, so both decode exactly ``--tokens`` tokens; wall time includes the prefill of a
prompt the cache has not seen (its last words differ per stream and round). Sampling is
llama.cpp's default chain (``--sampling default``) or greedy (``--sampling greedy``);
no speculation on either side.

Run: ``.venv/bin/python -m benchmarks.bench_peer [--models gemma,qwen] [--streams 1,2,4,8]
[--tokens 64] [--rounds 3]``; writes ``benchmarks/results/peer.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from benchmarks.bench_api import (
    SAMPLING,
    _peer_version,
    free_port,
    hearth_args,
    hearth_threads,
    peer_args,
    start,
    stream_completion,
)

RESULTS = Path(__file__).resolve().parent / "results" / "peer.json"
SLOTS = 8
CONTEXT = 2048
PROMPT = (
    "Write a short story about a lighthouse keeper who finds a message in a bottle. "
    "Describe the weather, the sea and what the message says. Story number"
)
GREEDY = {"temperature": 0.0, "top_k": 1, "repeat_penalty": 1.0}


def model_paths() -> dict[str, Path]:
    from app.platform.qwen_model import ensure_chat_model
    from benchmarks.bench_engine import gemma_path

    cache = Path(__file__).resolve().parent.parent / ".test-cache"
    return {"gemma": gemma_path(), "qwen": ensure_chat_model(cache)}


async def streams_round(url: str, streams: int, tokens: int, tag: str, sampling: dict) -> dict:
    """``streams`` concurrent requests of ``tokens`` tokens: aggregate tokens/s, wall included."""
    import aiohttp

    bodies = [
        {"prompt": f"{PROMPT} {tag}-{i}.", "max_tokens": tokens, "ignore_eos": True, "seed": 7 + i,
         "stream_options": {"include_usage": True}, **sampling}
        for i in range(streams)
    ]  # fmt: skip
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=900)) as session:
        started = time.perf_counter()
        results = await asyncio.gather(*(stream_completion(session, url, b) for b in bodies))
        wall = time.perf_counter() - started
    generated = sum(r["usage"]["completion_tokens"] for r in results)
    ttft = statistics.mean(r["ttft"] for r in results)
    return {"wall_s": round(wall, 3), "tokens": generated, "tps": round(generated / wall, 3),
            "mean_ttft_s": round(ttft, 4)}  # fmt: skip


def measured(
    url: str, streams: int, tokens: int, tag: str, sampling: dict, watch: dict | None = None
) -> dict:
    """One measured round, after a 2-token request that wakes the server's threads: the
    server measured before it sat idle while the other one ran, so both start warm. With
    ``watch`` (name: psutil.Process), the CPU seconds each process used per second of it,
    and the machine's busy CPUs: whether a slow round had its cores."""
    asyncio.run(streams_round(url, 1, 2, f"{tag}w", sampling))
    import psutil

    processes = watch or {}
    before = {name: sum(p.cpu_times()[:2]) for name, p in processes.items()}
    machine = psutil.cpu_times()
    row = asyncio.run(streams_round(url, streams, tokens, tag, sampling))
    after = psutil.cpu_times()
    wall = row["wall_s"]
    row["cpus_busy"] = {
        name: round((sum(p.cpu_times()[:2]) - before[name]) / wall, 2) for name, p in processes.items()
    }
    idle = (after.idle - machine.idle) / wall
    row["cpus_busy"]["machine"] = round((psutil.cpu_count() or 1) - idle, 2)
    return row


def bracketed(
    hearth: str, peer: str, streams: int, tokens: int, tag: str, sampling: dict, watch: dict | None = None
) -> dict:
    """llama-server, Hearth, llama-server; Hearth's rate over the mean of the two around it."""
    before = measured(peer, streams, tokens, f"{tag}a", sampling, watch)
    ours = measured(hearth, streams, tokens, f"{tag}b", sampling, watch)
    after = measured(peer, streams, tokens, f"{tag}c", sampling, watch)
    peer_tps = (before["tps"] + after["tps"]) / 2
    return {
        "hearth_tps": ours["tps"],
        "peer_tps": [before["tps"], after["tps"]],
        "ratio": round(ours["tps"] / peer_tps, 4),
        "hearth_ttft_s": ours["mean_ttft_s"],
        "peer_ttft_s": [before["mean_ttft_s"], after["mean_ttft_s"]],
        "cpus_busy": {
            "peer_before": before.get("cpus_busy"),
            "hearth": ours.get("cpus_busy"),
            "peer_after": after.get("cpus_busy"),
        },
    }


def run_model(name: str, model: Path, peer: Path, args: argparse.Namespace, logs: Path) -> dict:
    """Both start orders, ``args.rounds`` rounds each: on this machine the server started
    second ran 7-10% faster than the first, whichever it was (two identical Hearth servers
    included), so a ratio from one order measures the order as much as the servers."""
    threads = args.threads or hearth_threads(model, SLOTS, CONTEXT)
    sampling = GREEDY if args.sampling == "greedy" else SAMPLING
    streams = [int(s) for s in args.streams.split(",")]
    rows: dict[int, list[dict]] = {n: [] for n in streams}
    for first in ("hearth", "peer"):
        with ExitStack() as stack:
            h_port, p_port = free_port(), free_port()
            h_url, p_url = f"http://127.0.0.1:{h_port}", f"http://127.0.0.1:{p_port}"
            h_args = [*hearth_args(model, h_port, SLOTS, CONTEXT), "--threads", str(threads)]
            p_args = peer_args(peer, model, p_port, threads, SLOTS, CONTEXT)
            servers = {"hearth": (h_args, h_url), "peer": (p_args, p_url)}
            started = {}
            for who in (first, "peer" if first == "hearth" else "hearth"):
                argv, url = servers[who]
                started[who] = stack.enter_context(start(f"{who}-{name}", argv, url, logs))
            import psutil

            watch = {who: psutil.Process(server.proc.pid) for who, server in started.items()}
            for url in (h_url, p_url):  # warm-up: first decodes, page cache, allocator
                asyncio.run(streams_round(url, max(streams), 8, "warm", sampling))
            for r in range(args.rounds):
                for n in streams:
                    row = bracketed(h_url, p_url, n, args.tokens, f"{first}{r}n{n}", sampling, watch)
                    row["started_first"] = first
                    rows[n].append(row)
                    print(f"{name} ({first} started first) round {r} streams {n}: hearth "
                          f"{row['hearth_tps']:.2f} tok/s, peer {row['peer_tps']}, ratio {row['ratio']:.3f}",
                          flush=True)  # fmt: skip

    def median_of(runs: list[dict], first: str | None = None) -> float:
        return round(statistics.median(r["ratio"] for r in runs if first in (None, r["started_first"])), 4)

    return {
        "model": model.name,
        "threads": threads,
        "streams": {
            str(n): {
                "median_ratio": median_of(runs),
                "median_ratio_hearth_started_first": median_of(runs, "hearth"),
                "median_ratio_peer_started_first": median_of(runs, "peer"),
                "median_hearth_tps": round(statistics.median(r["hearth_tps"] for r in runs), 3),
                "rounds": runs,
            }
            for n, runs in rows.items()
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="gemma,qwen")
    parser.add_argument("--streams", default="1,2,4,8")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per stream")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="default: Hearth's plan")
    parser.add_argument("--sampling", choices=("default", "greedy"), default="default")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    from benchmarks.peer_server import peer_server

    peer = peer_server()
    if peer is None:
        print("llama-server is not built: python -m benchmarks.peer_server", file=sys.stderr)
        return 1
    paths = model_paths()
    result: dict[str, object] = {
        "what": "Hearth / llama-server tokens per second, bracketed, wall time with prefill",
        "tokens_per_stream": args.tokens,
        "slots": SLOTS,
        "context_per_slot": CONTEXT,
        "sampling": args.sampling,
        "llama_server": {"binary": str(peer), "version": _peer_version(peer)},
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "load_average_at_start": os.getloadavg()[0],
        },
        "models": {},
    }
    with tempfile.TemporaryDirectory(prefix="hearth-bench-peer-") as tmp:
        for name in args.models.split(","):
            result["models"][name] = run_model(name, paths[name], peer, args, Path(tmp))  # type: ignore[index]
    result["machine"]["load_average_at_end"] = os.getloadavg()[0]  # type: ignore[index]
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps({n: {s: v["median_ratio"] for s, v in m["streams"].items()}
                      for n, m in result["models"].items()}, indent=2))  # type: ignore[union-attr]  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
