"""`make bench`: every benchmark, one after the other, each writing benchmarks/results/*.json.

Run them on a quiet machine: two cores shared with anything else make throughput
numbers meaningless.
"""

from __future__ import annotations

import subprocess
import sys

BENCHMARKS = (
    "benchmarks.bench_catalog",
    "benchmarks.bench_planner_accuracy",
    "benchmarks.bench_memory",  # the plan against the process, and llama-server's compute buffer
    "benchmarks.bench_scheduler",
    "benchmarks.bench_engine",
    "benchmarks.bench_multimodal",
    "benchmarks.bench_speculation",
    "benchmarks.bench_gui_stall",
    "benchmarks.bench_gui_decode",  # the window against `hearth chat`: Qwen, ~15 min
    "benchmarks.bench_dashboard",
    "benchmarks.bench_image_memory",
    "benchmarks.bench_hub",  # the Hub against its local fake: remote plans, downloads vs curl, 50k results
    "benchmarks.bench_bundle",  # skipped (a line says so) until `make package` has built dist/hearth
)


def main() -> int:
    failed = []
    for module in BENCHMARKS:
        print(f"== {module}", flush=True)
        if subprocess.call([sys.executable, "-m", module]) != 0:
            failed.append(module)
    if failed:
        print("failed:", ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
