"""What this machine has: the ``HardwareSnapshot`` (CPU, memory, GPUs, llama.cpp's devices).

GPUs are read through NVML (``engine/machine/gpu.py``), or else as llama.cpp's backends see
them; how busy the machine is from moment to moment is ``engine/machine/telemetry.py``.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, replace
from pathlib import Path

import psutil

from engine.base.units import format_bytes
from engine.machine.cpu_load import logical_cpus, others_since, physical_cores, read_cpu
from engine.machine.devices import BackendDevice, DeviceType, RemoteDevice
from engine.machine.gpu import NvmlSource, PynvmlSource, nvml_errors, open_nvml, optional, shutdown_nvml
from engine.native import backend as native


@dataclass(frozen=True)
class GpuInfo:
    """One GPU: as NVML reports it, or (no NVIDIA driver) as a llama.cpp backend device does."""

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
    cpu_simd: tuple[str, ...] = ()  # what the CPU advertises (/proc/cpuinfo), llama.cpp's names
    native_error: str | None = None  # why llama.cpp cannot run in this process (a failed self-check)
    # Devices of the RPC workers the user added that answered (engine/rpc): the planner
    # places layers on them like on GPUs. Added with ``with_workers``; none by default.
    remote_devices: tuple[RemoteDevice, ...] = ()
    # CPUs' worth other programs kept busy when this was taken (this process left out):
    # the planner leaves their cores to them. Refreshed with ``with_cpu_load``.
    cpu_busy_elsewhere: float = 0.0
    # Taken of the machine this process runs on (``take_snapshot``), not described by hand:
    # only then does its CPU load follow what this machine does now.
    this_machine: bool = False
    # Swap space (bytes; 0: none): without it, memory that runs out is not swapped out
    # but fails (the OOM killer), so the planner does not say "may swap".
    swap_total: int = 0

    @property
    def simd_not_compiled(self) -> tuple[str, ...]:
        """Features the CPU has that this llama.cpp build does not use (AMX always, by design)."""
        if self.native_error is not None:
            return ()
        return tuple(f for f in self.cpu_simd if f not in self.simd)

    @property
    def has_usable_gpu(self) -> bool:
        return bool(self.gpus) and self.gpu_offload_supported

    @property
    def offload_note(self) -> str | None:
        """Plain words when a GPU is present but this build cannot use it."""
        if self.gpus and not self.gpu_offload_supported:
            return "An NVIDIA GPU is present, but this llama.cpp build is CPU-only: models run on the CPU."
        return None


# How long a snapshot watches other programs' CPU load (it takes ~1 ms otherwise): long
# enough that the counters' 10 ms ticks do not decide, short enough for a window to open.
SNAPSHOT_CPU_WINDOW_S = 0.1


def take_snapshot(
    nvml: NvmlSource | None = None, cpu_window: float = SNAPSHOT_CPU_WINDOW_S
) -> HardwareSnapshot:
    """CPU, RAM, NVIDIA GPUs and llama.cpp backend devices, now. Never raises for a missing GPU/driver.

    ``nvml`` defaults to the real driver (``PynvmlSource``); tests pass a fake. Other
    programs' CPU load is measured while the snapshot is taken, over at least
    ``cpu_window`` seconds (0: not measured).
    """

    cpu_before = read_cpu()
    source = nvml if nvml is not None else PynvmlSource()
    error, _ = nvml_errors()
    opened = open_nvml(source)
    try:
        gpus = tuple(
            GpuInfo(
                index=g.index,
                name=g.name,
                vram_total=g.vram_total,
                vram_free=g.vram_free,
                utilization_percent=optional(lambda h=g.handle: source.utilization_percent(h), error),
                temperature_c=optional(lambda h=g.handle: source.temperature_c(h), error),
                power_w=optional(lambda h=g.handle: source.power_w(h), error),
                uuid=optional(lambda h=g.handle: source.uuid(h), error),
            )
            for g in opened.gpus
        )
    finally:
        if opened.initialized:
            shutdown_nvml(source)

    devices = native.backend_devices()
    status = opened.status
    if not gpus:
        gpus = ggml_gpus(devices)
        if gpus:
            status = f"{len(gpus)} GPU{'s' if len(gpus) > 1 else ''} found by llama.cpp (no NVIDIA driver)"
    memory = psutil.virtual_memory()
    return HardwareSnapshot(
        cpu_name=cpu_name(),
        physical_cores=physical_cores(),
        logical_cores=logical_cpus(),
        simd=native.simd_features(),
        cpu_simd=native.cpuinfo_simd(),
        ram_total=memory.total,
        ram_available=memory.available,
        gpus=gpus,
        gpu_status=status,
        driver_version=opened.driver_version,
        gpu_offload_supported=native.supports_gpu_offload(),
        backend_devices=devices,
        native_error=native.load_error(),
        cpu_busy_elsewhere=others_since(cpu_before, cpu_window),
        this_machine=True,
        swap_total=read_swap_total(),
    )


def with_cpu_load(snapshot: HardwareSnapshot, busy_elsewhere: float) -> HardwareSnapshot:
    """``snapshot`` with other programs' CPU load as measured since (a ``CpuMeter``'s)."""
    if abs(busy_elsewhere - snapshot.cpu_busy_elsewhere) < 1e-9:
        return snapshot
    return replace(snapshot, cpu_busy_elsewhere=max(0.0, busy_elsewhere))


def read_swap_total() -> int:
    """This machine's swap space in bytes (0 when there is none or it cannot be read)."""
    try:
        return int(psutil.swap_memory().total)
    except (OSError, RuntimeError):  # psutil raises these where the OS hides it
        return 0


