"""Decode and prefill speed before and after logits were sized to what is sampled (issue 14).

Until e5e4b04 Hearth left ``n_outputs_max`` at 0 (llama.cpp then reserves logit rows for the
whole batch); since, plans reserve conversations x (1 + draft rows). The compute buffer
shrank; this checks the speed did not. Each round measures both checkouts in fresh
processes, alternating which goes first, on the same models and settings:

- decode: aggregate tokens/s of 1 and 4 concurrent greedy streams (128 tokens each);
- prefill: tokens/s of a ~1,500-token prompt, uncached, in one request.

Run: ``.venv/bin/python -m benchmarks.bench_outputs_speed --baseline DIR [--rounds 3]`` where
DIR is a checkout of the commit before (``git worktree add /tmp/before e5e4b04^``);
writes ``benchmarks/results/outputs_speed.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "outputs_speed.json"
MODELS = {
    "gemma-3-270m": REPO / ".test-cache" / "gemma-3-270m-q4_k_m.gguf",
    "qwen2.5-coder-1.5b": REPO / ".test-cache" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
}
STREAMS = (1, 4)
DECODE_TOKENS = 128
PREFILL_WORDS = 1100  # about 1,500 tokens


def measure(model_path: Path) -> dict[str, Any]:
    """One checkout's numbers (run in a process whose imports come from that checkout)."""
    from engine import ChatRequest, Engine, SamplingParams
    from engine.devtools.benchmark import hearth_streams, make_plan

    plan = make_plan(model_path, ctx=4096, parallel=max(STREAMS))
    model = Engine.load(plan).wait_ready(600)
    try:
        prompts = [f"Write a long story about the sea (variant {i})." for i in range(max(STREAMS))]
        hearth_streams(model, prompts[:1], 8)  # warm caches and thread pools
        decode = {n: hearth_streams(model, prompts[:n], DECODE_TOKENS) for n in STREAMS}
        text = " ".join(f"word{i % 97}" for i in range(PREFILL_WORDS))
        greedy = SamplingParams(temperature=0.0)
        request = ChatRequest(prompt=text, sampling=greedy, max_tokens=1, cache=False)
        completion = model.submit(request).wait(600)
        prefill = completion.usage.prompt_tokens / completion.timings.prefill_seconds
        return {
            "decode_tps": {str(n): rate for n, rate in decode.items()},
            "prefill_tps": prefill,
            "prefill_tokens": completion.usage.prompt_tokens,
            "n_outputs_max": getattr(plan.params, "n_outputs_max", 0),  # 0 before: n_batch rows
            "engine": str(Path(sys.modules["engine"].__file__).resolve()),
        }
    finally:
        model.unload()


def run_checkout(checkout: Path, model_path: Path) -> dict[str, Any]:
    """``measure`` in a fresh process whose ``engine`` is the checkout's (PYTHONPATH comes
    before the editable install)."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run(
        [sys.executable, __file__, "--measure", str(model_path)],
        cwd=checkout, env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
            if not result["engine"].startswith(str(checkout)):
                raise RuntimeError(f"{checkout}: measured {result['engine']} instead")
            return result
    raise RuntimeError(f"{checkout}: no result\n{out.stderr[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", type=Path, help="a checkout of the commit before")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # one checkout, one model
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.measure:
        print("RESULT " + json.dumps(measure(args.measure)), flush=True)
        return
    if args.baseline is None:
        parser.error("--baseline DIR is required")
    baseline = args.baseline.resolve()
    revision = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=baseline, capture_output=True,
                              text=True).stdout.strip()  # fmt: skip
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                          text=True).stdout.strip()  # fmt: skip
    rows = []
    for name, path in MODELS.items():
        runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
        for r in range(args.rounds):
            order = [("before", baseline), ("after", REPO)]
            for label, checkout in order if r % 2 == 0 else order[::-1]:
                runs[label].append(run_checkout(checkout, path))
                print(name, label, json.dumps(runs[label][-1]), flush=True)
        row: dict[str, Any] = {"model": name}
        for label, results in runs.items():
            row[label] = {
                "decode_tps": {
                    str(n): statistics.median(x["decode_tps"][str(n)] for x in results) for n in STREAMS
                },
                "prefill_tps": statistics.median(x["prefill_tps"] for x in results),
                "n_outputs_max": results[0]["n_outputs_max"],
                "rounds": results,
            }
        after, before = row["after"], row["before"]
        row["ratio"] = {
            f"decode_{n}": after["decode_tps"][str(n)] / before["decode_tps"][str(n)] for n in STREAMS
        }
        row["ratio"]["prefill"] = after["prefill_tps"] / before["prefill_tps"]
        rows.append(row)
    result = {
        "what": "Hearth engine speed after (HEAD) vs before (baseline) logits were sized to what is sampled",
        "baseline": revision,
        "head": head,
        "rounds": args.rounds,
        "load_average_end": os.getloadavg(),
        "cpus": os.cpu_count(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "models": rows,
    }
    RESULTS.write_text(json.dumps(result, indent=2))
    for row in rows:
        print(row["model"], {k: round(v, 3) for k, v in row["ratio"].items()})


if __name__ == "__main__":
    main()
