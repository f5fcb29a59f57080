"""Speculative decoding on Gemma 3 270M (greedy): prompt lookup and Gemma as its own draft.

Tokens/s with and without speculation on a task that repeats its input and on one that
does not (the overhead when little is accepted), with acceptance rates.

Run: ``.venv/bin/python -m benchmarks.bench_speculation``; writes
``benchmarks/results/speculation.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.bench_engine import gemma_path
from engine.devtools.benchmark import speculation_benchmark
from engine.speculation.policy import SpeculationConfig, SpeculationMode

RESULTS = Path(__file__).resolve().parent / "results" / "speculation.json"


def main() -> None:
    model = gemma_path()
    results = {
        "prompt_lookup": speculation_benchmark(
            model, SpeculationConfig(SpeculationMode.PROMPT_LOOKUP), n_tokens=96
        ),
        "draft_model_self": speculation_benchmark(
            model,
            SpeculationConfig(
                SpeculationMode.DRAFT_MODEL, draft_path=model, max_draft=4, min_draft=1, adaptive=False
            ),
            n_tokens=64,
            draft=model,
        ),
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
