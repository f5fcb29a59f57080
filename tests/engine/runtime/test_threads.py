"""CPU threads: other programs' load measured apart from ours, the planner's choice from the
cores they leave free, the user's setting over it, and the threads llama.cpp really runs."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from engine.catalog import inspect_model
from engine.chat import ChatMessage
from engine.loaded_model import Engine
from engine.machine.cpu_load import (
    CpuContention,
    CpuMeter,
    CpuReading,
    contention,
    cores_taken,
    share_between,
)
from engine.machine.hardware import described_machine, take_snapshot, with_cpu_load
from engine.machine.telemetry import Telemetry
from engine.planner import MAX_THREADS, InvalidLoadRequest, LoadRequest, plan_load
from engine.requests.completion import StopReason
from engine.requests.request import ChatRequest
from engine.sampling.params import GREEDY
from tests.conftest import plan_for

TIMEOUT = 60


class FakeClock:
    """Readings a test scripts: ``advance`` moves time and both CPU clocks."""

    def __init__(self) -> None:
        self.at, self.busy, self.ours = 100.0, 1000.0, 10.0

    def read(self) -> CpuReading:
        return CpuReading(self.at, self.busy, self.ours)

    def advance(self, seconds: float, total_cpus: float, our_cpus: float) -> None:
        self.at += seconds
        self.busy += seconds * total_cpus
        self.ours += seconds * our_cpus


@pytest.fixture()
def hog():
    """Another program keeping one core busy, as a user's compile or video call would."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    # Spinning, not still starting: an interpreter's start-up takes seconds on a loaded machine.
    spinner = psutil.Process(proc.pid)
    deadline = time.monotonic() + 30
    while spinner.cpu_times().user < 0.3 and time.monotonic() < deadline:
        time.sleep(0.05)
    yield proc
    proc.kill()
    proc.wait()


# -- measuring ----------------------------------------------------------------------------


def test_a_share_is_ours_apart_from_every_other_program() -> None:
    clock = FakeClock()
    before = clock.read()
    clock.advance(2.0, total_cpus=1.9, our_cpus=0.1)
    share = share_between(before, clock.read(), cpus=2)
    assert share is not None
    assert share.total == pytest.approx(1.9) and share.ours == pytest.approx(0.1)
    assert share.others == pytest.approx(1.8)
    assert share.percent(share.total) == pytest.approx(95.0)
    # The clocks round differently: ours a hair above the total is no one else at all.
    clock.advance(1.0, total_cpus=0.5, our_cpus=0.52)
    assert share_between(before, clock.read(), cpus=2).others >= 0.0
    # Too close together to tell anything.
    now = clock.read()
    clock.advance(0.05, 2.0, 0.0)
    assert share_between(now, clock.read(), cpus=2) is None


def test_the_meter_smooths_other_programs_load() -> None:
    clock = FakeClock()
    meter = CpuMeter(0.0, read=clock.read, cpus=2)
    clock.advance(0.5, total_cpus=2.0, our_cpus=0.0)  # a short burst
    meter.sample()
    assert 0.0 < meter.others < 0.2
    for _ in range(15):  # then another program keeps a core busy for 30 s
        clock.advance(2.0, total_cpus=1.05, our_cpus=0.05)
        meter.sample()
    assert meter.others == pytest.approx(1.0, abs=0.05)
    clock.advance(0.01, 2.0, 0.0)
    assert meter.sample() is None  # too soon: nothing reset
    assert meter.latest is not None and meter.latest.seconds == pytest.approx(2.0)


def test_a_core_counts_as_taken_once_most_of_it_is_busy() -> None:
    assert [cores_taken(x, 4) for x in (0.0, 0.45, 0.5, 1.0, 1.49, 1.5, 9.0)] == [0, 0, 1, 1, 1, 2, 4]


def test_contention_is_threads_without_a_core_of_their_own() -> None:
    share = share_between(CpuReading(0, 0, 0), CpuReading(4, 4.4, 4.0), cpus=2)  # others 0.1
    assert contention(share, cores=2, threads=2) == CpuContention(4.0, pytest.approx(0.1), 1.0, 2, 2)
    assert not contention(share, cores=2, threads=2).slowed
    busy = CpuContention(4.0, others=1.0, ours=1.0, cores=2, threads=2)
    assert busy.slowed and busy.free_cores == 1
    assert not replace(busy, threads=1).slowed  # one thread, one free core: full speed
    assert contention(None, 2, 2) is None


def test_a_snapshot_sees_another_program_keep_a_core_busy(hog: subprocess.Popen) -> None:
    snapshot = take_snapshot(cpu_window=0.5)
    assert snapshot.this_machine
    assert snapshot.cpu_busy_elsewhere >= 0.5  # the hog (and whatever else runs here)
    assert take_snapshot(cpu_window=0).cpu_busy_elsewhere == 0.0  # not measured
    assert not described_machine().this_machine


def test_telemetry_tells_hearth_from_other_programs() -> None:
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    with Telemetry() as telemetry:
        telemetry.sample()
        worker = threading.Thread(target=spin)
        worker.start()
        try:
            time.sleep(0.6)
            sample = telemetry.sample()
        finally:
            stop.set()
            worker.join()
    assert sample.hearth_cpu_percent is not None and sample.others_cpu_percent is not None
    assert sample.hearth_cpu_percent >= 5.0  # this process spun a thread the whole time
    assert sample.hearth_cpu_percent + sample.others_cpu_percent == pytest.approx(sample.cpu_percent)


