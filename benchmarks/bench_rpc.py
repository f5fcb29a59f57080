"""What the RPC hop costs per token: Gemma 3 270M decode, local only vs split over two
``hearth worker`` processes on loopback (issue 18).

Each round loads Gemma four ways, alternating the order between rounds (a split model in a
child process of its own, as Hearth always loads one; the local ones in this process), and
measures one greedy stream of 128 tokens (after an 8-token warm-up):

- ``local``: every layer on this process's CPU, one thread;
- ``local-2threads``: the same with the plan's threads (2 here), for reference;
- ``cpu+2workers``: 12 of its 19 layer positions (18 blocks + output) on the workers, 6
  each, the rest and the embeddings here (as the tests split it);
- ``2workers``: all 19 positions on the workers, only embeddings and sampling here.

Every configuration computes with one thread per process (the workers: ``--threads 1``)
except ``local-2threads``: on a 2-core machine that other work shares, a two-thread
OpenMP barrier whose second thread is descheduled spin-waits, and that, not RPC, then
decides the numbers (seen here: 2 threads at 2.5-22 tok/s while 1 thread held 64). With
one thread everywhere the difference between ``local`` and a split is the RPC hop.

On loopback the "network" is the kernel's TCP stack, so this measures the protocol's
per-token cost (commands, serialisation, the hidden state and logits crossing
sockets, and the devices running one after another), not a real network's latency.

Run: ``.venv/bin/python -m benchmarks.bench_rpc [--rounds 3]``; writes
``benchmarks/results/rpc.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "rpc.json"
GEMMA = REPO / ".test-cache" / "gemma-3-270m-q4_k_m.gguf"
TOKENS = 128
PROMPT = "Write a long story about the sea."
SPLITS = {"cpu+2workers": 12, "2workers": 19}
WORKER_THREADS = 1


def measure(plan: Any) -> dict[str, Any]:
    from engine import Engine
    from engine.devtools.benchmark import hearth_streams

    t = time.perf_counter()
    model = Engine.load(plan).wait_ready(600)
    load_s = time.perf_counter() - t
    try:
        hearth_streams(model, [PROMPT], 8)
        rate = hearth_streams(model, [PROMPT], TOKENS)
    finally:
        model.unload()
    return {"decode_tps": rate, "load_s": load_s}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from engine import (
        LoadRequest,
        inspect_model,
        parse_worker_address,
        plan_load,
        probe_worker,
        take_snapshot,
        with_workers,
    )
    from engine.devtools.benchmark import make_plan
    from tests.integration.rpc_workers import start_worker

    local_plan = make_plan(GEMMA, ctx=1024, parallel=1, threads=1)
    threads = make_plan(GEMMA, ctx=1024, parallel=1).params.n_threads
    workers = [start_worker(None, "--threads", str(WORKER_THREADS)) for _ in range(2)]
    try:
        infos = [probe_worker(parse_worker_address(w.endpoint)) for w in workers]
        hardware = with_workers(take_snapshot(), infos)
        plans = {"local": local_plan, "local-2threads": make_plan(GEMMA, ctx=1024, parallel=1)}
        for name, layers in SPLITS.items():
            request = LoadRequest(
                context_per_conversation=1024,
                parallel=1,
                gpu_layers=layers,
                tensor_split=(1.0, 1.0),
                threads=1,
            )
            plans[name] = plan_load(inspect_model(GEMMA), hardware, request)
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in plans}
        loadavg_before = [round(x, 2) for x in os.getloadavg()]
        order = list(plans)
        for r in range(args.rounds):
            for name in order if r % 2 == 0 else reversed(order):
                runs[name].append(measure(plans[name]))
                print(f"round {r + 1} {name}: {runs[name][-1]['decode_tps']:.1f} tok/s", flush=True)
    finally:
        for w in workers:
            w.stop()

    median = {name: statistics.median(x["decode_tps"] for x in rs) for name, rs in runs.items()}
    result: dict[str, Any] = {
        "model": GEMMA.name,
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "threads": {"local": 1, "local-2threads": threads, "each_worker": WORKER_THREADS},
        "tokens": TOKENS,
        "rounds": args.rounds,
        "decode_tps_median": median,
        "decode_tps_runs": {name: [x["decode_tps"] for x in rs] for name, rs in runs.items()},
        "load_s_median": {name: statistics.median(x["load_s"] for x in rs) for name, rs in runs.items()},
        "ratio_to_local": {name: median[name] / median["local"] for name in (*SPLITS, "local-2threads")},
        # What the hop adds per token: the split's time per token minus the local one.
        "rpc_cost_ms_per_token": {name: 1000 / median[name] - 1000 / median["local"] for name in SPLITS},
        "planned_network_bytes_per_token": {name: plans[name].network_bytes_per_token for name in SPLITS},
        "layers_on_workers": SPLITS,
        "loadavg_before": loadavg_before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "note": "loopback TCP, workers CPU-only on the same machine as the client, the split model "
        "in its own child process (as Hearth loads it): read the runs' spread",
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(
        json.dumps({k: result[k] for k in ("decode_tps_median", "ratio_to_local", "rpc_cost_ms_per_token")})
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
