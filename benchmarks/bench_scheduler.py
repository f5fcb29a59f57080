"""The scheduler's own cost per tick, in microseconds, for 8 sequences.

A tick here is what the executor does around one ``llama_decode``: collect candidates,
plan, stage the commit (rows), apply it, and queue the next sampled token. Admission
(``acquire_matching`` + ``release`` over 8 cached ~1000-token prefixes) is measured
separately because it happens once per request, not per tick.

Run: ``.venv/bin/python -m benchmarks.bench_scheduler`` (writes
``benchmarks/results/scheduler.json``).
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from engine.scheduler import (
    DEFAULT_N_BATCH,
    DEFAULT_PREFILL_QUANTUM,
    ZERO_BOUNDARY,
    BatchCommit,
    BatchPlanner,
    PromptLayout,
    SequencePool,
    SequenceProgress,
)

N_SEQUENCES = 8
RESULTS = Path(__file__).resolve().parent / "results" / "scheduler.json"


def _decoding(sequence_id: int, prompt_tokens: int = 64, drafts: int = 0) -> SequenceProgress:
    prompt = PromptLayout.from_tokens(range(sequence_id * 10_000, sequence_id * 10_000 + prompt_tokens))
    state = SequenceProgress.admit(sequence_id, prompt, ZERO_BOUNDARY)
    state.cursor = prompt.end  # the prompt is already in KV
    state.push(1, range(2, 2 + drafts))
    return state


def _tick(planner: BatchPlanner, progress: dict[int, SequenceProgress], plan_only: list[float]) -> None:
    candidates = [c for p in progress.values() if (c := p.candidate()) is not None]
    start = time.perf_counter_ns()
    plan = planner.plan(candidates, DEFAULT_N_BATCH)
    plan_only.append(time.perf_counter_ns() - start)
    commit = BatchCommit.stage(plan.work, progress)
    logits = commit.apply(progress)
    for sequence_id in logits:
        state = progress[sequence_id]
        state.push(7, state.drafts)  # the sampler's work is the executor's, not timed here


def _measure_ticks(
    make: Callable[[], dict[int, SequenceProgress]], ticks: int, repeats: int
) -> dict[str, float]:
    per_tick: list[float] = []
    plan_only: list[float] = []
    for _ in range(repeats):
        progress = make()
        planner = BatchPlanner(DEFAULT_PREFILL_QUANTUM)
        start = time.perf_counter_ns()
        for _ in range(ticks):
            _tick(planner, progress, plan_only)
        per_tick.append((time.perf_counter_ns() - start) / ticks)
    return {
        "tick_us_median": round(statistics.median(per_tick) / 1000, 2),
        "tick_us_min": round(min(per_tick) / 1000, 2),
        "plan_us_median": round(statistics.median(plan_only) / 1000, 2),
    }


def _steady_decode() -> dict[int, SequenceProgress]:
    return {i: _decoding(i) for i in range(N_SEQUENCES)}


def _drafting_decode() -> dict[int, SequenceProgress]:
    return {i: _decoding(i, drafts=4) for i in range(N_SEQUENCES)}


def _mixed() -> dict[int, SequenceProgress]:
    # 6 generating, 2 prefilling 8000-token prompts in 512-row batches (never finish in 10 ticks).
    progress = {i: _decoding(i) for i in range(6)}
    for i in (6, 7):
        progress[i] = SequenceProgress.admit(i, PromptLayout.from_tokens(range(8000)), ZERO_BOUNDARY)
    return progress


def _measure_admission(repeats: int) -> dict[str, float]:
    history = list(range(1000))
    # Eight conversations sharing a 900-token system prompt/history, each with its own tail.
    prefixes = [
        PromptLayout.from_tokens([*history[:900], *range(900 + 100 * i, 1000 + 100 * i)])
        for i in range(N_SEQUENCES)
    ]
    prompt = PromptLayout.from_tokens([*history, 5, 6, 7])
    pool = SequencePool(N_SEQUENCES)
    for _ in range(N_SEQUENCES):
        pool.acquire_lru()
    for sequence_id in range(N_SEQUENCES):
        pool.release(sequence_id, prefixes[sequence_id])
    samples: list[float] = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        acquisition = pool.acquire_matching(prompt)
        assert acquisition is not None and acquisition.matched
        pool.release(acquisition.sequence_id, prefixes[acquisition.sequence_id])
        samples.append(time.perf_counter_ns() - start)
    return {"admission_us_median": round(statistics.median(samples) / 1000, 2)}


def run(ticks: int = 200, repeats: int = 30) -> dict[str, object]:
    return {
        "benchmark": "scheduler",
        "sequences": N_SEQUENCES,
        "n_batch": DEFAULT_N_BATCH,
        "prefill_quantum": DEFAULT_PREFILL_QUANTUM,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "decode_8": _measure_ticks(_steady_decode, ticks, repeats),
        "decode_8_with_4_drafts": _measure_ticks(_drafting_decode, ticks, repeats),
        "mixed_6_decode_2_prefill": _measure_ticks(_mixed, 10, repeats * 20),
        "admission_8_prefixes_1000_tokens": _measure_admission(repeats * 20),
    }


def main() -> None:
    results = run()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
