"""Speculation with a real draft model against llama-server's (issue 30, part 1): Qwen2.5-Coder
1.5B Instruct with Qwen2.5-Coder 0.5B Instruct as its draft, greedy code replies of up to 256
tokens, one conversation, wall time with prefill.

Servers, each its own process with the same threads: ``hearth serve`` as a user starts it with
the draft (``--speculate draft:…``: Hearth measures at warm-up whether drafting can pay on
this machine and lets the draft go where it cannot) and without it; ``llama-server`` with
``-md`` and each ``--spec-draft-n-max`` in ``--draft-max`` (its default is 3). Hearth with
its draft is bracketed by each llama-server configuration (peer, Hearth, peer), and by
Hearth without it (without, with, without).
Rounds alternate the questions; the median ratio of the rounds is reported, with the
servers' token counts (greedy: the same text on every side).

Run: ``.venv/bin/python -m benchmarks.bench_draft_peer [--rounds 3] [--draft-max 3,8]``; writes
``benchmarks/results/draft_peer.json``.
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

from benchmarks.bench_api import _peer_version, chat, free_port, hearth_args, peer_args, start

RESULTS = Path(__file__).resolve().parent / "results" / "draft_peer.json"
QUESTIONS = (
    "Write a Python class for a bank account with deposit, withdraw and a history of transactions.",
    "Write a Python function that parses a CSV file of orders and returns the total per customer.",
    "Write a Python script that walks a folder and prints the ten largest files with their sizes.",
)


def ask(url: str, question: str) -> dict:
    """One greedy streamed reply: tokens per second over the whole request."""
    import aiohttp

    async def run() -> dict:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=900)) as session:
            started = time.perf_counter()
            reply = await chat(session, url, [{"role": "user", "content": question}], 256, seed=1)
            wall = time.perf_counter() - started
        tokens = reply["usage"]["completion_tokens"]
        return {"tokens": tokens, "wall_s": round(wall, 3), "tps": round(tokens / wall, 3)}

    return asyncio.run(run())


def wake(url: str) -> None:
    """A 1-token request: the server about to be measured sat idle while another one ran."""
    import aiohttp

    async def run() -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:
            await chat(session, url, [{"role": "user", "content": "Hi"}], 1)

    asyncio.run(run())


def measured(url: str, question: str) -> dict:
    wake(url)
    return ask(url, question)


def bracket(ours: str, theirs: str, question: str) -> dict:
    before, mine, after = measured(theirs, question), measured(ours, question), measured(theirs, question)
    ratio = mine["tps"] / ((before["tps"] + after["tps"]) / 2)
    return {"ours": mine, "theirs": [before, after], "ratio": round(ratio, 4)}


def summary(rows: list[dict]) -> dict:
    return {"median_ratio": statistics.median(r["ratio"] for r in rows), "rounds": rows}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--draft-max", default="3,8", help="llama-server's --spec-draft-n-max values")
    parser.add_argument("--threads", type=int, default=None, help="default: Hearth's plan")
    args = parser.parse_args()

    from app.platform.qwen_model import ensure_chat_model, ensure_draft_model
    from benchmarks.bench_api import hearth_threads
    from benchmarks.peer_server import peer_server

    cache = Path(__file__).resolve().parent.parent / ".test-cache"
    target, draft = ensure_chat_model(cache), ensure_draft_model(cache)
    peer = peer_server()
    if peer is None:
        print("llama-server is not built: python -m benchmarks.peer_server", file=sys.stderr)
        return 1
    threads = args.threads or hearth_threads(target, 1, 4096)
    result: dict = {
        "target": target.name,
        "draft": draft.name,
        "threads": threads,
        "llama_server": {"binary": str(peer), "version": _peer_version(peer)},
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "load_average_at_start": os.getloadavg()[0],
        },
    }
    with tempfile.TemporaryDirectory(prefix="hearth-bench-draft-") as tmp, ExitStack() as stack:
        logs = Path(tmp)

        def serve(name: str, argv: list[str], port: int) -> str:
            url = f"http://127.0.0.1:{port}"
            stack.enter_context(start(name, argv, url, logs))
            return url

        def hearth(name: str, *extra: str) -> str:
            port = free_port()
            return serve(name, [*hearth_args(target, port, 1, 4096), "--threads", str(threads), *extra], port)

        def llama(name: str, *extra: str) -> str:
            port = free_port()
            return serve(name, [*peer_args(peer, target, port, threads, 1, 4096), *extra], port)

        with_draft = hearth("hearth-draft", "--speculate", f"draft:{draft}")
        plain = hearth("hearth-plain")
        peers = {}
        for n in args.draft_max.split(","):
            peers[f"llama-server -md --spec-draft-n-max {n}"] = llama(
                f"peer-md-{n}", "-md", str(draft), "--spec-draft-n-max", n, "-ngld", "0"
            )
        comparisons: dict[str, list[dict]] = {name: [] for name in (*peers, "hearth without a draft")}
        for r in range(args.rounds):
            question = QUESTIONS[r % len(QUESTIONS)]
            for name, url in peers.items():
                comparisons[name].append(bracket(with_draft, url, question))
                print(f"round {r} vs {name}: {comparisons[name][-1]['ratio']}", flush=True)
            row = bracket(with_draft, plain, question)
            comparisons["hearth without a draft"].append(row)
            print(f"round {r} vs hearth without: {row['ratio']}", flush=True)
        log = (logs / "hearth-draft.log").read_text()
        result["hearth_draft_log"] = [line for line in log.splitlines() if "draft" in line.lower()][-8:]
    result["hearth_with_draft_vs"] = {name: summary(rows) for name, rows in comparisons.items()}
    result["machine"]["load_average_at_end"] = os.getloadavg()[0]
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v["median_ratio"] for k, v in result["hearth_with_draft_vs"].items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