def ggml_gpus(devices: tuple[BackendDevice, ...]) -> tuple[GpuInfo, ...]:
    """GPUs as llama.cpp's own backends see them (Vulkan on AMD or Intel, a CUDA GPU NVML
    missed), in ggml's order, which is the order llama.cpp splits layers across them."""
    gpus = [d for d in devices if d.type in (DeviceType.GPU, DeviceType.IGPU)]
    return tuple(
        GpuInfo(
            index=i,
            name=d.description or d.name,
            vram_total=d.memory_total,
            vram_free=d.memory_free,
            utilization_percent=None,
            temperature_c=None,
        )
        for i, d in enumerate(gpus)
    )


def cpu_name(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's marketing name: /proc/cpuinfo "model name" on Linux, else what ``platform`` knows."""
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return " ".join(value.split())  # some CPUs pad the name with runs of spaces
    except OSError:
        pass
    return platform.processor() or platform.machine() or "Unknown CPU"


def describe(snapshot: HardwareSnapshot) -> list[str]:
    """Summary lines for the CLI (``hearth inspect``) and the GUI's hardware panel."""
    s = snapshot
    lines = [
        f"CPU: {s.cpu_name}, {s.physical_cores} cores / {s.logical_cores} threads",
        f"CPU features: {', '.join(s.cpu_simd) if s.cpu_simd else 'none detected'}",
        f"RAM: {format_bytes(s.ram_total)} total, {format_bytes(s.ram_available)} available",
    ]
    driver = f" (driver {s.driver_version})" if s.driver_version else ""
    lines.append(f"GPU: {s.gpu_status}{driver}")
    for gpu in s.gpus:
        details = [f"{format_bytes(gpu.vram_total)} VRAM", f"{format_bytes(gpu.vram_free)} free"]
        if gpu.utilization_percent is not None:
            details.append(f"{gpu.utilization_percent:.0f}% busy")
        if gpu.temperature_c is not None:
            details.append(f"{gpu.temperature_c:.0f} °C")
        if gpu.power_w is not None:
            details.append(f"{gpu.power_w:.0f} W")
        lines.append(f"  GPU {gpu.index}: {gpu.name}, {', '.join(details)}")
    if s.native_error is not None:
        lines.append(f"llama.cpp build: unusable: {s.native_error}")
    else:
        lines.append(
            "llama.cpp build: "
            + ("GPU offload supported" if s.gpu_offload_supported else "CPU only (no GPU offload)")
        )
        lines.append(f"  compiled for: {', '.join(s.simd) if s.simd else 'no SIMD features'}")
        if s.simd_not_compiled:
            lines.append(f"  left out: {', '.join(s.simd_not_compiled)}")
        backends = sorted({d.name.rstrip("0123456789") or d.name for d in s.backend_devices})
        if backends:
            lines.append(f"  backends: {', '.join(backends)}")
    if s.offload_note:
        lines.append(f"Note: {s.offload_note}")
    for dev in s.backend_devices:
        lines.append(
            f"  Device {dev.name} ({dev.type.name}): {dev.description}, "
            f"{format_bytes(dev.memory_free)} free of {format_bytes(dev.memory_total)}"
        )
    return lines


def described_machine(
    *,
    cores: int = 2,
    ram_total: int = 16 << 30,
    ram_available: int | None = None,
    name: str = "described CPU",
    cpu_busy_elsewhere: float = 0.0,
    swap_total: int = 0,
) -> HardwareSnapshot:
    """A CPU-only machine described by hand, for what-if plans, tests and benchmarks that
    must not depend on the machine they run on."""
    return HardwareSnapshot(
        cpu_name=name,
        physical_cores=cores,
        logical_cores=cores,
        simd=(),
        ram_total=ram_total,
        ram_available=ram_total if ram_available is None else ram_available,
        gpus=(),
        gpu_status="No NVIDIA GPU (a described machine)",
        driver_version=None,
        gpu_offload_supported=False,
        backend_devices=(),
        cpu_busy_elsewhere=cpu_busy_elsewhere,
        swap_total=swap_total,
    )
