"""A KV pool the conversations share (issue 30, part 2), on Gemma 3 270M.

Memory, from the process (psutil RSS and USS, not llama.cpp's log lines), each layout loaded
alone, measured before loading, after loading and after filling it with 8 conversations at
once (7 of ~500 tokens and one of ~28,000, 31.5k cells in all; each may grow to 32k), or
with one conversation of ~31,500 tokens where the layout holds one:

- ``shared``: 8 conversations sharing one pool of 32,768 cells, each up to 32,768;
- ``one_32k``: today's layout for one conversation of 32,768 (the memory of 32k cells);
- ``own_8x32k``: today's layout for 8 conversations of 32,768 each.

Speed, both layouts loaded side by side and bracketed (own, shared, own per round): 8 streams
of 64 tokens after ~1,000-token prompts (``hearth_streams``); one stream alone beside the
other conversations' cached turns; and turn two of a conversation cold vs from its cached
prefix (``ttft_turn_two``, medians of the rounds); against 8 x 4,096 of their own (the same
32k cells).

Run: ``.venv/bin/python -m benchmarks.bench_kv_pool [--rounds 3] [--parts memory,speed]``;
writes ``benchmarks/results/kv_pool.json`` (each part merged into it as it ends).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import time
from pathlib import Path

import psutil

from benchmarks.bench_engine import gemma_path
from engine import ChatRequest, Engine
from engine.devtools.benchmark import hearth_streams, make_plan, ttft_turn_two
from engine.machine.cpu_load import physical_cores
from engine.sampling.params import GREEDY

RESULTS = Path(__file__).resolve().parent / "results" / "kv_pool.json"
LONGEST = 32768
PARALLEL = 8
SENTENCE = "The keeper of the lighthouse wrote the weather in his log every morning. "


def memory() -> dict[str, float]:
    info = psutil.Process().memory_full_info()
    return {"rss_mib": round(info.rss / 2**20, 1), "uss_mib": round(info.uss / 2**20, 1)}


def filled(model, words_per_token: float, parallel: int) -> dict:
    """Seven ~500-token conversations and one ~28,000-token one, at once (one conversation
    of as many tokens where the layout holds one)."""
    sizes = [500] * (PARALLEL - 1) + [28000] if parallel > 1 else [31500]
    requests = [
        ChatRequest(prompt=f"{i}: " + SENTENCE * max(1, int(n / words_per_token)), sampling=GREEDY,
                    max_tokens=16, ignore_eos=True)
        for i, n in enumerate(sizes)
    ]  # fmt: skip
    started = time.perf_counter()
    completions = [h.wait(1800) for h in [model.submit(r) for r in requests]]
    stats = model.stats()
    return {
        "prompt_tokens": [c.usage.prompt_tokens for c in completions],
        "seconds": round(time.perf_counter() - started, 1),
        "cells_held": stats.cells_used,
        "n_ctx": stats.n_ctx,
        "cells_per_conversation": stats.n_ctx_per_sequence,
    }


def tokens_per_sentence(path: Path) -> float:
    plan = make_plan(path, ctx=1024, parallel=1)
    model = Engine.load(plan).wait_ready(600)
    try:
        one = model.submit(ChatRequest(prompt=SENTENCE, sampling=GREEDY, max_tokens=1)).wait(60)
        two = model.submit(ChatRequest(prompt=SENTENCE * 2, sampling=GREEDY, max_tokens=1)).wait(60)
        return float(two.usage.prompt_tokens - one.usage.prompt_tokens)
    finally:
        model.unload()


def memory_of(path: Path, ctx: int, parallel: int, pool: int | None, per_sentence: float) -> dict:
    gc.collect()
    before = memory()
    plan = make_plan(path, ctx=ctx, parallel=parallel, kv_pool=pool)
    model = Engine.load(plan).wait_ready(600)
    try:
        loaded = memory()
        fill = filled(model, per_sentence, parallel)
        after = memory()
    finally:
        model.unload()
    kv = sum(m.kv_cache for m in plan.memory)
    return {
        "plan_kv_mib": round(kv / 2**20, 1),
        "before": before,
        "loaded": loaded,
        "after_fill": after,
        "fill": fill,
        "rss_growth_mib": round(after["rss_mib"] - before["rss_mib"], 1),
        "uss_growth_mib": round(after["uss_mib"] - before["uss_mib"], 1),
    }


def speed(path: Path, rounds: int, threads: int) -> dict:
    own = Engine.load(make_plan(path, ctx=4096, parallel=PARALLEL, threads=threads)).wait_ready(600)
    shared_plan = make_plan(path, ctx=LONGEST, parallel=PARALLEL, threads=threads, kv_pool=LONGEST)
    shared = Engine.load(shared_plan).wait_ready(600)
    prompts = [f"{i}: " + SENTENCE * 60 for i in range(PARALLEL)]  # ~1,000 tokens each
    rows = []
    try:
        for model in (own, shared):
            hearth_streams(model, prompts[:2], 8)  # warm-up
        for r in range(rounds):
            tagged = [f"round {r} " + p for p in prompts]
            before = hearth_streams(own, tagged, 64)
            ours = hearth_streams(shared, tagged, 64)
            after = hearth_streams(own, tagged, 64)
            rows.append({"own_tps": [round(before, 2), round(after, 2)], "shared_tps": round(ours, 2),
                         "ratio": round(ours / ((before + after) / 2), 4)})  # fmt: skip
            print(f"round {r}: shared {ours:.1f} tok/s, own {before:.1f}/{after:.1f}", flush=True)
        # A desktop's usual case: one reply at a time, the other conversations' turns cached
        # in the pool (the attention of a unified cache spans their cells too).
        for model in (own, shared):
            for i in range(PARALLEL - 1):
                turn = ChatRequest(prompt=f"cached {i}: " + SENTENCE * 60, sampling=GREEDY, max_tokens=8)
                model.submit(turn).wait(600)
        cells = {"own": own.stats().cells_used, "shared": shared.stats().cells_used}
        alone = []
        for r in range(rounds):
            ask = [f"alone {r}: " + SENTENCE * 60]
            before, ours, after = (hearth_streams(m, ask, 64) for m in (own, shared, own))
            alone.append({"own_tps": [round(before, 2), round(after, 2)], "shared_tps": round(ours, 2),
                          "ratio": round(ours / ((before + after) / 2), 4)})  # fmt: skip
            print(f"alone {r}: shared {ours:.1f} tok/s, own {before:.1f}/{after:.1f}", flush=True)
        turns: dict[str, list[dict]] = {"own": [], "shared": []}
        for _ in range(rounds):
            for name, model in (("own", own), ("shared", shared)):
                turns[name].append(ttft_turn_two(model))
        turn_two = {
            name: {key: statistics.median(t[key] for t in runs) for key in runs[0]}
            for name, runs in turns.items()
        }
    finally:
        own.unload()
        shared.unload()
    return {
        "threads": threads,
        "streams": PARALLEL,
        "decode_rounds": rows,
        "median_decode_ratio": statistics.median(r["ratio"] for r in rows),
        "one_stream_beside_cached_turns": alone,
        "median_one_stream_ratio": statistics.median(r["ratio"] for r in alone),
        "cells_cached_beside_the_one_stream": cells,
        "ttft_turn_two": turn_two,
        "cached_ttft_ratio": round(
            turn_two["shared"]["cached_ttft_s"] / turn_two["own"]["cached_ttft_s"], 4
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parts", default="memory,speed", help="memory, speed or both")
    parser.add_argument("--threads", type=int, default=None, help="default: one per physical core")
    args = parser.parse_args()
    path = gemma_path()
    # Results are merged into the file part by part: one part can be run again alone.
    result: dict = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    result["model"] = path.name
    result["machine"] = {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "load_average_at_start": os.getloadavg()[0],
    }
    parts = args.parts.split(",")
    if "memory" in parts:
        per_sentence = tokens_per_sentence(path)
        result["memory"] = {
            "shared": memory_of(path, LONGEST, PARALLEL, LONGEST, per_sentence),
            "one_32k": memory_of(path, LONGEST, 1, None, per_sentence),
            "own_8x32k": memory_of(path, LONGEST, PARALLEL, None, per_sentence),
        }
        print(json.dumps(result["memory"], indent=1), flush=True)
        write(result)
    if "speed" in parts:
        # Fixed threads: the planner's choice follows what else runs at the moment.
        result["speed"] = speed(path, args.rounds, args.threads or physical_cores())
        print(json.dumps(result["speed"], indent=2))
    result["machine"]["load_average_at_end"] = os.getloadavg()[0]
    write(result)


def write(result: dict) -> None:
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
