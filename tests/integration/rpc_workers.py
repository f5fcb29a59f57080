"""Helpers for the RPC tests: ``hearth worker`` processes on loopback, and the split load.

Also run as a script (``python -m tests.integration.rpc_workers lost A B``): a process that
loads Gemma split over the workers at ports A and B (the model itself in its own child),
streams a long reply, and reports in JSON lines what happens when the test SIGKILLs worker
B mid-reply — in a child process, so that if containment failed, the test run survives.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GEMMA = REPO / ".test-cache" / "gemma-3-270m-q4_k_m.gguf"
START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Worker:
    port: int
    process: subprocess.Popen
    banner: str

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> str:
        """SIGTERM, and what it printed from then on."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate(timeout=30)
        return out


def start_worker(port: int | None = None, *extra: str) -> Worker:
    """``hearth worker`` restricted to its CPU (one thread), once it prints its devices and
    something listens at its port."""
    port = port or free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app",
            "worker",
            "--port",
            str(port),
            "--devices",
            "CPU",
            "--threads",
            "1",
            *extra,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "GGML_NO_BACKTRACE": "1"},
    )
    banner: list[str] = []
    deadline = time.monotonic() + START_TIMEOUT
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise AssertionError(f"the worker exited ({process.wait()}): {''.join(banner)}")
        banner.append(line)
        if line.startswith("Devices:"):
            break
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return Worker(port, process, "".join(banner))
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError(f"the worker never listened: {''.join(banner)}")


def split_plan(endpoints: list[str], gpu_layers: int = 12, ctx: int = 1024, parallel: int = 1):
    """Gemma with ``gpu_layers`` of its 19 positions on the workers (equal shares), the rest
    and the embeddings on this machine."""
    from engine import (
        LoadRequest,
        inspect_model,
        parse_worker_address,
        plan_load,
        probe_worker,
        take_snapshot,
        with_workers,
    )

    infos = [probe_worker(parse_worker_address(e)) for e in endpoints]
    assert all(i.online for i in infos), [i.reason for i in infos]
    hardware = with_workers(take_snapshot(), infos)
    request = LoadRequest(
        context_per_conversation=ctx,
        parallel=parallel,
        gpu_layers=gpu_layers,
        tensor_split=tuple(1.0 for _ in endpoints),
    )
    return plan_load(inspect_model(GEMMA), hardware, request)


def lost_main(ports: list[str]) -> int:
    """The child of the SIGKILL test: one JSON object per line on stdout. The split model
    itself runs in a grandchild (engine/model_process/process.py); this process is the parent
    whose window and other models must carry on."""
    import psutil
    from PySide6.QtCore import QCoreApplication, Qt

    from engine import GREEDY, ChatRequest, Engine, WorkerUnavailable
    from tests.conftest import plan_for

    app = QCoreApplication([])
    me = psutil.Process()

    def say(**fields: object) -> None:
        print(json.dumps(fields), flush=True)

    def answer(model, prompt: str = "The capital of France is") -> str:
        return model.submit(ChatRequest(prompt=prompt, sampling=GREEDY, max_tokens=8)).wait(120).text

    plan = split_plan([f"127.0.0.1:{p}" for p in ports])
    rss_before = me.memory_info().rss
    model = Engine.load(plan).wait_ready(300)
    rss_loaded = me.memory_info().rss
    child = model._executor.pid
    say(step="loaded", pid=child, rss_before=rss_before, rss_loaded=rss_loaded)
    direct = Qt.ConnectionType.DirectConnection
    lost_signal: list[str] = []
    unloaded_signal: list[bool] = []
    model.worker_lost.connect(lambda error: lost_signal.append(error.message))
    model.unloaded.connect(lambda: unloaded_signal.append(True), direct)
    handle = model.submit(
        ChatRequest(prompt="Once upon a time", sampling=GREEDY, max_tokens=4000, ignore_eos=True, cache=False)
    )
    first = None
    for event in handle.events():
        if type(event).__name__ == "TextDelta" and first is None:
            first = time.monotonic()
            say(step="generating")  # the test kills a worker now
        if type(event).__name__ in ("Completed", "Failed"):
            break
    failed_at = time.monotonic()
    error = handle.error
    deadline = time.monotonic() + 10
    while not unloaded_signal and time.monotonic() < deadline:  # emitted right after the failures
        time.sleep(0.05)
    say(
        step="failed",
        error_type=type(error).__name__ if error else None,
        message=error.message if error else None,
        is_worker_error=isinstance(error, WorkerUnavailable),
        seconds_to_fail=failed_at - (first or failed_at),
        failed_at=failed_at,  # CLOCK_MONOTONIC: the test's clock too
        text_len=len(handle.completion.text) if handle.completion else None,
        state=model.state.name,
        unloaded_signals=len(unloaded_signal),
        child_alive=psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE,
        rss_after=me.memory_info().rss,
    )
    # The model is gone: no more requests, unload returns at once.
    try:
        model.submit(ChatRequest(prompt="Hello", sampling=GREEDY, max_tokens=4))
        refused = None
    except Exception as exc:  # reported to the test
        refused = type(exc).__name__
    t = time.monotonic()
    model.unload()
    say(step="unloaded", refused=refused, lost=model.lost_worker, unload_seconds=time.monotonic() - t)
    # The surviving worker was freed when the child died: a new split model loads on it.
    survivor = Engine.load(split_plan([f"127.0.0.1:{ports[0]}"])).wait_ready(300)
    try:
        text = answer(survivor)
    finally:
        survivor.unload()
    say(step="survivor", text=text)
    # Another model, local only, still loads and answers in this same process.
    local = Engine.load(plan_for(GEMMA, ctx=512, parallel=1)).wait_ready(300)
    done = answer(local)
    local.unload()
    app.processEvents()  # deliver the queued worker_lost signal
    say(step="local", text=done, signals=len(lost_signal))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["lost"]:
        sys.exit(lost_main(sys.argv[2:]))
    sys.exit(2)
