"""The GUI thread never blocks: the longest event-loop stall while 4 chats stream at once.

A QTimer probe fires every 5 ms on the GUI thread; the gap between two firings beyond
its interval is a stall. Gemma 3 270M is loaded with 4 parallel conversations, four
replies stream together into the real window (Markdown rendering, store writes every
half second, conversation list updates), and the dashboard is open.

Run: ``.venv/bin/python -m benchmarks.bench_gui_stall`` (offscreen); writes
``benchmarks/results/gui_stall.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

RESULTS = Path(__file__).resolve().parent / "results" / "gui_stall.json"
PROBE_MS = 5
STREAMS = 4
TOKENS = 160


def main() -> None:
    from PySide6.QtCore import QElapsedTimer, QTimer

    from app.application import create_application
    from app.main_window import MainWindow
    from app.paths import resolve_paths
    from benchmarks.bench_engine import gemma_path

    app = create_application()
    root = Path(tempfile.mkdtemp(prefix="hearth-stall-"))
    paths = resolve_paths(root / "data", root / "models").ensure()
    window = MainWindow(paths)
    window.resize(1400, 900)
    window.show()
    window.start()
    window.library.wait_idle()

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            app.processEvents()
            time.sleep(0.002)

    model = gemma_path()
    window.library.add_paths([model], select=model)
    while window.library_panel.selected_path() != model:
        pump(0.05)
    window.model_panel.ctx_spin.setValue(2048)
    window.model_panel.parallel_spin.setValue(STREAMS)
    window.model_panel.load_button.click()
    while window.session.state.value != "ready":
        pump(0.05)
    window.dashboard_action.setChecked(True)
    settings = window.sampling_panel.settings()

    gaps: list[float] = []
    clock = QElapsedTimer()
    probe = QTimer()
    probe.setInterval(PROBE_MS)

    def tick() -> None:
        gaps.append(clock.nsecsElapsed() / 1e6)
        clock.restart()

    probe.timeout.connect(tick)
    prompts = [
        "Write a short story about a lighthouse keeper.",
        "Explain how bread rises, step by step.",
        "List ten facts about the moon.",
        "Describe a walk through a forest in autumn.",
    ]
    started = time.monotonic()
    clock.start()
    probe.start()
    for prompt in prompts[:STREAMS]:
        window.new_chat_action.trigger()
        window.sampling_panel.set_settings(type(settings)(**{**settings.to_dict(), "max_tokens": TOKENS}))
        window.sampling_panel.changed.emit(window.sampling_panel.settings())
        window.composer.set_text(prompt)
        window.composer.submit()
    peak = 0
    while window.chat.streaming or time.monotonic() - started < 1:
        app.processEvents()
        peak = max(peak, window.chat.streaming)
        time.sleep(0.001)
    probe.stop()
    elapsed = time.monotonic() - started
    stalls = [max(0.0, g - PROBE_MS) for g in gaps[1:]]
    replies = [
        m
        for c in window.store.list_conversations()
        for m in window.store.messages(c.id)
        if m.role.value == "assistant"
    ]
    result = {
        "model": model.name,
        "concurrent_streams": peak,
        "tokens_per_reply": TOKENS,
        "seconds": round(elapsed, 2),
        "probe_interval_ms": PROBE_MS,
        "probes": len(gaps),
        "longest_stall_ms": round(max(stalls), 1),
        "p99_stall_ms": round(sorted(stalls)[int(0.99 * (len(stalls) - 1))], 1),
        "median_gap_ms": round(statistics.median(gaps[1:]), 2),
        "replies_complete": sum(1 for m in replies if m.state.value == "complete"),
        "target_ms": 50,
    }
    window.close()
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    sys.exit(0)


if __name__ == "__main__":
    main()
