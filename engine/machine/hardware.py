"""What this machine has (HardwareSnapshot) and how busy it is (Telemetry)."""

from __future__ import annotations

import contextlib
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Protocol, TypeVar

import psutil

from engine.base.units import format_bytes
from engine.machine.cpu_load import CpuMeter, logical_cpus, others_since, physical_cores, read_cpu
from engine.machine.devices import BackendDevice, DeviceType, RemoteDevice
from engine.native import backend as native

_T = TypeVar("_T")


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


# ---------------------------------------------------------------------------------------------
# NVML access, behind a small protocol so tests can stand in for a driver and GPUs.
# ---------------------------------------------------------------------------------------------


class NvmlSource(Protocol):
    """The NVML calls Hearth uses. Every method may raise ``pynvml.NVMLError`` (a subclass)."""

    def init(self) -> None: ...
    def shutdown(self) -> None: ...
    def driver_version(self) -> str: ...
    def device_count(self) -> int: ...
    def device_handle(self, index: int) -> object: ...
    def name(self, handle: object) -> str: ...
    def uuid(self, handle: object) -> str: ...
    def memory(self, handle: object) -> tuple[int, int, int]:
        """(total, free, used) bytes of device memory."""
        ...

    def utilization_percent(self, handle: object) -> float: ...
    def temperature_c(self, handle: object) -> float: ...
    def power_w(self, handle: object) -> float: ...


class PynvmlSource:
    """``NvmlSource`` over nvidia-ml-py. ``pynvml`` is imported on ``init`` (it takes ~25 ms)."""

    def __init__(self) -> None:
        self._nvml: ModuleType | None = None

    @property
    def _lib(self) -> ModuleType:
        if self._nvml is None:
            import pynvml

            self._nvml = pynvml
        return self._nvml

    def init(self) -> None:
        self._lib.nvmlInit()

    def shutdown(self) -> None:
        self._lib.nvmlShutdown()

    def driver_version(self) -> str:
        return _str(self._lib.nvmlSystemGetDriverVersion())

    def device_count(self) -> int:
        return int(self._lib.nvmlDeviceGetCount())

    def device_handle(self, index: int) -> object:
        return self._lib.nvmlDeviceGetHandleByIndex(index)

    def name(self, handle: object) -> str:
        return _str(self._lib.nvmlDeviceGetName(handle))

    def uuid(self, handle: object) -> str:
        return _str(self._lib.nvmlDeviceGetUUID(handle))

    def memory(self, handle: object) -> tuple[int, int, int]:
        info = self._lib.nvmlDeviceGetMemoryInfo(handle)
        return int(info.total), int(info.free), int(info.used)

    def utilization_percent(self, handle: object) -> float:
        return float(self._lib.nvmlDeviceGetUtilizationRates(handle).gpu)

    def temperature_c(self, handle: object) -> float:
        lib = self._lib
        # The classic call works on every driver; the binding marks it deprecated in favour of
        # nvmlDeviceGetTemperatureV (newer drivers only), so use that if the classic one goes.
        if hasattr(lib, "nvmlDeviceGetTemperature"):
            return float(lib.nvmlDeviceGetTemperature(handle, lib.NVML_TEMPERATURE_GPU))
        return float(lib.nvmlDeviceGetTemperatureV(handle, lib.NVML_TEMPERATURE_GPU))

    def power_w(self, handle: object) -> float:
        return self._lib.nvmlDeviceGetPowerUsage(handle) / 1000.0  # NVML reports milliwatts


def _str(value: str | bytes) -> str:
    # Old nvidia-ml-py releases returned bytes; current ones decode for us.
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


class _PynvmlMissing(Exception):
    """Stands in for ``pynvml.NVMLError`` in except clauses when nvidia-ml-py is absent; never raised."""


def _nvml_errors() -> tuple[type[Exception], type[Exception]]:
    """(NVMLError, NVMLError_NotSupported), or never-raised stand-ins without nvidia-ml-py."""
    try:
        import pynvml
    except ImportError:
        return _PynvmlMissing, _PynvmlMissing
    return pynvml.NVMLError, pynvml.NVMLError_NotSupported


