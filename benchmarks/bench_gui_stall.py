"""The GUI thread never blocks: the longest event-loop stall while replies stream.

A QTimer probe fires every 5 ms on the GUI thread; the gap between two firings beyond
its interval is a stall. Gemma 3 270M is loaded into the real window, the dashboard is
open, and two cases run:

- ``chats``: 4 conversations stream at once (Markdown rendering, store writes every half
  second, conversation list updates), 4 parallel sequences;
- ``chats_and_api``: the same 4 chats while the window's Local server (on the window's own
  qasync event loop, as the app runs it) streams 4 API replies to another process using
  the official ``openai`` SDK, 8 parallel sequences.

Run: ``.venv/bin/python -m benchmarks.bench_gui_stall`` (offscreen); writes
``benchmarks/results/gui_stall.json``.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

RESULTS = Path(__file__).resolve().parent / "results" / "gui_stall.json"
PROBE_MS = 5
STREAMS = 4
API_STREAMS = 4
TOKENS = 160
PROMPTS = [
    "Write a short story about a lighthouse keeper.",
    "Explain how bread rises, step by step.",
    "List ten facts about the moon.",
    "Describe a walk through a forest in autumn.",
]


class Probe:
    """Gaps between firings of a 5 ms timer on the GUI thread."""

    def __init__(self) -> None:
        from PySide6.QtCore import QElapsedTimer, QTimer

        self.gaps: list[float] = []
        self._clock = QElapsedTimer()
        self._timer = QTimer()
        self._timer.setInterval(PROBE_MS)
        self._timer.timeout.connect(self._tick)

    def _tick(self) -> None:
        self.gaps.append(self._clock.nsecsElapsed() / 1e6)
        self._clock.restart()

    def start(self) -> None:
        self._clock.start()
        self._timer.start()

    def stop(self) -> dict[str, float]:
        self._timer.stop()
        stalls = [max(0.0, g - PROBE_MS) for g in self.gaps[1:]]
        return {
            "probes": len(self.gaps),
            "longest_stall_ms": round(max(stalls), 1),
            "p99_stall_ms": round(sorted(stalls)[int(0.99 * (len(stalls) - 1))], 1),
            "median_gap_ms": round(statistics.median(self.gaps[1:]), 2),
        }


def open_window(app, root: Path, model: Path, parallel: int):
    from app.application import build_window
    from app.platform.paths import resolve_paths

    paths = resolve_paths(root / "data", root / "models").ensure()
    window = build_window(paths)
    window.resize(1400, 900)
    window.show()
    window.start()
    window.library.wait_idle()
    window.library.add_paths([model], select=model)
    pump(app, lambda: window.library_panel.selected_path() == model)
    window.model_panel.ctx_spin.setValue(2048)
    window.model_panel.parallel_spin.setValue(parallel)
    window.model_panel.load_button.click()
    pump(app, lambda: window.session.state.value == "ready")
    window.dashboard_action.setChecked(True)
    return window


def pump(app, done, seconds: float = 600) -> None:
    end = time.monotonic() + seconds
    while not done() and time.monotonic() < end:
        app.processEvents()
        time.sleep(0.002)


def start_chats(window) -> None:
    settings = window.sampling_panel.settings()
    for prompt in PROMPTS[:STREAMS]:
        window.new_chat_action.trigger()
        window.sampling_panel.set_settings(type(settings)(**{**settings.to_dict(), "max_tokens": TOKENS}))
        window.sampling_panel.changed.emit(window.sampling_panel.settings())
        window.composer.set_text(prompt)
        window.composer.submit()


def completed_replies(window) -> int:
    return sum(
        1
        for c in window.store.list_conversations()
        for m in window.store.messages(c.id)
        if m.role.value == "assistant" and m.state.value == "complete"
    )


def chats_case(app, model: Path, root: Path) -> dict[str, object]:
    window = open_window(app, root, model, STREAMS)
    probe = Probe()
    started = time.monotonic()
    probe.start()
    start_chats(window)
    peak = 0
    while window.chat.streaming or time.monotonic() - started < 1:
        app.processEvents()
        peak = max(peak, window.chat.streaming)
        time.sleep(0.001)
    result = {
        "concurrent_streams": peak,
        "tokens_per_reply": TOKENS,
        "seconds": round(time.monotonic() - started, 2),
        "probe_interval_ms": PROBE_MS,
        **probe.stop(),
        "replies_complete": completed_replies(window),
    }
    window.close()
    return result


def api_case(app, model: Path, root: Path) -> dict[str, object]:
    """The chats, plus API streams served from the window's qasync loop to another process."""
    import qasync

    from app.state.serving import ServerStatus

    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    window = open_window(app, root, model, STREAMS + API_STREAMS)
    window.local_server.set_port(0)
    window.set_serving(True)
    probe = Probe()
    peaks = {"chats": 0}

    async def sample_peak() -> None:
        while True:
            peaks["chats"] = max(peaks["chats"], window.chat.streaming)
            await asyncio.sleep(0.01)

    async def scenario() -> dict[str, object]:
        while window.local_server.status is not ServerStatus.ON:
            await asyncio.sleep(0.01)
        sampler = asyncio.ensure_future(sample_peak())
        started = time.monotonic()
        probe.start()
        client = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bench_gui_stall", "--client", window.local_server.address],
            stdout=subprocess.PIPE,
            text=True,
        )
        start_chats(window)
        out = await asyncio.to_thread(client.communicate)
        while window.chat.streaming:
            await asyncio.sleep(0.001)
        seconds = time.monotonic() - started
        sampler.cancel()
        return {"seconds": seconds, "client": json.loads(out[0].strip().splitlines()[-1])}

    try:
        outcome = loop.run_until_complete(scenario())
    finally:
        stats = probe.stop()
    api = outcome["client"]
    result = {
        "concurrent_chats": peaks["chats"],
        "concurrent_api_streams": api["concurrent"],
        "tokens_per_reply": TOKENS,
        "seconds": round(outcome["seconds"], 2),
        "probe_interval_ms": PROBE_MS,
        **stats,
        "replies_complete": completed_replies(window),
        "api_streams_complete": api["complete"],
        "api_tokens": api["tokens"],
    }
    window.close()
    loop.run_until_complete(window.local_server.stopped())
    loop.close()
    asyncio.set_event_loop(None)
    return result


