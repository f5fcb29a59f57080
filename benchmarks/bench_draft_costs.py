"""What speculation with a draft model can gain on this machine (issue 30): the target's cost
of verifying n drafts (a decode of n + 1 rows, relative to one row), the draft's decode cost
relative to the target's, the measured acceptance of the real pair on a greedy code reply,
and the speed-up those numbers allow at best: expected tokens per verification
(1 + p + … + p^n) over its cost (rows(n) + n × draft cost).

The pair: Qwen2.5-Coder 1.5B Instruct and 0.5B Instruct (Q4_K_M, from their chunk packages).

Run: ``.venv/bin/python -m benchmarks.bench_draft_costs``; writes
``benchmarks/results/draft_costs.json``.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results" / "draft_costs.json"
ROWS = (1, 2, 3, 5, 9)
ASK = "Write a Python class for a bank account with deposit, withdraw and a history of transactions."


def row_costs(path: Path) -> dict[int, float]:
    """Best of 5 decode times (s) of ``rows`` rows on one sequence, from an empty cache."""
    import llama_cpp as ll

    from engine.catalog import inspect_model
    from engine.devtools.benchmark import BareContext, on_fresh_thread
    from engine.machine.hardware import take_snapshot
    from engine.planner import LoadRequest, plan_load

    request = LoadRequest(context_per_conversation=1024, parallel=1, max_draft=8)
    plan = plan_load(inspect_model(path), take_snapshot(), request)

    def measure() -> dict[int, float]:
        bare = BareContext(plan)
        seconds = {}
        try:
            for rows in ROWS:
                best = float("inf")
                for _ in range(5):
                    bare.batch.clear()
                    bare.batch.add_run(0, 0, [100] * rows, range(rows))
                    start = time.perf_counter()
                    ll.llama_decode(bare.ctx, bare.batch.native())
                    ll.llama_synchronize(bare.ctx)
                    best = min(best, time.perf_counter() - start)
                    ll.llama_memory_clear(ll.llama_get_memory(bare.ctx), True)
                seconds[rows] = best
        finally:
            bare.close()
        return seconds

    return on_fresh_thread(measure)


def acceptance(target: Path, draft: Path, tokens: int) -> dict[str, float]:
    """The pair on one greedy code reply, always drafting 4: drafted, accepted, the rate."""
    from engine import GREEDY, ChatMessage, ChatRequest, Engine
    from engine.catalog import inspect_model
    from engine.machine.hardware import take_snapshot
    from engine.planner import LoadRequest, plan_load
    from engine.speculation.policy import SpeculationConfig, SpeculationMode

    request = LoadRequest(context_per_conversation=2048, parallel=1, draft=inspect_model(draft), max_draft=4)
    plan = plan_load(inspect_model(target), take_snapshot(), request)
    speculation = SpeculationConfig(
        SpeculationMode.DRAFT_MODEL, draft_path=draft, max_draft=4, min_draft=1, adaptive=False
    )
    model = Engine.load(plan, speculation=speculation).wait_ready(600)
    try:
        messages = (ChatMessage("user", ASK),)
        ask = ChatRequest(messages=messages, sampling=GREEDY, max_tokens=tokens, cache=False)
        done = model.submit(ask).wait(600)
    finally:
        model.unload()
    return {"drafted": done.drafted, "accepted": done.accepted, "rate": done.accepted / max(done.drafted, 1)}


def best_speedup(costs: dict[int, float], draft_cost: float, p: float) -> tuple[int, float]:
    """The draft length with the most tokens per unit of cost, and that rate (1.0: plain)."""
    best = (0, 1.0)
    for n in (1, 2, 4, 8):
        rows = costs.get(n + 1)
        if rows is None:
            continue
        expected = float(n + 1) if p >= 1.0 else (1 - p ** (n + 1)) / (1 - p)
        rate = expected / (rows + n * draft_cost)
        if rate > best[1]:
            best = (n, rate)
    return best


def main() -> None:
    from app.platform.qwen_model import ensure_chat_model, ensure_draft_model

    cache = REPO / ".test-cache"
    target, draft = ensure_chat_model(cache), ensure_draft_model(cache)
    target_s, draft_s = row_costs(target), row_costs(draft)
    relative = {rows: target_s[rows] / target_s[1] for rows in ROWS}
    draft_cost = draft_s[1] / target_s[1]
    accepted = acceptance(target, draft, 192)
    n, rate = best_speedup(relative, draft_cost, accepted["rate"])
    results = {
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "load_average": os.getloadavg()[0],
        },
        "target": target.name,
        "draft": draft.name,
        "target_decode_ms": {rows: round(s * 1000, 1) for rows, s in target_s.items()},
        "draft_decode_ms": {rows: round(s * 1000, 1) for rows, s in draft_s.items()},
        "verify_cost_by_rows": {rows: round(c, 3) for rows, c in relative.items()},
        "draft_cost": round(draft_cost, 3),
        "acceptance": accepted,
        "best_drafts": n,
        "best_speedup_bound": round(rate, 3),
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
