"""Engine throughput and latency on Gemma 3 270M (issue 3's benchmarks).

Run: ``.venv/bin/python -m benchmarks.bench_engine [--tokens N] [--streams 1,2,4,8]``;
writes ``benchmarks/results/engine.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

from engine.devtools.benchmark import run_engine_benchmarks

RESULTS = Path(__file__).resolve().parent / "results" / "engine.json"


def gemma_path() -> Path:
    from app.platform.default_model import ensure_default_model

    return ensure_default_model(Path(__file__).resolve().parent.parent / ".test-cache")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--streams", default="1,2,4,8")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    streams = tuple(int(s) for s in args.streams.split(","))
    results = run_engine_benchmarks(gemma_path(), streams, args.tokens, repeats=args.repeats)
    results["machine"] = {
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
