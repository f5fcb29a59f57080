"""llama.cpp RPC workers on loopback: two ``hearth worker`` processes, each restricted to its
CPU, and Gemma split across this process's CPU and both of them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest
from PySide6.QtCore import Qt

from engine import GREEDY, ChatRequest, Engine, LoadedModel, parse_worker_address, probe_worker
from engine.planner import LoadPhase
from tests.conftest import plan_for
from tests.integration.rpc_workers import GEMMA, REPO, Worker, free_port, split_plan, start_worker

pytestmark = pytest.mark.gemma

TIMEOUT = 300
TOLERANCE = 0.10
ROUNDING = int(0.006 * 1024 * 1024)  # llama.cpp prints MiB with two decimals
PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time, in a small village,"]
TOKENS = 32


@pytest.fixture(scope="module")
def workers() -> Iterator[list[Worker]]:
    started = [start_worker(), start_worker()]
    yield started
    for w in started:
        w.stop()


def greedy_tokens(model: LoadedModel) -> list[tuple[int, ...]]:
    out = []
    for prompt in PROMPTS:
        request = ChatRequest(prompt=prompt, sampling=GREEDY, max_tokens=TOKENS, ignore_eos=True, cache=False)
        out.append(tuple(model.submit(request).wait(TIMEOUT).tokens))
    return out


def test_a_worker_prints_its_devices_and_memory(workers: list[Worker]) -> None:
    for w in workers:
        assert f"serving at {w.endpoint}" in w.banner
        assert "CPU:" in w.banner and "free of" in w.banner
        assert "no authentication" not in w.banner  # loopback: no warning needed


def test_a_network_address_needs_allow_network_and_warns() -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "app", "worker", "--host", "0.0.0.0", "--port", str(free_port())],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "--allow-network" in refused.stderr and "no authentication" in refused.stderr
    allowed = start_worker(None, "--host", "0.0.0.0", "--allow-network")
    try:
        assert "warning:" in allowed.banner and "no authentication" in allowed.banner
    finally:
        out = allowed.stop()
    assert allowed.process.returncode == 0 and "stopped (SIGTERM)" in out


def test_sigterm_ends_a_worker_cleanly() -> None:
    w = start_worker()
    t = time.monotonic()
    out = w.stop()
    assert w.process.returncode == 0, out
    assert "stopped (SIGTERM)" in out and time.monotonic() - t < 5


def test_an_unreachable_worker_is_offline_with_the_reason() -> None:
    info = probe_worker(parse_worker_address(f"127.0.0.1:{free_port()}"))
    assert not info.online and "nothing listens" in info.reason


def test_a_worker_is_probed_without_touching_this_process(workers: list[Worker]) -> None:
    info = probe_worker(parse_worker_address(workers[0].endpoint))
    assert info.online and len(info.devices) == 1
    assert info.devices[0].memory_total > 0 and info.rtt_ms is not None and info.rtt_ms < 100


def test_the_plan_places_layers_across_three_machines(workers: list[Worker]) -> None:
    plan = split_plan([w.endpoint for w in workers])
    assert plan.machines == 3 and plan.headline.endswith("across 3 machines")
    assert LoadPhase.WORKERS in plan.phases
    assert [m.device for m in plan.memory] == ["CPU", *(f"worker {w.endpoint}" for w in workers)]
    # 12 of 19 positions offloaded, 6 per worker; the output layer (a copy of the tied
    # embeddings) is on the last worker, so its logits come back over the network.
    assert plan.network_bytes_per_token >= 262_144 * 4
    assert any("cross the network per token" in r for r in plan.reasons)


def test_split_over_two_workers_matches_local_and_the_plan(workers: list[Worker]) -> None:
    local = Engine.load(plan_for(GEMMA, ctx=1024, parallel=1)).wait_ready(TIMEOUT)
    try:
        expected = greedy_tokens(local)
    finally:
        local.unload()

    plan = split_plan([w.endpoint for w in workers])
    phases: list[LoadPhase] = []
    progress: list[tuple[LoadPhase, float]] = []
    # Constructed, connected, then started, as the window does (model_session.py): the
    # phases come from the child process that runs the split model, none is missed.
    split = Engine.load(plan, start=False)
    direct = Qt.ConnectionType.DirectConnection
    split.phase_started.connect(phases.append, direct)
    split.phase_progress.connect(lambda phase, fraction: progress.append((phase, fraction)), direct)
    split.start().wait_ready(TIMEOUT)
    child = split._executor.pid  # type: ignore[union-attr]
    try:
        assert child is not None and child != os.getpid()
        got = greedy_tokens(split)
        reported = split.reported_memory
    finally:
        split.unload()
    assert phases == list(plan.phases) and LoadPhase.WORKERS in phases, phases
    worker_progress = [f for phase, f in progress if phase is LoadPhase.WORKERS]
    assert worker_progress[:3] == [0.0, 0.5, 1.0], progress  # a step per worker ("Connect to workers")
    assert split.state.name == "UNLOADED" and not psutil.pid_exists(child)

    # The workers multiply with ggml's plain CPU kernels, this process with its repacked
    # (CPU_REPACK) ones: the same numbers up to float rounding, so greedy output matches
    # token for token, or else differs only after a near tie (the concurrency tests' margin).
    from tests.integration.test_engine_gemma import LOGIT_MARGIN, _solo_margins

    exact = sum(want == have for want, have in zip(expected, got, strict=True))
    print(f"split vs local greedy: {exact}/{len(PROMPTS)} prompts equal token for token ({TOKENS} tokens)")
    for prompt, want, have in zip(PROMPTS, expected, got, strict=True):
        if want == have:
            continue
        first = next(i for i, (a, b) in enumerate(zip(want, have, strict=True)) if a != b)
        margins = _solo_margins(GEMMA, prompt, have[: first + 1])
        print(f"{prompt!r}: differs from token {first}, the split's token {margins[first]:.3f} logits short")
        assert margins[first] <= LOGIT_MARGIN, f"{prompt!r}: split output lost by {margins[first]:.3f}"

    # The plan against llama.cpp's own buffer sizes, per device, within 10%.
    assert reported is not None
    for memory in plan.memory:
        if memory.device == "CPU":
            weights = reported.model.get("CPU_Mapped", 0) + reported.model.get("CPU_REPACK", 0)
            kv, compute = reported.kv.get("CPU", 0), reported.compute.get("CPU", 0)
            predicted = memory.weights + memory.repack + memory.kv_cache + memory.compute
        else:
            endpoint = memory.device.removeprefix("worker ")
            name = next(k for k in reported.model if k.endswith(f"[{endpoint}]"))
            weights, kv, compute = (
                reported.model[name],
                reported.kv.get(name, 0),
                reported.compute.get(name, 0),
            )
            predicted = memory.total
        actual = weights + kv + compute
        assert abs(predicted - actual) <= TOLERANCE * actual + ROUNDING, (
            f"{memory.device}: planned {predicted}, llama.cpp reported {actual} "
            f"(weights {weights}, kv {kv}, compute {compute}) vs {memory}"
        )
        for part, (p, r) in {
            "weights": (memory.weights + memory.repack, weights),
            "kv": (memory.kv_cache, kv),
        }.items():
            assert abs(p - r) <= TOLERANCE * r + ROUNDING, (
                f"{memory.device} {part}: planned {p}, reported {r}"
            )


def test_a_worker_killed_mid_reply_fails_the_reply_and_nothing_else() -> None:
    a, b = start_worker(), start_worker()
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.rpc_workers", "lost", str(a.port), str(b.port)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "GGML_NO_BACKTRACE": "1"},  # an abort would print gdb's trace on stdout
    )
    killed_at = 0.0
    try:
        assert child.stdout is not None
        steps: dict[str, dict] = {}
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            event = json.loads(line)
            steps[event["step"]] = event
            if event["step"] == "generating":
                time.sleep(0.3)
                b.process.send_signal(signal.SIGKILL)
                killed_at = time.monotonic()
            if event["step"] == "local":
                break
        rc = child.wait(timeout=60)
        stderr = child.stderr.read() if child.stderr else ""
    finally:
        if child.poll() is None:
            child.kill()
        a.stop()
        b.process.kill()
    assert "failed" in steps, f"no failure reported (rc {child.returncode}): {stderr[-2000:]}"
    loaded, failed = steps["loaded"], steps["failed"]
    assert failed["is_worker_error"], failed
    assert b.endpoint in failed["message"] and "Lost the worker" in failed["message"]
    assert a.endpoint not in failed["message"]  # the survivor still answers a ping
    seconds = failed["failed_at"] - killed_at
    print(f"SIGKILL of {b.endpoint} -> the reply failed after {seconds:.2f} s: {failed['message']}")
    # Measured 0.05 s on a quiet machine; the bound leaves room for a starved CPU (these
    # processes run under nice 19 beside benchmarks).
    assert 0 < seconds < 10
    # The model unloaded cleanly: signalled, its process gone, its memory never in this one.
    assert failed["state"] == "UNLOADED" and failed["unloaded_signals"] == 1
    assert not failed["child_alive"]
    grown = max(loaded["rss_loaded"], failed["rss_after"]) - loaded["rss_before"]
    print(f"this process grew {grown / 2**20:.1f} MiB while the split model was loaded in its child")
    assert grown < 48 * 2**20, "the split model's memory is the child's, not this process's"
    unloaded = steps["unloaded"]
    assert unloaded["lost"] and unloaded["refused"] == "LoadFailed" and unloaded["unload_seconds"] < 1
    assert steps["survivor"]["text"], "the surviving worker serves a new split model"
    assert steps["local"]["text"], "a local model loads and answers in the same process afterwards"
    assert steps["local"]["signals"] == 1
    assert rc == 0, f"the process did not exit cleanly (rc {rc}): {stderr[-2000:]}"


def test_hearth_plan_with_workers_prints_the_split(workers: list[Worker]) -> None:
    args = [sys.executable, "-m", "app", "plan", str(GEMMA), "--ctx", "1024", "--gpu-layers", "12", "--json"]
    for w in workers:
        args += ["--worker", w.endpoint]
    done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["machines"] == 3 and plan["network_bytes_per_token"] > 0
    assert [m["device"] for m in plan["memory"]] == ["CPU", *(f"worker {w.endpoint}" for w in workers)]
    offline = subprocess.run(
        [sys.executable, "-m", "app", "plan", str(GEMMA), "--worker", f"127.0.0.1:{free_port()}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert offline.returncode == 2 and "offline: nothing listens" in offline.stderr


def test_hearth_chat_with_workers_answers(workers: list[Worker]) -> None:
    args = [sys.executable, "-m", "app", "chat", str(GEMMA), "The capital of France is", "--temp", "0"]
    args += ["--max-tokens", "8", "--ctx", "512", "--gpu-layers", "12", "--json"]
    for w in workers:
        args += ["--worker", w.endpoint]
    done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    reply = json.loads(done.stdout)  # the model's process printed nothing on this stdout
    assert reply["text"] and 1 <= reply["usage"]["completion_tokens"] <= 8


def test_a_worker_whose_port_is_taken_says_so_and_exits(workers: list[Worker]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app", "worker", "--port", str(workers[0].port), "--devices", "CPU"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "could not serve" in done.stdout and "Failed to create server socket" in done.stderr


def test_the_window_session_drops_a_model_whose_worker_died_and_loads_the_next(qtbot) -> None:
    """What the window sees (app/services/model_session.py), in this very process: the RPC client
    runs in the model's child, so a lost worker cannot take the test run with it."""
    from app.services.model_session import ModelSession
    from app.state.session import SessionState
    from engine import WorkerUnavailable

    a, b = start_worker(), start_worker()
    session = ModelSession()
    failures: list = []
    session.load_failed.connect(failures.append)
    try:
        session.load(split_plan([a.endpoint, b.endpoint]))
        qtbot.waitUntil(lambda: session.state is SessionState.READY, timeout=TIMEOUT * 1000)
        model = session.model
        assert model is not None
        deltas: list = []
        handle = model.submit(
            ChatRequest(prompt="Once upon a time", sampling=GREEDY, max_tokens=4000, ignore_eos=True),
            connect=lambda h: h.text_delta.connect(deltas.append),
        )
        qtbot.waitUntil(lambda: bool(deltas), timeout=TIMEOUT * 1000)
        b.process.kill()
        qtbot.waitUntil(lambda: session.state is SessionState.FAILED, timeout=15_000)
        assert session.model is None and len(failures) == 1 and isinstance(failures[0], WorkerUnavailable)
        # what streamed stays
        assert isinstance(handle.error, WorkerUnavailable) and "".join(d.text for d in deltas)
        assert model.lost_worker and model.state.name == "UNLOADED"
        session.load(plan_for(GEMMA, ctx=512, parallel=1))
        qtbot.waitUntil(lambda: session.state is SessionState.READY, timeout=TIMEOUT * 1000)
        assert session.model is not None
        request = ChatRequest(prompt="The capital of France is", sampling=GREEDY, max_tokens=8)
        assert session.model.submit(request).wait(TIMEOUT).text
    finally:
        session.unload()
        a.stop()
        b.process.kill()
