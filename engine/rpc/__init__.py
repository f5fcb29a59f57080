"""llama.cpp RPC workers: serving this machine's devices (``hearth worker``), and using other
machines' devices for one model (registered workers, their devices in plans and loads).

The RPC protocol has no authentication: a worker must only listen on a trusted network.
"""

from engine.rpc.endpoint import DEFAULT_PORT, WorkerAddress, parse_address
from engine.rpc.workers import WorkerInfo, WorkerState, ping, probe_worker, with_workers

__all__ = [
    "DEFAULT_PORT",
    "WorkerAddress",
    "WorkerInfo",
    "WorkerState",
    "parse_address",
    "ping",
    "probe_worker",
    "with_workers",
]
