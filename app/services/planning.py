"""Which hardware a plan is made for, one answer for the window, Discover, the context fix
and the CLI: this machine plus the devices of the user's RPC workers that answered.

No Qt: the CLI calls it too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from engine import HardwareSnapshot, WorkerInfo, take_snapshot, with_workers


def planning_hardware(
    machine: HardwareSnapshot | None = None, workers: Iterable[WorkerInfo] = ()
) -> HardwareSnapshot:
    """``machine`` (a fresh snapshot of this machine when None) with the devices of the
    ``workers`` that are online, and only theirs: a snapshot that already carried other
    workers' devices does not keep them."""
    snapshot = machine if machine is not None else take_snapshot()
    return with_workers(replace(snapshot, remote_devices=()), workers)
