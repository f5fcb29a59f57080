"""What this machine has (HardwareSnapshot) and how busy it is (Telemetry)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class DeviceType(enum.Enum):
    CPU = 0
    GPU = 1
    IGPU = 2
    ACCEL = 3


@dataclass(frozen=True)
class BackendDevice:
    """A ggml backend device this llama.cpp build can use."""

    name: str
    description: str
    type: DeviceType
    memory_total: int
    memory_free: int


@dataclass(frozen=True)
class GpuInfo:
    """One NVIDIA GPU as NVML reports it."""

    index: int
    name: str
    vram_total: int
    vram_free: int
    utilization_percent: float | None
    temperature_c: float | None
    power_w: float | None = None
    uuid: str | None = None


@dataclass(frozen=True)
class HardwareSnapshot:
    """A static picture of this machine, taken once at start and on demand."""

    cpu_name: str
    physical_cores: int
    logical_cores: int
    simd: tuple[str, ...]  # e.g. ("AVX", "AVX2", "FMA", "AVX512F")
    ram_total: int
    ram_available: int
    gpus: tuple[GpuInfo, ...]
    gpu_status: str  # human reason when there is no usable GPU, else "n GPU(s) found"
    driver_version: str | None
    gpu_offload_supported: bool  # llama_supports_gpu_offload() of this build
    backend_devices: tuple[BackendDevice, ...]

    @property
    def has_usable_gpu(self) -> bool:
        return bool(self.gpus) and self.gpu_offload_supported

    @property
    def offload_note(self) -> str | None:
        """Plain words when a GPU is present but this build cannot use it."""
        if self.gpus and not self.gpu_offload_supported:
            return "An NVIDIA GPU is present, but this llama.cpp build is CPU-only: models run on the CPU."
        return None


@dataclass(frozen=True)
class GpuSample:
    index: int
    utilization_percent: float | None
    vram_used: int
    vram_total: int
    temperature_c: float | None
    power_w: float | None


@dataclass(frozen=True)
class TelemetrySample:
    timestamp: float  # time.monotonic()
    cpu_percent: float
    ram_used: int
    ram_total: int
    process_rss: int
    gpus: tuple[GpuSample, ...]
