"""What the window costs decode: one long reply with code, headless and in the window.

The same greedy reply (Qwen2.5-Coder 1.5B asked for a Python module with several
functions and explanations, ``max_tokens`` 1000) is decoded

- ``headless``: through the engine API exactly as ``hearth chat`` does (the same plan:
  one conversation, the default context; deltas read from ``handle.events()``);
- ``window``: sent from the composer of the real ``MainWindow`` on a qasync loop as
  ``hearth`` runs it, under a real X server (Xvfb) so it paints, the dashboard closed;
- ``dashboard``: the same with the dashboard open.

On two cores the GUI thread competes with llama.cpp's threads, so what the window spends
per update shows in decode tokens/s. Each case runs in its own process and the cases
alternate, each round starting one case later (A B C, B C A, C A B, ...), so drifting
load and a case's place in the round hit them alike; medians and the spread of
decode tok/s (from the Completion's timings), the ratio window/headless (paired within
each round), and the CPU seconds of the GUI thread (and the rest of the process) during
the reply are reported. Target: window >= 0.97x headless, with or without the dashboard.

Run: ``.venv/bin/python -m benchmarks.bench_gui_decode [--quick] [--repeats N]`` (quick:
Gemma 3 270M, 300 tokens, one round); writes ``benchmarks/results/gui_decode.json``.
``--baseline DIR`` also runs the window cases of another checkout (an older commit, say)
in each round, for before/after numbers; ``--profile CASE`` instead runs one window case
under cProfile (GUI thread only) and prints where its time goes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "gui_decode.json"
CASES = ("headless", "window", "dashboard")
TARGET_RATIO = 0.97
PROMPT = (
    "Write a complete Python module `inventory.py` for a small shop's stock: a dataclass for "
    "an item, and functions to add items, remove items, restock, search by name, compute the "
    "total stock value, find items that need restocking, load and save the inventory as "
    "JSON, and print a report. Give every function type hints and a docstring. After the "
    "code, explain each function in detail, then show example usage in a second code block."
)
TOKENS = 1000
QUICK_TOKENS = 300


def model_path(name: str) -> Path:
    if name == "gemma":
        from app.platform.default_model import ensure_default_model

        return ensure_default_model(REPO / ".test-cache")
    from app.platform.qwen_model import ensure_chat_model

    return ensure_chat_model(REPO / ".test-cache")


def _plan(path: Path) -> Any:
    """The plan ``hearth chat`` makes: one conversation with the default context."""
    from engine import DEFAULT_CONTEXT_PER_CONVERSATION, LoadRequest, inspect_model, plan_load, take_snapshot

    request = LoadRequest(context_per_conversation=DEFAULT_CONTEXT_PER_CONVERSATION, parallel=1)
    return plan_load(inspect_model(path), take_snapshot(), request)


class ThreadClock:
    """CPU seconds of this process's threads between ``start`` and ``stop``: the thread
    that created it (the GUI thread), and all the others together."""

    def __init__(self) -> None:
        import psutil

        self._process = psutil.Process()
        self._main = threading.get_native_id()
        self._start: tuple[float, float, float] = (0.0, 0.0, 0.0)
        self.gui_s = self.others_s = self.wall_s = 0.0

    def _read(self) -> tuple[float, float, float]:
        main = other = 0.0
        for t in self._process.threads():
            if t.id == self._main:
                main += t.user_time + t.system_time
            else:
                other += t.user_time + t.system_time
        return main, other, time.perf_counter()

    def start(self) -> None:
        self._start = self._read()

    def stop(self) -> None:
        main, other, now = self._read()
        self.gui_s = main - self._start[0]
        self.others_s = other - self._start[1]
        self.wall_s = now - self._start[2]


def _result(
    case: str, completion_tokens: int, tps: float, clock: ThreadClock, **extra: Any
) -> dict[str, Any]:
    return {
        "case": case,
        "completion_tokens": completion_tokens,
        "decode_tps": round(tps, 3),
        "gui_thread_cpu_s": round(clock.gui_s, 3),
        "other_threads_cpu_s": round(clock.others_s, 2),
        "reply_wall_s": round(clock.wall_s, 2),
        **extra,
    }


# -- the children -------------------------------------------------------------------------------


def child_headless(path: Path, tokens: int) -> dict[str, Any]:
    """As ``hearth chat`` streams a reply: the deltas written out as they come."""
    from engine import GREEDY, ChatMessage, ChatRequest, Engine, Role, TextDelta

    model = Engine.load(_plan(path)).wait_ready()
    request = ChatRequest(messages=(ChatMessage(Role.USER, PROMPT),), sampling=GREEDY, max_tokens=tokens)
    clock = ThreadClock()
    sink = open(os.devnull, "w")  # noqa: SIM115 - the terminal hearth chat would write to
    try:
        clock.start()
        handle = model.submit(request)
        for event in handle.events():
            if isinstance(event, TextDelta):
                sink.write(event.text)
                sink.flush()
        completion = handle.wait()
        clock.stop()
    finally:
        sink.close()
        model.unload()
    return _result(
        "headless",
        completion.usage.completion_tokens,
        completion.timings.decode_tokens_per_second,
        clock,
        code_blocks=completion.text.count("```") // 2,
        chars=len(completion.text),
    )


def child_window(path: Path, tokens: int, dashboard: bool, profile: Path | None = None) -> dict[str, Any]:
    """The reply sent from the window's composer, the window as ``hearth`` runs it."""
    import asyncio

    import qasync

    from app.application import build_window, create_application
    from app.chat import SamplingSettings
    from app.platform.paths import resolve_paths

    app = create_application()
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    root = Path(tempfile.mkdtemp(prefix="hearth-gui-decode-"))
    window = build_window(resolve_paths(root / "data", root / "models").ensure())
    window.resize(1400, 900)
    window.show()
    window.start()
    window.dashboard_action.setChecked(dashboard)
    clock = ThreadClock()
    profiler = None
    done = asyncio.Event()
    stats: dict[str, Any] = {}

    def send(_model: object) -> None:
        nonlocal profiler
        window.chat.new_conversation()
        greedy = SamplingSettings(
            temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0, max_tokens=tokens
        )
        window.sampling_panel.set_settings(greedy)
        window.sampling_panel.changed.emit(window.sampling_panel.settings())
        window.composer.set_text(PROMPT)
        if profile is not None:
            import cProfile

            # CPU time, not wall: on two cores the GUI thread waits for a core often.
            profiler = cProfile.Profile(time.thread_time)
            profiler.enable()
        clock.start()
        window.composer.submit()

    def streaming_changed(count: int) -> None:
        if count == 0 and clock._start[2]:
            clock.stop()
            if profiler is not None:
                profiler.disable()
            reply = window.store.messages(window.chat.current_id)[-1]
            stats.update(reply.stats or {})
            stats["text"] = reply.text
            done.set()

    window.session.model_ready.connect(send)
    window.chat.streaming_changed.connect(streaming_changed)
    window.load_model(_plan(path))
    with loop:
        loop.run_until_complete(asyncio.wait_for(done.wait(), timeout=1800))
        window.close()
    if profiler is not None:
        import pstats

        profiler.dump_stats(profile)
        pstats.Stats(str(profile), stream=sys.stderr).sort_stats("cumulative").print_stats(45)
        pstats.Stats(str(profile), stream=sys.stderr).sort_stats("tottime").print_stats(30)
    text = stats.get("text", "")
    return _result(
        "dashboard" if dashboard else "window",
        int(stats.get("completion_tokens", 0)),
        float(stats.get("decode_tokens_per_second", 0.0)),
        clock,
        code_blocks=text.count("```") // 2,
        chars=len(text),
        platform=app.platformName(),
    )