def _unavailable_reason(exc: Exception) -> str:
    """One human line for a failed ``nvmlInit``: the normal states of a machine without a usable GPU."""
    if isinstance(exc, ImportError):
        return "GPU discovery is not available (nvidia-ml-py is not installed)"
    import pynvml

    if isinstance(exc, pynvml.NVMLError_LibraryNotFound):
        return "No NVIDIA driver found (NVML is not available)"
    if isinstance(exc, pynvml.NVMLError_DriverNotLoaded):
        return "NVIDIA driver is installed but not loaded"
    if isinstance(exc, pynvml.NVMLError_NoPermission):
        return "NVIDIA driver found, but this user may not query it"
    if isinstance(exc, pynvml.NVMLError_LibRmVersionMismatch):
        return "NVIDIA driver and NVML versions differ (restart after a driver update)"
    return f"NVIDIA driver could not be queried ({exc})"


@dataclass(frozen=True)
class _OpenGpu:
    index: int
    handle: object
    name: str
    vram_total: int
    vram_free: int


@dataclass(frozen=True)
class _NvmlOpen:
    """What ``nvmlInit`` and device enumeration gave: usable GPUs and a status line."""

    initialized: bool  # True: the caller owns one nvmlShutdown
    gpus: tuple[_OpenGpu, ...]
    status: str
    driver_version: str | None


def _open_nvml(nvml: NvmlSource) -> _NvmlOpen:
    """Init NVML and enumerate GPUs. Absent driver, init failure and zero GPUs are answers, not errors."""
    error, _ = _nvml_errors()
    try:
        nvml.init()
    except (ImportError, error) as exc:
        return _NvmlOpen(False, (), _unavailable_reason(exc), None)

    driver = _optional(nvml.driver_version, error)
    try:
        count = nvml.device_count()
    except error as exc:
        return _NvmlOpen(True, (), f"NVIDIA driver found, but GPUs could not be counted ({exc})", driver)

    gpus: list[_OpenGpu] = []
    unreadable: list[str] = []
    for index in range(count):
        try:
            handle = nvml.device_handle(index)
            total, free, _used = nvml.memory(handle)
            gpus.append(_OpenGpu(index, handle, nvml.name(handle), total, free))
        except error as exc:  # e.g. "GPU is lost", or a GPU this user may not see
            unreadable.append(f"GPU {index}: {exc}")
    return _NvmlOpen(True, tuple(gpus), _gpu_status(len(gpus), unreadable), driver)


def _gpu_status(found: int, unreadable: list[str]) -> str:
    if not found and not unreadable:
        return "NVIDIA driver found, no GPU"
    if not found:
        return f"NVIDIA driver found, but no GPU could be read ({'; '.join(unreadable)})"
    status = f"{found} NVIDIA GPU{'s' if found != 1 else ''} found"
    return f"{status}; could not read {'; '.join(unreadable)}" if unreadable else status


def _optional(read: Callable[[], _T], error: type[Exception]) -> _T | None:
    """A value NVML may not offer (NotSupported on many consumer/virtual GPUs) becomes None."""
    try:
        return read()
    except error:
        return None


def _shutdown(nvml: NvmlSource) -> None:
    error, _ = _nvml_errors()
    with contextlib.suppress(error):  # best effort: a failed shutdown tells the user nothing
        nvml.shutdown()


# ---------------------------------------------------------------------------------------------
# The snapshot
# ---------------------------------------------------------------------------------------------


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
    error, _ = _nvml_errors()
    opened = _open_nvml(source)
    try:
        gpus = tuple(
            GpuInfo(
                index=g.index,
                name=g.name,
                vram_total=g.vram_total,
                vram_free=g.vram_free,
                utilization_percent=_optional(lambda h=g.handle: source.utilization_percent(h), error),
                temperature_c=_optional(lambda h=g.handle: source.temperature_c(h), error),
                power_w=_optional(lambda h=g.handle: source.power_w(h), error),
                uuid=_optional(lambda h=g.handle: source.uuid(h), error),
            )
            for g in opened.gpus
        )
    finally:
        if opened.initialized:
            _shutdown(source)

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


# ---------------------------------------------------------------------------------------------
# Live telemetry
# ---------------------------------------------------------------------------------------------


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
        self._error, self._not_supported = _nvml_errors()
        self._nvml = nvml if nvml is not None else PynvmlSource()
        opened = _open_nvml(self._nvml)
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

    def _sample_gpu(self, gpu: _OpenGpu) -> GpuSample:
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

    def _field(self, gpu: _OpenGpu, name: str) -> float | None:
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
            _shutdown(self._nvml)

    def __enter__(self) -> Telemetry:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


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
