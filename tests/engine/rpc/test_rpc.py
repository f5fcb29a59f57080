"""RPC workers without a worker: addresses, the worker's refusals, the abort guard's filter,
and worker devices in plans (pure; the loopback tests are tests/integration/test_rpc_workers.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from engine.machine.devices import RemoteDevice
from engine.machine.hardware import described_machine
from engine.planner import InvalidLoadRequest, LoadPhase, LoadRequest, Verdict, describe_plan, plan_load
from engine.rpc import parse_address
from engine.rpc.endpoint import InvalidAddress, WorkerAddress
from engine.rpc.guard import is_rpc_abort
from engine.rpc.server import WorkerConfig, WorkerRefused, check_config, choose_devices
from engine.rpc.workers import WorkerInfo, WorkerState, with_workers
from tests.engine.planner.test_planner import GIB, MIB, make_info


def test_addresses_are_host_and_port_with_the_default_port() -> None:
    assert parse_address("192.168.1.20") == WorkerAddress("192.168.1.20", 50052)
    assert parse_address(" box.lan:6000 ").endpoint == "box.lan:6000"
    assert parse_address("127.0.0.1:1").is_loopback and parse_address("localhost:2").is_loopback
    assert not parse_address("10.0.0.1:50052").is_loopback
    for bad in ("", "host:", "host:abc", "host:0", "host:70000", "::1", "a b:1"):
        with pytest.raises(InvalidAddress):
            parse_address(bad)  # ggml-rpc would abort the process on an endpoint it cannot parse


def test_a_worker_on_a_network_address_needs_allow_network() -> None:
    with pytest.raises(WorkerRefused, match="--allow-network"):
        check_config(WorkerConfig(WorkerAddress("0.0.0.0", 50052)))
    check_config(WorkerConfig(WorkerAddress("0.0.0.0", 50052), allow_network=True))
    check_config(WorkerConfig(WorkerAddress("127.0.0.1", 50052)))
    with pytest.raises(WorkerRefused, match="threads"):
        check_config(WorkerConfig(WorkerAddress("127.0.0.1", 50052), threads=0))


@dataclass(frozen=True)
class Dev:
    name: str


def test_a_worker_serves_the_named_devices_else_the_gpus_else_the_cpu() -> None:
    devices = (Dev("CPU"), Dev("CUDA0"), Dev("CUDA1"), Dev("RPC0"))
    assert choose_devices(devices, ["cpu"]) == (Dev("CPU"),)
    assert choose_devices(devices, []) == (Dev("CUDA0"), Dev("CUDA1"))  # never another worker's
    assert choose_devices((Dev("CPU"),), []) == (Dev("CPU"),)
    with pytest.raises(WorkerRefused, match="Vulkan0"):
        choose_devices(devices, ["Vulkan0"])


def test_only_ggml_rpcs_own_aborts_are_contained() -> None:
    assert is_rpc_abort("ggml-rpc.cpp:569: Remote RPC server crashed or returned malformed response")
    assert is_rpc_abort("ggml-rpc.cpp:547: Failed to connect to 10.0.0.2:50052")
    assert not is_rpc_abort("ggml.c:1234: GGML_ASSERT(n_tokens <= n_batch) failed")


def worker(endpoint: str, free: int, total: int = 32 * GIB) -> WorkerInfo:
    address = parse_address(endpoint)
    return WorkerInfo(address, WorkerState.ONLINE, devices=(RemoteDevice(address.endpoint, 0, total, free),))


MODEL = make_info(n_layer=32, block_bytes=200 * MIB)  # 8B-like: 6.4 GiB of blocks, 1 GiB embd+output
SMALL_BOX = described_machine(ram_total=4 * GIB, ram_available=3 * GIB)


def test_a_model_too_big_for_one_box_fits_across_three_machines() -> None:
    alone = plan_load(MODEL, SMALL_BOX, LoadRequest(context_per_conversation=4096))
    assert alone.verdict is Verdict.DOES_NOT_FIT
    hardware = with_workers(SMALL_BOX, [worker("10.0.0.2:50052", 8 * GIB), worker("10.0.0.3:50052", 4 * GIB)])
    plan = plan_load(MODEL, hardware, LoadRequest(context_per_conversation=4096))
    assert plan.fits and plan.machines == 3 and plan.headline.endswith("across 3 machines")
    assert plan.params.n_gpu_layers == 33  # every block and the output: the workers have room
    assert plan.params.devices == ("rpc:10.0.0.2:50052#0", "rpc:10.0.0.3:50052#0")
    assert plan.params.tensor_split == (8192.0, 4096.0)  # by free memory (MiB)
    assert plan.workers == ("10.0.0.2:50052", "10.0.0.3:50052")
    assert plan.phases[:3] == (LoadPhase.VALIDATE, LoadPhase.WORKERS, LoadPhase.WEIGHTS)
    _cpu, a, b = plan.memory
    assert (a.device, b.device) == ("worker 10.0.0.2:50052", "worker 10.0.0.3:50052")
    assert a.weights == pytest.approx(2 * b.weights, rel=0.15)  # two thirds of the layers on the first
    assert a.kv_cache > 0 and b.kv_cache > 0 and a.compute > 0 and b.compute > 0
    # The hidden state crosses to the first worker, to the second, and the logits come back.
    assert plan.network_bytes_per_token >= 2 * 4096 * 4 + 128256 * 4
    assert any("Split across 3 machines" in r and "cross the network per token" in r for r in plan.reasons)
    assert any(r.startswith("All 33 layers") and "on 2 workers" in r for r in plan.reasons)
    assert describe_plan(plan)[0] == "Test 8B: fits across 3 machines"


def test_a_given_split_places_the_layers_and_a_wrong_one_is_refused() -> None:
    hardware = with_workers(SMALL_BOX, [worker("10.0.0.2:50052", 8 * GIB), worker("10.0.0.3:50052", 8 * GIB)])
    plan = plan_load(MODEL, hardware, LoadRequest(tensor_split=(1.0, 3.0)))
    _, a, b = plan.memory
    assert b.weights > 2.5 * a.weights
    with pytest.raises(InvalidLoadRequest, match="one share"):
        plan_load(MODEL, hardware, LoadRequest(tensor_split=(1.0,)))
    with pytest.raises(InvalidLoadRequest, match="no device"):
        plan_load(MODEL, hardware, LoadRequest(tensor_split=(0.0, 0.0)))


def test_a_worker_short_of_memory_is_named_as_the_limit() -> None:
    hardware = with_workers(SMALL_BOX, [worker("10.0.0.2:50052", 1 * GIB)])
    plan = plan_load(MODEL, hardware, LoadRequest(gpu_layers=33))
    assert plan.verdict is Verdict.DOES_NOT_FIT
    assert plan.limiting_resource == "memory on worker 10.0.0.2:50052"


def test_offline_workers_and_no_workers_plan_as_before() -> None:
    down = WorkerInfo(parse_address("10.0.0.2:50052"), WorkerState.OFFLINE, reason="nothing listens")
    hardware = with_workers(SMALL_BOX, [down])
    assert hardware.remote_devices == ()
    plain = plan_load(MODEL, SMALL_BOX, LoadRequest())
    assert plan_load(MODEL, hardware, LoadRequest()) == plain
    assert plain.machines == 1 and plain.params.devices == () and LoadPhase.WORKERS not in plain.phases
    assert replace(SMALL_BOX).remote_devices == ()
