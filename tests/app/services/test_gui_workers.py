"""RPC workers in the window: Add worker…, remembered, offline with the reason, the dashboard
lines; the planner sees the devices of those that answer. No worker process runs here (the
loopback tests with real `hearth worker` processes are tests/integration/test_rpc_workers.py)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from app.services.workers import WorkerRegistry
from app.widgets.workers_panel import WorkersPanel, describe_worker
from app.window.main_window import MainWindow
from engine import RemoteDevice, WorkerAddress, WorkerInfo, WorkerState, parse_worker_address

GIB = 1024**3


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def online(address: WorkerAddress) -> WorkerInfo:
    device = RemoteDevice(address.endpoint, 0, memory_total=16 * GIB, memory_free=12 * GIB)
    return WorkerInfo(address, WorkerState.ONLINE, devices=(device,), rtt_ms=0.4)


def test_a_worker_is_remembered_probed_off_the_gui_thread_and_planned_with(
    qtbot, tmp_path: Path, hardware
) -> None:
    path = tmp_path / "workers.json"
    registry = WorkerRegistry(path, probe=online, ping=lambda a: (0.5, ""))
    with qtbot.waitSignal(registry.changed):
        registry.add("192.168.1.20")  # the default port
    qtbot.waitUntil(lambda: registry.workers[0].online)
    assert json.loads(path.read_text()) == {"workers": ["192.168.1.20:50052"]}
    planned = registry.hardware(hardware)
    assert [d.key for d in planned.remote_devices] == ["rpc:192.168.1.20:50052#0"]
    again = WorkerRegistry(path, probe=online)
    assert [w.address for w in again.workers] == [parse_worker_address("192.168.1.20:50052")]
    assert not again.workers[0].online  # remembered, not yet checked: nothing is planned on it
    assert again.hardware(hardware).remote_devices == ()
    again.remove(again.workers[0].address)
    assert json.loads(path.read_text()) == {"workers": []}


def test_worker_lines_say_memory_and_round_trip_or_why_offline(qtbot) -> None:
    address = parse_worker_address("10.0.0.5:50052")
    assert describe_worker(online(address)) == (
        "10.0.0.5:50052 — online · 1 device · 12.0 GiB free of 16.0 GiB · 0.4 ms round trip"
    )
    down = WorkerInfo(address, WorkerState.OFFLINE, reason="nothing listens at 10.0.0.5:50052")
    assert describe_worker(down) == "10.0.0.5:50052 — offline: nothing listens at 10.0.0.5:50052"
    panel = WorkersPanel(can_add=False)
    qtbot.addWidget(panel)
    panel.set_workers((online(address), down))
    assert [label.property("online") for label in panel.labels] == [True, False]
    assert panel.add_button.isHidden() and panel.empty.isHidden()


def test_add_worker_in_the_window_shows_an_unreachable_one_offline(qtbot, window: MainWindow) -> None:
    panel = window.hardware_panel.workers
    assert panel.add_button.text() == "Add worker…" and not panel.add_button.isHidden()
    port = unused_port()
    window.add_worker(f"127.0.0.1:{port}")
    qtbot.waitUntil(
        lambda: bool(panel.labels) and "nothing listens" in panel.labels[0].text(), timeout=10_000
    )
    assert panel.labels[0].text().startswith(f"127.0.0.1:{port} — offline")
    assert json.loads(window.paths.workers_file.read_text()) == {"workers": [f"127.0.0.1:{port}"]}
    window.add_worker("not a host:port:at all")
    assert "host:port" in window.status_label.text() or "port" in window.status_label.text()
    window._ensure_dashboard(True)
    assert window.dashboard is not None
    assert window.dashboard.workers_panel.labels[0].text() == panel.labels[0].text()


def test_a_worker_the_loaded_model_uses_is_pinged_never_probed(qtbot, tmp_path: Path) -> None:
    probed: list[WorkerAddress] = []

    def probe(address: WorkerAddress) -> WorkerInfo:
        probed.append(address)
        return online(address)

    registry = WorkerRegistry(tmp_path / "workers.json", probe=probe, ping=lambda a: (0.7, ""))
    registry.set_in_use(["10.0.0.9:50052"])  # llama.cpp's server would not answer a second client
    registry.add("10.0.0.9:50052")
    registry.ping_all()
    qtbot.wait(200)
    assert probed == []
    registry.set_in_use(())
    registry.probe(parse_worker_address("10.0.0.9:50052"))
    qtbot.waitUntil(lambda: registry.workers[0].online)
    assert probed == [parse_worker_address("10.0.0.9:50052")]