def client_main(base_url: str) -> None:
    """The other program: API_STREAMS streaming chats at once with the official SDK."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="x", max_retries=0, timeout=600)
    spans: list[tuple[float, float]] = []
    tokens: list[int] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        begin = time.monotonic()
        stream = client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": f"{PROMPTS[i % len(PROMPTS)]} (API client {i})"}],
            max_tokens=TOKENS,
            stream=True,
            stream_options={"include_usage": True},
        )
        usage = None
        for chunk in stream:
            usage = chunk.usage or usage
        with lock:
            spans.append((begin, time.monotonic()))
            tokens.append(usage.completion_tokens if usage else 0)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(API_STREAMS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    last_start = max(b for b, _ in spans)
    concurrent = sum(1 for _, end in spans if end > last_start)  # still streaming when the last began
    print(json.dumps({"complete": len(spans), "tokens": sum(tokens), "concurrent": concurrent}))


def main() -> None:
    if sys.argv[1:2] == ["--client"]:
        client_main(sys.argv[2])
        return
    from app.application import create_application
    from benchmarks.bench_engine import gemma_path

    app = create_application()
    model = gemma_path()
    root = Path(tempfile.mkdtemp(prefix="hearth-stall-"))
    chats = chats_case(app, model, root / "chats")
    with_api = api_case(app, model, root / "api")
    result = {
        "model": model.name,
        **chats,
        "with_api_streams": with_api,
        "target_ms": 50,
        "load_average": os.getloadavg()[0],
    }  # other programs' load on the cores: a busy machine stalls
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    sys.exit(0)


if __name__ == "__main__":
    main()
