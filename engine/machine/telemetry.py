"""Live telemetry for the dashboard: cheap periodic samples of CPU, memory and GPUs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import psutil

from engine.machine.cpu_load import CpuMeter
from engine.machine.gpu import NvmlSource, OpenGpu, PynvmlSource, nvml_errors, open_nvml, shutdown_nvml


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
    # Of ``cpu_percent`` (the whole machine, 0-100), what this process used; the rest is
    # other programs'. None from a source that cannot tell.
    hearth_cpu_percent: float | None = None

    @property
    def others_cpu_percent(self) -> float | None:
        if self.hearth_cpu_percent is None:
            return None
        return max(0.0, self.cpu_percent - self.hearth_cpu_percent)


# The dashboard samples every 250 ms (more slowly while a model decodes); a sample within
# this of the previous repeats its CPU figures rather than divide ticks by milliseconds.
TELEMETRY_MIN_INTERVAL_S = 0.05


class Telemetry:
    """Cheap periodic samples for the dashboard (well under a millisecond without GPUs).

    NVML is initialised once here and its device handles kept: re-initialising per sample
    costs milliseconds. Use from one thread (the CPU figures compare each sample with the
    previous one). ``close()`` releases NVML.
    """

    def __init__(self, nvml: NvmlSource | None = None) -> None:
        self._process = psutil.Process()  # one object: psutil caches per-process state in it
        # The machine's CPU and this process's share of it, each sample covering the time
        # since the previous one (the first: since construction).
        self._cpu = CpuMeter(min_interval=TELEMETRY_MIN_INTERVAL_S)
        self._error, self._not_supported = nvml_errors()
        self._nvml = nvml if nvml is not None else PynvmlSource()
        opened = open_nvml(self._nvml)
        self._nvml_open = opened.initialized
        self._gpus = opened.gpus
        self.gpu_status = opened.status
        # (gpu index, field) pairs that answered NotSupported once: they will not start
        # answering, so stop paying for the failing call on every tick.
        self._unsupported: set[tuple[int, str]] = set()

    @property
    def gpu_count(self) -> int:
        return len(self._gpus)

    def sample(self) -> TelemetrySample:
        memory = psutil.virtual_memory()
        share = self._cpu.sample()
        if share is None:  # sampled again within milliseconds: repeat the last figures
            share = self._cpu.latest
        return TelemetrySample(
            timestamp=time.monotonic(),
            cpu_percent=share.percent(share.total) if share is not None else 0.0,
            # total - available, not psutil's ``used``: that excludes reclaimable cache on
            # Linux but not elsewhere; "what is not available" means the same everywhere.
            ram_used=memory.total - memory.available,
            ram_total=memory.total,
            process_rss=self._process.memory_info().rss,
            gpus=tuple(self._sample_gpu(g) for g in self._gpus) if self._nvml_open else (),
            # The two clocks (the machine's, this process's) tick apart: ours never above all.
            hearth_cpu_percent=share.percent(min(share.ours, share.total)) if share is not None else None,
        )

    def _sample_gpu(self, gpu: OpenGpu) -> GpuSample:
        try:
            total, _free, used = self._nvml.memory(gpu.handle)
        except self._error:  # a transient failure should not blank the whole dashboard
            total, used = gpu.vram_total, 0
        return GpuSample(
            index=gpu.index,
            utilization_percent=self._field(gpu, "utilization_percent"),
            vram_used=used,
            vram_total=total,
            temperature_c=self._field(gpu, "temperature_c"),
            power_w=self._field(gpu, "power_w"),
        )

    def _field(self, gpu: OpenGpu, name: str) -> float | None:
        key = (gpu.index, name)
        if key in self._unsupported:
            return None
        try:
            return float(getattr(self._nvml, name)(gpu.handle))
        except self._not_supported:
            self._unsupported.add(key)
            return None
        except self._error:
            return None

    def close(self) -> None:
        """Shut NVML down (idempotent). Later samples carry no GPU data."""
        if self._nvml_open:
            self._nvml_open = False
            shutdown_nvml(self._nvml)

    def __enter__(self) -> Telemetry:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

