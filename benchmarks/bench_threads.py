"""Decode speed with and without another program keeping a core busy, at 1 and 2 threads.

Each model (Qwen2.5-Coder 1.5B, Gemma 3 270M; both from ``.test-cache``) is loaded twice,
with ``threads`` 1 and 2 (``LoadRequest.threads``: the user's setting, so the planner's
own choice does not enter), and asked for the same greedy reply in four cases: each
thread count, with and without a *hog* (another process, ``python -c "while True: pass"``,
not pinned: the OS places it as it would a user's compile). The cases alternate within
each round and each round starts one case later, so drifting load hits them alike.
Decode tok/s and the time to first token come from the Completion's timings; the CPU
figures from ``Completion.cpu`` (other programs' load while the reply was computed, and
whether Hearth reported it slowed); the 1-minute load average before each case is kept.

Also measured, with the hog running: how long Stop takes (``cancel()`` to ``Completed``)
half-way into a decoded token, and half-way into a batch of a long prompt's prefill, with
the running decode aborted (``engine.native.abort``) and without (waiting for the batch).

Run: ``.venv/bin/python -m benchmarks.bench_threads [--rounds 3] [--models qwen,gemma]``;
writes ``benchmarks/results/threads.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "threads.json"
PROMPT = "Explain in a few paragraphs how a bicycle stays upright while moving."
TOKENS = {"qwen": 64, "gemma": 128}
THREADS = (1, 2)
CONTEXT = 4096
HOG = [sys.executable, "-c", "while True: pass"]


def model_path(name: str) -> Path:
    if name == "gemma":
        from app.platform.default_model import ensure_default_model

        return ensure_default_model(REPO / ".test-cache")
    from app.platform.qwen_model import ensure_chat_model

    return ensure_chat_model(REPO / ".test-cache")


@contextmanager
def hog(on: bool):
    if not on:
        yield None
        return
    proc = subprocess.Popen(HOG)
    time.sleep(1.0)  # running flat out, not starting
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def load(path: Path, threads: int) -> Any:
    from engine import Engine, LoadRequest, inspect_model, plan_load, take_snapshot

    request = LoadRequest(context_per_conversation=CONTEXT, parallel=1, threads=threads)
    plan = plan_load(inspect_model(path), take_snapshot(), request)
    assert plan.params.n_threads == threads
    return Engine.load(plan).wait_ready(300)


def request(text: str, tokens: int, cache: bool = False) -> Any:
    from engine import GREEDY, ChatMessage, ChatRequest

    return ChatRequest(messages=(ChatMessage("user", text),), sampling=GREEDY, max_tokens=tokens, cache=cache)


def one_reply(model: Any, tokens: int) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    completion = model.submit(request(PROMPT, tokens)).wait(600)
    t, cpu = completion.timings, completion.cpu
    return {
        "decode_tps": round(t.decode_tokens_per_second, 2),
        "ttft_s": round(t.ttft, 3),
        "tokens": completion.usage.completion_tokens,
        "others_cpus": round(cpu.others, 2) if cpu else None,
        "hearth_cpus": round(cpu.ours, 2) if cpu else None,
        "reported_slowed": bool(cpu and cpu.slowed),
        "loadavg_1m_before": round(load_before, 2),
    }


def stop_latency(model: Any, during: str) -> dict[str, float]:
    """Seconds from ``cancel()`` to ``Completed``, the cancel made half-way into a step (a
    decoded token, or a prompt batch: as long as the one before it), as a user's Stop
    lands at no particular moment; and how long that step took."""
    from engine import Completed, Prefill, TextDelta

    text = PROMPT if during == "decode" else "The quick brown fox jumps over the lazy dog. " * 130
    handle = model.submit(request(text, 400))
    cancelled_at = step = last = None
    chars = 0
    for event in handle.events(timeout=600):
        now = time.perf_counter()
        if cancelled_at is None:
            if during == "decode" and isinstance(event, TextDelta):
                chars += len(event.text)
                if chars > 40 and last is not None:
                    step = (now - last) / max(1, len(event.pieces))
                    time.sleep(step / 2)
                    cancelled_at = time.perf_counter()
                    handle.cancel()
                last = now
            elif during == "prefill" and isinstance(event, Prefill):
                if 0 < event.completed < event.total and last is not None:
                    step = now - last
                    time.sleep(step / 2)
                    cancelled_at = time.perf_counter()
                    handle.cancel()
                last = now
        if isinstance(event, Completed):
            break
    if cancelled_at is None or step is None:
        return {"stop_s": float("nan"), "step_s": float("nan")}
    return {"stop_s": round(time.perf_counter() - cancelled_at, 3), "step_s": round(step, 3)}


@contextmanager
def abort_on_stop(on: bool):
    """Off: Stop waits for the running batch, as before ``engine.native.abort``."""
    from engine.native.abort import DecodeAbort

    original = DecodeAbort.request
    if not on:
        DecodeAbort.request = lambda self: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        DecodeAbort.request = original  # type: ignore[method-assign]


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per case, with each run's figures: "idle" means no hog, not an idle machine
    (``others_cpus`` says what else ran: other work on this machine shows there)."""
    summary = {}
    for threads, on in cases():
        rows = [r for r in runs if r["threads"] == threads and r["hog"] == on]
        summary[f"threads{threads}_{'hog' if on else 'idle'}"] = {
            "decode_tps_median": round(statistics.median(r["decode_tps"] for r in rows), 2),
            "decode_tps_runs": [r["decode_tps"] for r in rows],
            "others_cpus_runs": [r["others_cpus"] for r in rows],
            "ttft_s_median": round(statistics.median(r["ttft_s"] for r in rows), 3),
            "reported_slowed": [r["reported_slowed"] for r in rows],
        }
    return summary