# -- planning -------------------------------------------------------------------------------


def smt_machine(cores: int, logical: int, busy: float = 0.0):
    return replace(described_machine(cores=cores), logical_cores=logical, cpu_busy_elsewhere=busy)


def test_the_planner_takes_a_thread_per_physical_core(tiny_model: Path) -> None:
    info = inspect_model(tiny_model)
    plan = plan_load(info, smt_machine(4, 8), LoadRequest())
    assert plan.params.n_threads == plan.params.n_threads_batch == 4  # not 8 hyper-threads
    assert not any("Threads" in r for r in plan.reasons)


def test_a_busy_machine_gets_fewer_threads(tiny_model: Path) -> None:
    info = inspect_model(tiny_model)
    plan = plan_load(info, described_machine(cores=2, cpu_busy_elsewhere=1.0), LoadRequest())
    assert plan.params.n_threads == plan.params.n_threads_batch == 1
    assert "Threads 1 of 2 cores: other programs keep 1 core of 2 busy." in plan.reasons
    # A short burst is not a busy core; a machine all busy still gets one thread.
    assert plan_load(info, smt_machine(8, 16, busy=0.4), LoadRequest()).params.n_threads == 8
    assert plan_load(info, smt_machine(8, 16, busy=2.7), LoadRequest()).params.n_threads == 5
    all_busy = described_machine(cores=2, cpu_busy_elsewhere=5.0)
    assert plan_load(info, all_busy, LoadRequest()).params.n_threads == 1
    # The load measured later replaces the snapshot's.
    idle = described_machine(cores=2)
    assert with_cpu_load(idle, 0.0) is idle
    assert plan_load(info, with_cpu_load(idle, 1.2), LoadRequest()).params.n_threads == 1


def test_the_users_setting_wins_and_the_plan_says_what_it_costs(tiny_model: Path) -> None:
    info = inspect_model(tiny_model)
    busy = described_machine(cores=2, cpu_busy_elsewhere=1.0)
    own = plan_load(info, busy, LoadRequest(threads=2, default_threads=1))
    assert own.params.n_threads == own.params.n_threads_batch == 2
    assert (
        "Threads 2 (your setting): other programs keep 1 core of 2 busy; 1 would be faster while they run."
        in own.reasons
    )
    default = plan_load(info, busy, LoadRequest(default_threads=2))
    assert default.params.n_threads == 2
    assert any("(the default in Settings)" in r for r in default.reasons)
    many = plan_load(info, described_machine(cores=2), LoadRequest(threads=8))
    assert many.params.n_threads == 8
    assert any(r.startswith("Threads 8 (your setting) on 2 cores") for r in many.reasons)
    # A one-click fix keeps the thread settings it was made from.
    assert all(s.request.threads == 8 for s in many.suggestions)


@pytest.mark.parametrize("field", ["threads", "default_threads"])
@pytest.mark.parametrize("value", [0, -1, MAX_THREADS + 1])
def test_threads_out_of_range_are_refused(tiny_model: Path, field: str, value: int) -> None:
    with pytest.raises(InvalidLoadRequest, match=f"hreads must be 1 to {MAX_THREADS}"):
        plan_load(inspect_model(tiny_model), described_machine(), LoadRequest(**{field: value}))


# -- running ----------------------------------------------------------------------------------


def test_a_model_loaded_with_one_thread_computes_with_one(looping_model: Path) -> None:
    import llama_cpp

    model = Engine.load(plan_for(looping_model, ctx=4096, parallel=1, threads=1)).wait_ready(TIMEOUT)
    try:
        ctx = model._executor._native.ctx
        assert llama_cpp.llama_n_threads(ctx) == 1
        assert llama_cpp.llama_n_threads_batch(ctx) == 1
        # Long enough for the CPU clocks to say something: one thread keeps one core busy.
        request = ChatRequest(messages=(ChatMessage("user", "go on"),), sampling=GREEDY, max_tokens=3500)
        completion = model.submit(request).wait(TIMEOUT)
    finally:
        model.unload()
    assert completion.stop_reason in (StopReason.LENGTH, StopReason.CONTEXT_FULL)
    cpu = completion.cpu
    assert cpu is not None and cpu.threads == 1 and cpu.seconds > 0
    assert cpu.ours <= 1.3  # one compute thread (the executor's own) and a little Python


def test_a_reply_under_another_programs_load_says_it_was_slowed(
    looping_model: Path, hog: subprocess.Popen
) -> None:
    cores = take_snapshot(cpu_window=0).physical_cores
    model = Engine.load(plan_for(looping_model, ctx=4096, parallel=1, threads=cores)).wait_ready(TIMEOUT)
    try:
        # Long enough to be measured (a reply under 0.2 s has no CPU reading) on any machine.
        request = ChatRequest(messages=(ChatMessage("user", "go on"),), sampling=GREEDY, max_tokens=1500)
        completion = model.submit(request).wait(TIMEOUT)
    finally:
        model.unload()
    cpu = completion.cpu
    assert cpu is not None and cpu.threads == cores, completion.timings
    assert cpu.others >= 0.5  # the hog's core, and whatever else this machine runs
    assert cpu.slowed, cpu
