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
