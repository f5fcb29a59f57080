"""One answer to "which hardware do we plan for": this machine plus the workers that answered,
for the window, Discover, the context fix and the CLI."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.conversation.context_fix import context_fix
from app.platform.paths import AppPaths
from app.services.discover import DiscoverController
from app.services.planning import planning_hardware
from engine import LoadRequest, PromptSize, plan_load
from engine.machine.devices import RemoteDevice
from engine.machine.hardware import described_machine
from engine.rpc import parse_address
from engine.rpc.workers import WorkerInfo, WorkerState
from tests.engine.planner.test_planner import GIB, MIB, make_info
from tests.fake_hub import FakeHub
from tests.helpers import WAIT
from tests.hub_fixtures import TINY_REPO

SMALL_BOX = described_machine(ram_total=4 * GIB, ram_available=3 * GIB)


def worker(endpoint: str, free: int, state: WorkerState = WorkerState.ONLINE) -> WorkerInfo:
    address = parse_address(endpoint)
    return WorkerInfo(address, state, devices=(RemoteDevice(address.endpoint, 0, 32 * GIB, free),))


def test_this_machine_plus_the_workers_that_answered() -> None:
    online, offline = (
        worker("10.0.0.2:50052", 8 * GIB),
        worker("10.0.0.3:50052", 8 * GIB, WorkerState.OFFLINE),
    )
    hardware = planning_hardware(SMALL_BOX, [online, offline])
    assert hardware.remote_devices == online.devices
    assert planning_hardware(SMALL_BOX).remote_devices == ()
    # A snapshot that carried other workers' devices does not keep them.
    assert planning_hardware(hardware).remote_devices == ()
    assert planning_hardware(None).cpu_name  # None: a fresh snapshot of this machine


def test_the_context_fix_fits_with_the_workers_it_would_load_on() -> None:
    model = make_info(n_layer=32, block_bytes=60 * MIB, embd_bytes=200 * MIB, output_bytes=200 * MIB)
    workers = [worker("10.0.0.2:50052", 16 * GIB)]
    plan = plan_load(model, planning_hardware(SMALL_BOX, workers), LoadRequest(context_per_conversation=2048))
    assert plan.fits
    size = PromptSize(tokens=30000, limit=2048)
    _, alone = context_fix(plan, size, planning_hardware(SMALL_BOX))
    _, fix = context_fix(plan, size, planning_hardware(SMALL_BOX, workers))
    assert alone is None and fix is not None and fix.request.context_per_conversation == 32768


def test_discover_plans_for_this_machine_and_the_workers(
    qtbot, app_paths: AppPaths, fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", fake_hub.url)
    online = worker("10.0.0.2:50052", 8 * GIB)
    discover = DiscoverController(app_paths, SMALL_BOX, workers=lambda: [online])
    alone = DiscoverController(app_paths, SMALL_BOX)
    try:
        for controller in (discover, alone):
            controller.open_repo(TINY_REPO)
            qtbot.waitUntil(lambda c=controller: len(c.plans) == 2, timeout=WAIT)
        for quant in discover.plans.values():
            assert quant.plan.params.devices == ("rpc:10.0.0.2:50052#0",), quant.plan.params.devices
        for quant in alone.plans.values():
            assert quant.plan.params.devices == ()
    finally:
        discover.shutdown()
        alone.shutdown()


def test_workers_and_the_window_ask_the_same_function(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from app.services.workers import WorkerRegistry

    registry = WorkerRegistry(tmp_path / "workers.json")
    hardware = replace(SMALL_BOX, remote_devices=worker("10.0.0.9:50052", GIB).devices)
    assert registry.hardware(hardware) == planning_hardware(SMALL_BOX, registry.workers)
