"""Hardware discovery and telemetry, with a fake NVML standing in for drivers and GPUs."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import pynvml
import pytest

from engine.base.units import format_bytes, format_count, plural
from engine.machine.gpu import PynvmlSource
from engine.machine.hardware import (
    BackendDevice,
    DeviceType,
    GpuInfo,
    HardwareSnapshot,
    cpu_name,
    describe,
    take_snapshot,
)
from engine.machine.telemetry import Telemetry
from engine.native import backend as native

GIB = 1024**3


@dataclass
class FakeGpu:
    name: str
    total: int
    free: int
    used: int
    utilization: float = 0.0
    temperature: float | Exception = 40.0
    power: float | Exception = 100.0
    uuid: str = "GPU-00000000"
    memory_error: Exception | None = None


@dataclass
class FakeNvml:
    """An ``NvmlSource`` with scripted GPUs and errors, counting the calls that matter."""

    gpus: list[FakeGpu] = field(default_factory=list)
    init_error: Exception | None = None
    driver: str = "550.54.15"
    calls: dict[str, int] = field(default_factory=dict)

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def init(self) -> None:
        self._count("init")
        if self.init_error is not None:
            self._count("init_error")
            raise self.init_error

    def shutdown(self) -> None:
        self._count("shutdown")

    def driver_version(self) -> str:
        return self.driver

    def device_count(self) -> int:
        return len(self.gpus)

    def device_handle(self, index: int) -> object:
        self._count("device_handle")
        return self.gpus[index]

    def name(self, handle: object) -> str:
        return self._gpu(handle).name

    def uuid(self, handle: object) -> str:
        return self._gpu(handle).uuid

    def memory(self, handle: object) -> tuple[int, int, int]:
        gpu = self._gpu(handle)
        if gpu.memory_error is not None:
            self._count("memory_error")
            raise gpu.memory_error
        return gpu.total, gpu.free, gpu.used

    def utilization_percent(self, handle: object) -> float:
        return self._gpu(handle).utilization

    def temperature_c(self, handle: object) -> float:
        self._count("temperature_c")
        return self._value(self._gpu(handle).temperature)

    def power_w(self, handle: object) -> float:
        self._count("power_w")
        return self._value(self._gpu(handle).power)

    @staticmethod
    def _gpu(handle: object) -> FakeGpu:
        assert isinstance(handle, FakeGpu)
        return handle

    @staticmethod
    def _value(value: float | Exception) -> float:
        if isinstance(value, Exception):
            raise value
        return value


def two_gpus() -> list[FakeGpu]:
    return [
        FakeGpu("NVIDIA GeForce RTX 4090", 24 * GIB, 20 * GIB, 4 * GIB, 12.0, 45.0, 120.5, "GPU-aaaa"),
        FakeGpu("NVIDIA RTX A2000", 6 * GIB, 5 * GIB, 1 * GIB, 0.0, 38.0, 20.0, "GPU-bbbb"),
    ]


def not_supported() -> Exception:
    return pynvml.NVMLError_NotSupported()


# --- snapshot: the states of a machine without a usable GPU ------------------------------------


def test_nvml_library_missing_is_a_normal_state() -> None:
    fake = FakeNvml(init_error=pynvml.NVMLError_LibraryNotFound())
    snap = take_snapshot(fake)
    assert snap.gpus == ()
    assert snap.gpu_status == "No NVIDIA driver found (NVML is not available)"
    assert snap.driver_version is None
    assert "shutdown" not in fake.calls  # never shut down what did not start
    assert fake.calls["init_error"] == 1
    assert snap.offload_note is None


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (pynvml.NVMLError_DriverNotLoaded, "not loaded"),
        (pynvml.NVMLError_NoPermission, "may not query"),
        (pynvml.NVMLError_Unknown, "could not be queried"),
    ],
)
def test_nvml_init_failures_become_reasons(error: type[Exception], words: str) -> None:
    fake = FakeNvml(init_error=error())
    snap = take_snapshot(fake)
    assert fake.calls["init_error"] == 1
    assert snap.gpus == ()
    assert words in snap.gpu_status


def test_driver_without_gpus() -> None:
    fake = FakeNvml(gpus=[])
    snap = take_snapshot(fake)
    assert snap.gpus == ()
    assert snap.gpu_status == "NVIDIA driver found, no GPU"
    assert snap.driver_version == "550.54.15"
    assert fake.calls["shutdown"] == 1


def _nvml_library_present() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


@pytest.mark.skipif(_nvml_library_present(), reason="this machine has a working NVIDIA driver")
def test_real_pynvml_without_driver() -> None:
    snap = take_snapshot(PynvmlSource())
    assert snap.gpus == ()
    assert snap.gpu_status  # a human reason, whatever the exact one
    with Telemetry(PynvmlSource()) as telemetry:
        assert telemetry.gpu_count == 0
        assert telemetry.sample().gpus == ()


def test_default_snapshot_never_raises() -> None:
    snap = take_snapshot()
    assert snap.gpu_status
    if snap.gpus:
        assert snap.gpu_status.endswith("found")


# --- snapshot: GPUs present ----------------------------------------------------------------------


def test_two_gpus_flow_into_the_snapshot() -> None:
    fake = FakeNvml(gpus=two_gpus())
    snap = take_snapshot(fake)
    assert snap.gpu_status == "2 NVIDIA GPUs found"
    assert snap.driver_version == "550.54.15"
    assert snap.gpus == (
        GpuInfo(0, "NVIDIA GeForce RTX 4090", 24 * GIB, 20 * GIB, 12.0, 45.0, 120.5, "GPU-aaaa"),
        GpuInfo(1, "NVIDIA RTX A2000", 6 * GIB, 5 * GIB, 0.0, 38.0, 20.0, "GPU-bbbb"),
    )
    assert fake.calls["init"] == 1
    assert fake.calls["shutdown"] == 1


def test_not_supported_fields_become_none() -> None:
    gpu = FakeGpu("Tesla T4 (vGPU)", 16 * GIB, 15 * GIB, GIB, 3.0, not_supported(), not_supported())
    snap = take_snapshot(FakeNvml(gpus=[gpu]))
    (info,) = snap.gpus
    assert info.temperature_c is None
    assert info.power_w is None
    assert info.utilization_percent == 3.0
    assert snap.gpu_status == "1 NVIDIA GPU found"
    line = next(line for line in describe(snap) if "Tesla T4" in line)
    assert "°C" not in line and " W" not in line


def test_unreadable_gpu_is_reported_not_raised() -> None:
    gpus = two_gpus()
    gpus[0].memory_error = pynvml.NVMLError_GpuIsLost()
    fake = FakeNvml(gpus=gpus)
    snap = take_snapshot(fake)
    assert fake.calls["memory_error"] == 1
    assert [g.index for g in snap.gpus] == [1]
    assert snap.gpu_status.startswith("1 NVIDIA GPU found; could not read GPU 0")


def test_gpu_with_cpu_only_build_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "supports_gpu_offload", lambda: False)
    snap = take_snapshot(FakeNvml(gpus=two_gpus()[:1]))
    assert not snap.gpu_offload_supported
    assert not snap.has_usable_gpu
    assert snap.offload_note is not None and "CPU-only" in snap.offload_note
    assert any(line == f"Note: {snap.offload_note}" for line in describe(snap))


def test_gpu_with_gpu_build_has_no_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "supports_gpu_offload", lambda: True)
    snap = take_snapshot(FakeNvml(gpus=two_gpus()))
    assert snap.has_usable_gpu
    assert snap.offload_note is None
    assert not any(line.startswith("Note:") for line in describe(snap))


def test_snapshot_of_this_machine() -> None:
    snap = take_snapshot(FakeNvml(init_error=pynvml.NVMLError_LibraryNotFound()))
    assert snap.cpu_name
    assert 1 <= snap.physical_cores <= snap.logical_cores
    assert 0 < snap.ram_available <= snap.ram_total
    assert snap.gpu_offload_supported == native.supports_gpu_offload()
    assert snap.backend_devices == native.backend_devices()


def test_describe_lines() -> None:
    snap = HardwareSnapshot(
        cpu_name="AMD EPYC",
        physical_cores=8,
        logical_cores=16,
        simd=("AVX", "AVX2"),
        ram_total=32 * GIB,
        ram_available=20 * GIB,
        gpus=(GpuInfo(0, "NVIDIA H200", 140 * GIB, 139 * GIB, 7.0, 33.0, 75.4),),
        gpu_status="1 NVIDIA GPU found",
        driver_version="570.1",
        gpu_offload_supported=True,
        backend_devices=(
            BackendDevice("CUDA0", "NVIDIA H200", DeviceType.GPU, 140 * GIB, 139 * GIB),
            BackendDevice("CPU", "AMD EPYC", DeviceType.CPU, 32 * GIB, 20 * GIB),
        ),
        cpu_simd=("AVX", "AVX2", "AVX512", "AMX_INT8"),
    )
    assert describe(snap) == [
        "CPU: AMD EPYC, 8 cores / 16 threads",
        "CPU features: AVX, AVX2, AVX512, AMX_INT8",
        "RAM: 32.0 GiB total, 20.0 GiB available",
        "GPU: 1 NVIDIA GPU found (driver 570.1)",
        "  GPU 0: NVIDIA H200, 140.0 GiB VRAM, 139.0 GiB free, 7% busy, 33 °C, 75 W",
        "llama.cpp build: GPU offload supported",
        "  compiled for: AVX, AVX2",
        "  left out: AVX512, AMX_INT8",
        "  backends: CPU, CUDA",
        "  Device CUDA0 (GPU): NVIDIA H200, 139.0 GiB free of 140.0 GiB",
        "  Device CPU (CPU): AMD EPYC, 20.0 GiB free of 32.0 GiB",
    ]


def test_describe_says_when_the_build_failed_its_self_check() -> None:
    from dataclasses import replace

    from engine.machine.hardware import described_machine

    snap = replace(described_machine(), cpu_simd=("AVX2",), native_error="llama.cpp crashed with SIGILL ...")
    lines = describe(snap)
    assert "llama.cpp build: unusable: llama.cpp crashed with SIGILL ..." in lines
    assert not any("compiled for" in line for line in lines)


def test_cpu_name_from_cpuinfo(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Intel(R) Core(TM)   i7-9700K CPU @ 3.60GHz\n")
    assert cpu_name(cpuinfo) == "Intel(R) Core(TM) i7-9700K CPU @ 3.60GHz"
    assert cpu_name(tmp_path / "missing")  # platform fallback, never empty


# --- telemetry -----------------------------------------------------------------------------------


def test_telemetry_values_flow_and_handles_are_kept() -> None:
    gpus = two_gpus()
    gpus[1].temperature = not_supported()
    fake = FakeNvml(gpus=gpus)
    telemetry = Telemetry(fake)
    assert telemetry.gpu_status == "2 NVIDIA GPUs found"
    samples = [telemetry.sample() for _ in range(3)]
    first = samples[0].gpus
    assert [(g.index, g.vram_used, g.vram_total) for g in first] == [
        (0, 4 * GIB, 24 * GIB),
        (1, GIB, 6 * GIB),
    ]
    assert first[0].utilization_percent == 12.0
    assert first[0].temperature_c == 45.0 and first[0].power_w == 120.5
    assert first[1].temperature_c is None and first[1].power_w == 20.0

    gpus[0].used, gpus[0].utilization = 10 * GIB, 99.0  # live values, not cached
    assert telemetry.sample().gpus[0].vram_used == 10 * GIB
    assert fake.calls["init"] == 1  # NVML initialised once, handles reused
    assert fake.calls["device_handle"] == 2
    # GPU 1's NotSupported temperature is asked once, GPU 0's on every sample.
    assert fake.calls["temperature_c"] == 4 + 1

    telemetry.close()
    telemetry.close()
    assert fake.calls["shutdown"] == 1
    assert telemetry.sample().gpus == ()


def test_telemetry_without_nvml() -> None:
    fake = FakeNvml(init_error=pynvml.NVMLError_LibraryNotFound())
    with Telemetry(fake) as telemetry:
        assert telemetry.gpu_count == 0
        assert telemetry.gpu_status == "No NVIDIA driver found (NVML is not available)"
        assert telemetry.sample().gpus == ()
    assert "shutdown" not in fake.calls and fake.calls["init_error"] == 1


def test_telemetry_sample_is_sane() -> None:
    with Telemetry(FakeNvml(gpus=[])) as telemetry:
        a = telemetry.sample()
        sum(i * i for i in range(20_000))  # a little CPU work between samples
        b = telemetry.sample()
    for s in (a, b):
        assert s.process_rss > 0
        assert 0 < s.ram_used <= s.ram_total
        assert 0.0 <= s.cpu_percent <= 100.0
    assert b.timestamp >= a.timestamp


# --- units ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (int(235.16 * 1024**2), "235.2 MiB"),
        (1024**2 - 1, "1.0 MiB"),  # not "1024.0 KiB"
        (int(1.2 * GIB), "1.2 GiB"),
        (3 * 1024**4, "3.0 TiB"),
        (-2 * 1024**2, "-2.0 MiB"),
    ],
)
def test_format_bytes(n: int, text: str) -> None:
    assert format_bytes(n) == text


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0"), (999, "999"), (1000, "1.0K"), (12_345, "12.3K"), (268_098_176, "268.1M"),
     (999_960, "1.0M"), (7_241_732_096, "7.2B"), (2.5, "2.5")],
)  # fmt: skip
def test_format_count(n: float, text: str) -> None:
    assert format_count(n) == text


@pytest.mark.parametrize(
    ("n", "word", "text"),
    [(0, "model", "0 models"), (1, "model", "1 model"), (2, "projector", "2 projectors"),
     (1_000, "token", "1,000 tokens"), (3, "copy", "3 copies")],
)  # fmt: skip
def test_plural(n: int, word: str, text: str) -> None:
    assert plural(n, word, "copies" if word == "copy" else None) == text


def test_without_nvidia_ml_py(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    snap = take_snapshot(PynvmlSource())
    assert snap.gpus == ()
    assert "nvidia-ml-py is not installed" in snap.gpu_status
    with Telemetry(PynvmlSource()) as telemetry:
        assert telemetry.sample().gpus == ()


def test_gpus_llama_cpp_sees_without_nvml_are_planned_for() -> None:
    """A Vulkan build on an AMD or Intel GPU: no NVML, but ggml lists a GPU device."""
    from engine.machine.hardware import ggml_gpus

    devices = (
        BackendDevice("Vulkan0", "AMD Radeon RX 7600", DeviceType.GPU, 8 * GIB, 7 * GIB),
        BackendDevice("Vulkan1", "Intel(R) Graphics", DeviceType.IGPU, 4 * GIB, 3 * GIB),
        BackendDevice("CPU", "AMD Ryzen", DeviceType.CPU, 32 * GIB, 20 * GIB),
    )
    gpus = ggml_gpus(devices)
    assert [(g.index, g.name, g.vram_total, g.vram_free) for g in gpus] == [
        (0, "AMD Radeon RX 7600", 8 * GIB, 7 * GIB),
        (1, "Intel(R) Graphics", 4 * GIB, 3 * GIB),
    ]
    assert ggml_gpus(devices[2:]) == ()
