"""The API against llama-server: aggregate tokens/s of 8 concurrent streaming clients, same
model (Gemma 3 270M), same machine, same settings, one run; and the prefix cache through
the API (turn 2 of a ~1,000-token conversation, cold vs cached time to first token).

Both servers run as their own processes (``hearth serve`` and the peer ``llama-server``
from ``benchmarks.peer_server``) with 8 parallel slots of 2,048 tokens, batch 512 and the
same threads; the clients are one asyncio process streaming ``/v1/completions`` with
``ignore_eos`` (llama-server's field, which Hearth reads too), so every stream decodes
exactly the same number of tokens. Rounds alternate between the servers; the median round
of each is reported.

Run: ``.venv/bin/python -m benchmarks.bench_api [--tokens 128] [--rounds 3]``; writes
``benchmarks/results/api.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results" / "api.json"
STREAMS = 8
CONTEXT = 2048  # per slot
PROMPT = (
    "The history of the lighthouse begins in the ancient world, where fires on hilltops "
    "guided sailors home. Over the centuries these beacons became towers of stone"
)
# The same sampler settings for both servers (llama.cpp's defaults, without the repeat
# penalty whose history window the two implement differently).
SAMPLING = {"temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "repeat_penalty": 1.0}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Server:
    name: str
    url: str  # base URL, without /v1
    proc: subprocess.Popen


def wait_healthy(url: str, proc: subprocess.Popen, log: Path, timeout: float = 300) -> None:
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{url} did not become healthy")


@contextmanager
def start(name: str, args: list[str], url: str, logs: Path):
    log = logs / f"{name}.log"
    with log.open("w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        wait_healthy(url, proc, log)
        yield Server(name, url, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def hearth_args(model: Path, port: int, streams: int = STREAMS, context: int = CONTEXT) -> list[str]:
    return [sys.executable, "-m", "app", "serve", str(model), "--port", str(port),
            "--parallel", str(streams), "--ctx", str(context)]  # fmt: skip


def peer_args(
    binary: Path, model: Path, port: int, threads: int, streams: int = STREAMS, context: int = CONTEXT
) -> list[str]:
    return [str(binary), "-m", str(model), "-c", str(context * streams), "-np", str(streams),
            "-b", "512", "-ub", "512", "-t", str(threads), "-tb", str(threads), "--swa-full",
            "--host", "127.0.0.1", "--port", str(port), "--no-webui"]  # fmt: skip


def hearth_threads(model: Path, streams: int = STREAMS, context: int = CONTEXT) -> int:
    from engine import LoadRequest, inspect_model, plan_load, take_snapshot

    request = LoadRequest(context_per_conversation=context, parallel=streams)
    return plan_load(inspect_model(model), take_snapshot(), request).params.n_threads


# -- clients ---------------------------------------------------------------------------------


async def sse_events(response) -> AsyncIterator[dict]:
    """The JSON payloads of a server-sent event stream, as they arrive (not [DONE])."""
    response.raise_for_status()
    buffer = b""
    async for data in response.content.iter_any():
        buffer += data
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            if block.startswith(b"data: ") and block != b"data: [DONE]":
                yield json.loads(block[6:])


async def stream_completion(session, url: str, body: dict) -> dict:
    """One streamed request: tokens (chunks with text), time to first text, seconds."""
    started = time.perf_counter()
    first = 0.0
    chunks = 0
    usage = None
    async with session.post(f"{url}/v1/completions", json={**body, "stream": True}) as response:
        async for event in sse_events(response):
            if event.get("choices") and event["choices"][0].get("text"):
                first = first or time.perf_counter() - started
                chunks += 1
            usage = event.get("usage") or usage
    return {"seconds": time.perf_counter() - started, "ttft": first, "usage": usage}


async def concurrent_round(url: str, tokens: int, round_no: int) -> dict:
    import aiohttp

    bodies = [
        {"prompt": f"{PROMPT} (client {i}, round {round_no})", "max_tokens": tokens, "ignore_eos": True,
         "seed": 1000 + i, "stream_options": {"include_usage": True}, **SAMPLING}
        for i in range(STREAMS)
    ]  # fmt: skip
    timeout = aiohttp.ClientTimeout(total=900)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        started = time.perf_counter()
        results = await asyncio.gather(*(stream_completion(session, url, b) for b in bodies))
        wall = time.perf_counter() - started
    generated = sum(r["usage"]["completion_tokens"] for r in results)
    return {
        "wall_s": round(wall, 3),
        "completion_tokens": generated,
        "aggregate_tps": generated / wall,
        "mean_ttft_s": statistics.mean(r["ttft"] for r in results),
    }


async def chat(session, url: str, messages: list[dict], max_tokens: int, **extra: object) -> dict:
    """A streamed chat turn: its text, and time to its first text (client-side)."""
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}, **extra}  # fmt: skip
    started = time.perf_counter()
    first, text, usage = 0.0, [], None
    async with session.post(f"{url}/v1/chat/completions", json=body) as response:
        async for event in sse_events(response):
            usage = event.get("usage") or usage
            if event.get("choices"):
                piece = event["choices"][0]["delta"].get("content")
                if piece:
                    first = first or time.perf_counter() - started
                    text.append(piece)
    return {"text": "".join(text), "ttft": first, "usage": usage}


async def second_turn(url: str, history_tokens: int = 1000) -> dict:
    """Turn 2 of a ~``history_tokens`` conversation: cold (cache_prompt false) and cached."""
    import aiohttp

    paragraph = PROMPT + ". "
    # A new connection per request: llama-server closes some kept-alive ones after a stream.
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=900), connector=connector
    ) as session:
        one = await chat(session, url, [{"role": "user", "content": paragraph}], 1, cache_prompt=False)
        two = await chat(session, url, [{"role": "user", "content": paragraph * 2}], 1, cache_prompt=False)
        per_paragraph = max(1, two["usage"]["prompt_tokens"] - one["usage"]["prompt_tokens"])
        history = paragraph * max(1, history_tokens // per_paragraph)
        turn1 = [{"role": "user", "content": history + "\nSummarise this."}]
        reply = await chat(session, url, turn1, 32)
        turn2 = [*turn1, {"role": "assistant", "content": reply["text"]},
                 {"role": "user", "content": "Now in one word?"}]  # fmt: skip
        colds, cacheds, cached_tokens = [], [], 0
        for _ in range(3):
            colds.append((await chat(session, url, turn2, 1, cache_prompt=False))["ttft"])
            await chat(session, url, turn1, 32)  # turn 1 is the freshest prefix again, as in a chat
            cached = await chat(session, url, turn2, 1)
            cacheds.append(cached["ttft"])
            cached_tokens = cached["usage"]["prompt_tokens_details"]["cached_tokens"]
            prompt_tokens = cached["usage"]["prompt_tokens"]
    cold, warm = statistics.median(colds), statistics.median(cacheds)
    return {
        "history_tokens": prompt_tokens,
        "cached_tokens": cached_tokens,
        "cold_ttft_s": round(cold, 4),
        "cached_ttft_s": round(warm, 4),
        "ratio": round(warm / cold, 4) if cold else 0.0,
        "target_ratio": 0.05,
    }


# -- the run ---------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=128, help="tokens per stream")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from benchmarks.bench_engine import gemma_path
    from benchmarks.peer_server import peer_server

    model = gemma_path()
    threads = hearth_threads(model)
    peer = peer_server()
    result: dict[str, object] = {
        "model": model.name,
        "streams": STREAMS,
        "tokens_per_stream": args.tokens,
        "context_per_slot": CONTEXT,
        "threads": threads,
        "sampling": SAMPLING,
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "load_average_at_start": os.getloadavg()[0],
        },
    }
    with tempfile.TemporaryDirectory(prefix="hearth-bench-api-") as tmp:
        logs = Path(tmp)
        hearth_port = free_port()
        hearth_url = f"http://127.0.0.1:{hearth_port}"
        with ExitStack() as stack:
            servers = [
                stack.enter_context(start("hearth", hearth_args(model, hearth_port), hearth_url, logs))
            ]
            if peer is None:
                print("llama-server is not built: python -m benchmarks.peer_server (Hearth alone)")
            else:
                result["llama_server"] = {"binary": str(peer), "version": _peer_version(peer)}
                peer_port = free_port()
                peer_url = f"http://127.0.0.1:{peer_port}"
                args_peer = peer_args(peer, model, peer_port, threads)
                servers.append(stack.enter_context(start("llama-server", args_peer, peer_url, logs)))
            rounds: dict[str, list[dict]] = {s.name: [] for s in servers}
            for server in servers:  # warm-up: first decodes, page cache, allocator
                asyncio.run(concurrent_round(server.url, 16, -1))
            for r in range(args.rounds):
                for server in servers if r % 2 == 0 else reversed(servers):
                    row = asyncio.run(concurrent_round(server.url, args.tokens, r))
                    rounds[server.name].append(row)
                    print(f"round {r} {server.name}: {row['aggregate_tps']:.1f} tok/s", flush=True)
            turn_two = {server.name: asyncio.run(second_turn(server.url)) for server in servers}
    summary = {
        name: {
            "median_aggregate_tps": round(statistics.median(r["aggregate_tps"] for r in rows), 2),
            "rounds": [{**r, "aggregate_tps": round(r["aggregate_tps"], 2)} for r in rows],
        }
        for name, rows in rounds.items()
    }
    result["concurrent_streams"] = summary
    if "llama-server" in summary:
        ratio = summary["hearth"]["median_aggregate_tps"] / summary["llama-server"]["median_aggregate_tps"]
        result["hearth_vs_llama_server"] = round(ratio, 3)
        result["target_ratio"] = 0.95
    result["ttft_turn_two"] = turn_two
    result["machine"]["load_average_at_end"] = os.getloadavg()[0]  # type: ignore[index]
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


def _peer_version(binary: Path) -> str:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    match = re.search(r"version: (\S+)", out.stdout + out.stderr)
    return match.group(1) if match else "unknown"


if __name__ == "__main__":
    sys.exit(main())
