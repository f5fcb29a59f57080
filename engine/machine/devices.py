"""The devices a llama.cpp build can run on, as ggml's backend registry lists them."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class DeviceType(enum.Enum):
    CPU = 0
    GPU = 1
    IGPU = 2
    ACCEL = 3
    META = 4  # ggml's wrapper over several devices for tensor parallelism (newer builds)


@dataclass(frozen=True)
class BackendDevice:
    """A ggml backend device this llama.cpp build can use."""

    name: str
    description: str
    type: DeviceType
    memory_total: int
    memory_free: int


@dataclass(frozen=True)
class RemoteDevice:
    """A device an RPC worker (``hearth worker``) offers, as the planner sees it.

    ``endpoint`` is ``host:port``; ``index`` the device's number on that worker. The RPC
    protocol reports only memory per device, not a device's own name or kind.
    """

    endpoint: str
    index: int
    memory_total: int
    memory_free: int

    @property
    def key(self) -> str:
        """The name the plan and the loader share for this device."""
        return f"rpc:{self.endpoint}#{self.index}"

    @property
    def label(self) -> str:
        return f"worker {self.endpoint}" + (f" #{self.index}" if self.index else "")
