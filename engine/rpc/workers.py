"""What Hearth knows about a worker: reachable or not (and why), its devices and memory, the
round-trip time. Asked in a child process, never in Hearth's own.

ggml-rpc aborts the whole process when it cannot connect to a worker or loses one
(GGML_ABORT in rpc_dispatcher::start and rpc_dispatcher::work, vendored
ggml/src/ggml-rpc/ggml-rpc.cpp), so the first contact with a worker — registering it,
reading its devices and memory — runs in a child (``engine.rpc.probe``): a worker that is
down costs that child, and the answer is "offline" with the reason.
"""

from __future__ import annotations

import enum
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

from engine.machine.devices import RemoteDevice
from engine.machine.hardware import HardwareSnapshot
from engine.rpc.endpoint import WorkerAddress

PROBE_FLAG = "--rpc-probe"  # `hearth --rpc-probe ENDPOINT` runs probe.child_main() in a bundle
PROBE_TIMEOUT_S = 20.0
PING_TIMEOUT_S = 3.0
# GGML_ABORT would otherwise attach gdb to print a backtrace (engine/native/probe.py).
CHILD_ENV = {"GGML_NO_BACKTRACE": "1"}


class WorkerState(enum.Enum):
    ONLINE = "online"
    OFFLINE = "offline"


@dataclass(frozen=True)
class WorkerInfo:
    address: WorkerAddress
    state: WorkerState
    devices: tuple[RemoteDevice, ...] = ()
    reason: str = ""  # why it is offline, one line
    rtt_ms: float | None = None  # TCP connect time: the network's round trip, not llama.cpp's work
    checked_at: float = 0.0  # time.time() of the answer

    @property
    def online(self) -> bool:
        return self.state is WorkerState.ONLINE

    @property
    def memory_free(self) -> int:
        return sum(d.memory_free for d in self.devices)

    @property
    def memory_total(self) -> int:
        return sum(d.memory_total for d in self.devices)


def ping(address: WorkerAddress, timeout: float = PING_TIMEOUT_S) -> tuple[float | None, str]:
    """(round trip in ms, "") when something listens at the address, else (None, why).

    A TCP connect only: the worker's kernel completes it even while the worker serves
    another client (llama.cpp's RPC server serves one at a time), so this never waits on a
    load and never disturbs one. The worker sees a connection that closes at once.
    """
    start = time.perf_counter()
    try:
        with socket.create_connection((address.host, address.port), timeout=timeout):
            return (time.perf_counter() - start) * 1000.0, ""
    except TimeoutError:
        return None, f"no answer from {address} within {timeout:.0f} s"
    except ConnectionRefusedError:
        return None, f"nothing listens at {address} (is `hearth worker` running there?)"
    except socket.gaierror as exc:
        return None, f"{address.host}: {exc.strerror or 'unknown host'}"
    except OSError as exc:
        return None, f"{address}: {exc.strerror or exc}"


def _child_command() -> list[str]:
    if getattr(sys, "frozen", False):
        return [sys.executable, PROBE_FLAG]
    return [sys.executable, "-m", "engine.rpc.probe"]


def probe_worker(address: WorkerAddress, timeout: float = PROBE_TIMEOUT_S) -> WorkerInfo:
    """The worker's devices and memory, read by llama.cpp in a child process; blocking
    (seconds at worst): call it off the GUI thread."""
    import os

    rtt, why = ping(address)

    def offline(reason: str) -> WorkerInfo:
        return WorkerInfo(address, WorkerState.OFFLINE, reason=reason, rtt_ms=rtt, checked_at=time.time())

    if rtt is None:
        return offline(why)
    try:
        done = subprocess.run(
            [*_child_command(), address.endpoint],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **CHILD_ENV},
        )
    except subprocess.TimeoutExpired:
        # The RPC server serves one client at a time: a worker busy with another Hearth
        # (or this one's loaded model) accepts the connection but answers nothing.
        return offline(f"{address} accepts connections but does not answer: busy serving another client?")
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        cause = next((ln.split(": ", 1)[-1] for ln in reversed(lines) if "RPC" in ln or "connect" in ln), "")
        last = lines[-1] if lines else f"the probe exited with {done.returncode}"
        return offline((cause or last).strip())
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        devices = tuple(
            RemoteDevice(address.endpoint, i, int(d["total"]), int(d["free"]))
            for i, d in enumerate(answer["devices"])
        )
    except (ValueError, KeyError, IndexError, TypeError):
        return offline("the probe gave no answer")
    if not devices:
        return offline("the worker offers no devices")
    return WorkerInfo(address, WorkerState.ONLINE, devices=devices, rtt_ms=rtt, checked_at=time.time())


def with_workers(hardware: HardwareSnapshot, workers: Iterable[WorkerInfo]) -> HardwareSnapshot:
    """``hardware`` with the devices of the workers that answered, for ``plan_load``."""
    devices = tuple(d for w in workers if w.online for d in w.devices)
    return replace(hardware, remote_devices=devices)