def cases() -> list[tuple[int, bool]]:
    return [(threads, on) for on in (False, True) for threads in THREADS]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", default="qwen,gemma")
    args = parser.parse_args()
    from engine.machine.cpu_load import logical_cpus, physical_cores

    result: dict[str, Any] = {
        "machine": {"physical_cores": physical_cores(), "logical_cpus": logical_cpus()},
        "command": "python -m benchmarks.bench_threads " + " ".join(sys.argv[1:]),
        "hog": " ".join(HOG[1:]),
        "models": {},
    }
    for name in [n.strip() for n in args.models.split(",") if n.strip()]:
        path = model_path(name)
        models = {threads: load(path, threads) for threads in THREADS}
        runs: list[dict[str, Any]] = []
        stops: list[dict[str, Any]] = []
        try:
            for model in models.values():  # warm: the first reply pays for page faults
                model.submit(request(PROMPT, 8)).wait(600)
            order = cases()
            for round_no in range(args.rounds):
                shift = round_no % len(order)
                for threads, on in order[shift:] + order[:shift]:
                    with hog(on):
                        run = {"round": round_no, "threads": threads, "hog": on}
                        run.update(one_reply(models[threads], TOKENS[name]))
                    runs.append(run)
                    print(json.dumps({"model": name, **run}), flush=True)
            with hog(True):
                for threads in THREADS:
                    for during in ("decode", "prefill"):
                        for abort in (True, False):
                            stop: dict[str, Any] = {"threads": threads, "during": during, "hog": True}
                            stop["abort"] = abort
                            with abort_on_stop(abort):
                                stop.update(stop_latency(models[threads], during))
                            stops.append(stop)
                            print(json.dumps({"model": name, **stop}), flush=True)
        finally:
            for model in models.values():
                model.unload()
        summary = summarize(runs)
        result["models"][name] = {
            "path": path.name,
            "tokens": TOKENS[name],
            "summary": summary,
            "runs": runs,
            "stop": stops,
        }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({n: r["summary"] for n, r in result["models"].items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
