"""`hearth plan … --worker`: the plan is made for this machine plus the worker's devices,
for a local file and for one on the Hub alike (one planning_hardware)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import run_cli
from tests.fake_hub import FakeHub
from tests.hub_fixtures import TINY_REPO
from tests.integration.rpc_workers import Worker, start_worker


@pytest.fixture(scope="module")
def worker() -> Iterator[Worker]:
    worker = start_worker()  # a real `hearth worker` on loopback, its CPU only
    yield worker
    worker.stop()


def _plan(capsys: pytest.CaptureFixture[str], tmp_path: Path, *argv: str) -> dict:
    code = run_cli(["--data-dir", str(tmp_path / "data"), "--models-dir", str(tmp_path / "models"),
                    "plan", *argv, "--json"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_plan_from_the_hub_with_a_worker_plans_with_its_devices(
    capsys, tmp_path: Path, fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch, worker: Worker
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", fake_hub.url)
    ref = f"hf://{TINY_REPO}/tiny-llama-Q8_0.gguf"
    alone = _plan(capsys, tmp_path, ref, "--gpu-layers", "2")
    with_worker = _plan(capsys, tmp_path, ref, "--gpu-layers", "2", "--worker", worker.endpoint)
    device = f"rpc:{worker.endpoint}#0"
    assert device not in alone["params"]["devices"]
    assert device in with_worker["params"]["devices"]  # before, the Hub's plan ignored --worker
    assert with_worker["params"]["n_gpu_layers"] == 2


def test_plan_of_a_local_file_with_a_worker_plans_with_its_devices(
    capsys, tmp_path: Path, tiny_model: Path, worker: Worker
) -> None:
    plan = _plan(capsys, tmp_path, str(tiny_model), "--gpu-layers", "1", "--worker", worker.endpoint)
    assert f"rpc:{worker.endpoint}#0" in plan["params"]["devices"]


def test_an_offline_worker_is_an_error_naming_it(capsys, tmp_path: Path, tiny_model: Path) -> None:
    from tests.integration.rpc_workers import free_port

    endpoint = f"127.0.0.1:{free_port()}"
    code = run_cli(["--data-dir", str(tmp_path / "d"), "plan", str(tiny_model), "--worker", endpoint])
    assert code == 2 and f"The worker at {endpoint} is offline" in capsys.readouterr().err
