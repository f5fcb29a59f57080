"""The packaged app's llama.cpp against the one `make` compiled for this machine, in one run.

The bundle carries every CPU variant ggml offers and picks one at start; the development
build is compiled for exactly this CPU. Both decode Gemma 3 270M through the same
``hearth bench`` (one stream, greedy), in alternating rounds so that a busy moment hurts
both alike; the medians and their ratio go to benchmarks/results/bundle.json.

    make package && python -m benchmarks.bench_bundle [--bundle dist/hearth/hearth]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "bundle.json"


def decode_tps(command: list[str], model: Path, tokens: int) -> float:
    done = subprocess.run(
        [
            *command,
            "bench",
            str(model),
            "--streams",
            "1",
            "--tokens",
            str(tokens),
            "--repeats",
            "3",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    results = json.loads(done.stdout)
    return float(results["streams"][0]["hearth_tps"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, default=REPO / "dist" / "hearth" / "hearth")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args(argv)
    if not args.bundle.exists():
        print(f"no bundle at {args.bundle}: run `make package` first (skipped)")
        return 0
    from app.platform.default_model import ensure_default_model
    from engine.native.backend import system_info

    model = ensure_default_model(REPO / ".test-cache")
    contenders = {"bundle": [str(args.bundle)], "native": [sys.executable, "-m", "app"]}
    runs: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(args.rounds):
        for name, command in contenders.items():
            runs[name].append(decode_tps(command, model, args.tokens))
    bundle, native = statistics.median(runs["bundle"]), statistics.median(runs["native"])
    variant = subprocess.run(
        [str(args.bundle), "hardware"], capture_output=True, text=True, timeout=120
    ).stdout.splitlines()
    result = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "model": model.name,
        "tokens": args.tokens,
        "rounds": args.rounds,
        "bundle_tps": runs["bundle"],
        "native_tps": runs["native"],
        "bundle_median_tps": bundle,
        "native_median_tps": native,
        "bundle_vs_native": bundle / native,
        "native_build": system_info().strip(),
        "bundle_build": [line.strip() for line in variant if "compiled for" in line],
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"decode, 1 stream: bundle {bundle:.1f} tok/s, native {native:.1f} tok/s ({bundle / native:.3f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