# -- the parent ---------------------------------------------------------------------------------


class VirtualScreen:
    """An Xvfb server for the window cases (a real X server: the window paints)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self.display = ""

    def __enter__(self) -> VirtualScreen:
        if shutil.which("Xvfb") is None:
            raise SystemExit("bench_gui_decode needs Xvfb (a real X server, so the window paints)")
        read, write = os.pipe()
        self._proc = subprocess.Popen(
            ["Xvfb", "-displayfd", str(write), "-screen", "0", "1920x1080x24", "-nolisten", "tcp"],
            pass_fds=(write,),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(write)
        with os.fdopen(read) as f:
            self.display = ":" + f.readline().strip()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(10)

    def cpu_seconds(self) -> float:
        """CPU the X server has used so far (it paints what the window sends it)."""
        if self._proc is None:
            return 0.0
        times = psutil.Process(self._proc.pid).cpu_times()
        return times.user + times.system


def run_child(
    case: str, model: str, tokens: int, screen: VirtualScreen, root: Path = REPO, profile: str = ""
) -> dict[str, Any]:
    """One case in a fresh process, importing ``app`` and ``engine`` from ``root``."""
    env = {
        **os.environ,
        "GGML_NO_BACKTRACE": "1",
        "DISPLAY": screen.display,
        "QT_QPA_PLATFORM": "xcb",
        "PYTHONPATH": str(root),
    }
    # A baseline checkout runs its own copy of this script: its child builds its own window.
    script = root / "benchmarks" / Path(__file__).name
    args = [sys.executable, str(script), "--child", case, "--model", model]
    if root == REPO:
        args += ["--model-file", str(model_path(model))]
    args += ["--tokens", str(tokens)]
    if profile:
        args += ["--profile-out", profile]
    load = os.getloadavg()[0]
    x_before = screen.cpu_seconds()
    out = subprocess.run(args, capture_output=True, text=True, cwd=root, env=env)
    x_cpu = screen.cpu_seconds() - x_before
    if out.returncode != 0:
        raise RuntimeError(f"{case} failed:\n{out.stderr[-3000:]}")
    if profile:
        print(out.stderr[-20000:], file=sys.stderr)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    # The X server's CPU over the whole child (load and reply), only in window cases.
    return {**result, "x_server_cpu_s": round(x_cpu, 2), "loadavg_1min_before": round(load, 2)}


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def summarize(runs: list[dict[str, Any]], labels: list[str]) -> dict[str, Any]:
    """Per label: medians and spread; a window label's decode rate also as a ratio to the
    headless run of the same round (which saw the same load)."""
    headless = {r["round"]: r for r in runs if r["label"] == "headless"}
    cases: dict[str, Any] = {}
    for label in labels:
        rows = [r for r in runs if r["label"] == label]
        summary: dict[str, Any] = {
            "decode_tps": _spread([r["decode_tps"] for r in rows]),
            "gui_thread_cpu_s": _spread([r["gui_thread_cpu_s"] for r in rows]),
            "other_threads_cpu_s": _spread([r["other_threads_cpu_s"] for r in rows]),
            "x_server_cpu_s": _spread([r.get("x_server_cpu_s", 0.0) for r in rows]),
            "completion_tokens": sorted({r["completion_tokens"] for r in rows}),
        }
        if label != "headless":
            ratios = [r["decode_tps"] / headless[r["round"]]["decode_tps"] for r in rows]
            summary["ratio_to_headless"] = _spread(ratios)
            summary["meets_target"] = statistics.median(ratios) >= TARGET_RATIO
        cases[label] = summary
    return cases


def main() -> int:
    parser = argparse.ArgumentParser()
    quick = f"Gemma 3 270M, {QUICK_TOKENS} tokens, one round"
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--repeats", type=int, default=None, help="rounds of the cases (default 3)")
    parser.add_argument("--tokens", type=int, default=None)
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another checkout of Hearth: its window cases run too, alternated with these",
    )
    parser.add_argument("--profile", choices=CASES[1:], help="one window case under cProfile")
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--model", choices=("qwen", "gemma"), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--profile-out", default="", help=argparse.SUPPRESS)
    # The parent assembles the model once and names the file.
    parser.add_argument("--model-file", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    model = args.model or ("gemma" if args.quick else "qwen")
    tokens = args.tokens or (QUICK_TOKENS if args.quick else TOKENS)
    if args.child:
        path = args.model_file or model_path(model)
        if args.child == "headless":
            result = child_headless(path, tokens)
        else:
            profile = Path(args.profile_out) if args.profile_out else None
            result = child_window(path, tokens, args.child == "dashboard", profile)
        print(json.dumps(result))
        return 0

    rounds = args.repeats or (1 if args.quick else 3)
    plan: list[tuple[str, str, Path]] = [(case, case, REPO) for case in CASES]
    if args.baseline is not None:
        baseline = args.baseline.resolve()
        if not (baseline / "app" / "__main__.py").is_file():
            raise SystemExit(f"{baseline} is not a checkout of Hearth")
        plan += [(case, f"{case} (baseline)", baseline) for case in CASES[1:]]
    model_path(model)  # assembled once, before any timing
    # Stopped with SIGTERM, it still kills the case running and stops its X server.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with VirtualScreen() as screen:
        if args.profile:
            out = Path(tempfile.mkdtemp(prefix="hearth-profile-")) / f"{args.profile}.prof"
            print(json.dumps(run_child(args.profile, model, tokens, screen, profile=str(out))))
            print(f"profile: {out}")
            return 0
        load_before = os.getloadavg()
        runs = []
        for k in range(rounds):
            # Each round starts one case later (A B C, B C A, C A B): no case always follows
            # the same one, or runs first after the pause between rounds.
            for case, label, root in plan[k % len(plan) :] + plan[: k % len(plan)]:
                run = {"round": k, "label": label, **run_child(case, model, tokens, screen, root)}
                runs.append(run)
                print(json.dumps(run), flush=True)
        load_after = os.getloadavg()
    result = {
        "model": model_path(model).name,
        "prompt": PROMPT,
        "max_tokens": tokens,
        "cpu_count": os.cpu_count(),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in load_after],
        "baseline": str(args.baseline) if args.baseline else None,
        "target_ratio": TARGET_RATIO,
        "rounds": rounds,
        "cases": summarize(runs, [label for _case, label, _root in plan]),
        "runs": runs,
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
