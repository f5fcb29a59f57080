"""Reading NVIDIA GPUs through NVML: the calls Hearth makes, behind a protocol tests can fake.

``NvmlSource`` names the calls, ``PynvmlSource`` makes them with nvidia-ml-py; ``open_nvml``
initialises NVML and enumerates the GPUs, answering an absent driver, a failed init or no GPU
with a status line rather than an error. The snapshot (``hardware.py``) and the dashboard's
samples (``telemetry.py``) both read through it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Protocol, TypeVar

_T = TypeVar("_T")

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


def nvml_errors() -> tuple[type[Exception], type[Exception]]:
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
class OpenGpu:
    """A GPU NVML enumerated: its handle, kept for later calls, and what was read at once."""

    index: int
    handle: object
    name: str
    vram_total: int
    vram_free: int


@dataclass(frozen=True)
class NvmlOpen:
    """What ``nvmlInit`` and device enumeration gave: usable GPUs and a status line."""

    initialized: bool  # True: the caller owns one nvmlShutdown
    gpus: tuple[OpenGpu, ...]
    status: str
    driver_version: str | None


def open_nvml(nvml: NvmlSource) -> NvmlOpen:
    """Init NVML and enumerate GPUs. Absent driver, init failure and zero GPUs are answers, not errors."""
    error, _ = nvml_errors()
    try:
        nvml.init()
    except (ImportError, error) as exc:
        return NvmlOpen(False, (), _unavailable_reason(exc), None)

    driver = optional(nvml.driver_version, error)
    try:
        count = nvml.device_count()
    except error as exc:
        return NvmlOpen(True, (), f"NVIDIA driver found, but GPUs could not be counted ({exc})", driver)

    gpus: list[OpenGpu] = []
    unreadable: list[str] = []
    for index in range(count):
        try:
            handle = nvml.device_handle(index)
            total, free, _used = nvml.memory(handle)
            gpus.append(OpenGpu(index, handle, nvml.name(handle), total, free))
        except error as exc:  # e.g. "GPU is lost", or a GPU this user may not see
            unreadable.append(f"GPU {index}: {exc}")
    return NvmlOpen(True, tuple(gpus), _gpu_status(len(gpus), unreadable), driver)


def _gpu_status(found: int, unreadable: list[str]) -> str:
    if not found and not unreadable:
        return "NVIDIA driver found, no GPU"
    if not found:
        return f"NVIDIA driver found, but no GPU could be read ({'; '.join(unreadable)})"
    status = f"{found} NVIDIA GPU{'s' if found != 1 else ''} found"
    return f"{status}; could not read {'; '.join(unreadable)}" if unreadable else status


def optional(read: Callable[[], _T], error: type[Exception]) -> _T | None:
    """A value NVML may not offer (NotSupported on many consumer/virtual GPUs) becomes None."""
    try:
        return read()
    except error:
        return None


def shutdown_nvml(nvml: NvmlSource) -> None:
    """Release NVML (after a successful ``open_nvml``), ignoring its errors."""
    error, _ = nvml_errors()
    with contextlib.suppress(error):  # best effort: a failed shutdown tells the user nothing
        nvml.shutdown()

