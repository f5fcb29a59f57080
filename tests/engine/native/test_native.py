"""engine.native.backend: backend bring-up, build capabilities, devices, SIMD parsing."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.machine.hardware import DeviceType
from engine.native import backend as native

REPO = Path(__file__).resolve().parents[3]

NEW_FORMAT = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | "
    "AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "
)
CUDA_BUILD = (
    "CUDA : ARCHS = 890 | USE_GRAPHS = 1 | PEER_MAX_BATCH_SIZE = 128 | "
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | OPENMP = 1 | "
)
OLD_FORMAT = (
    "AVX = 1 | AVX_VNNI = 0 | AVX2 = 1 | AVX512 = 0 | AVX512_VBMI = 0 | AVX512_VNNI = 0 | "
    "AVX512_BF16 = 0 | FMA = 1 | NEON = 0 | SVE = 0 | ARM_FMA = 0 | F16C = 1 | FP16_VA = 0 | "
    "RISCV_VECT = 0 | WASM_SIMD = 0 | BLAS = 0 | SSE3 = 1 | SSSE3 = 1 | VSX = 0 | MATMUL_INT8 = 0 | "
    "LLAMAFILE = 1 | "
)
ARM_FORMAT = (
    "CPU : NEON = 1 | ARM_FMA = 1 | FP16_VA = 1 | DOTPROD = 1 | SVE = 1 | SVE_CNT = 16 | REPACK = 1 | "
)


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        (
            NEW_FORMAT,
            ("SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2", "AVX512", "AVX512_VBMI", "AVX512_VNNI",
             "AVX512_BF16"),
        ),
        # USE_GRAPHS = 1 belongs to the CUDA segment, not the CPU features
        (CUDA_BUILD, ("SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA")),
        (OLD_FORMAT, ("AVX", "AVX2", "FMA", "F16C", "SSE3", "SSSE3")),
        (ARM_FORMAT, ("NEON", "ARM_FMA", "FP16_VA", "DOTPROD", "SVE")),
        ("", ()),
        ("garbage without separators", ()),
    ],
)  # fmt: skip
def test_parse_simd(info: str, expected: tuple[str, ...]) -> None:
    assert native.parse_simd(info) == expected


def test_cpuinfo_fallback(tmp_path: Path) -> None:
    x86 = tmp_path / "x86"
    x86.write_text(
        "processor\t: 0\nflags\t\t: fpu sse2 pni ssse3 fma avx f16c avx2 bmi2 avx512f\n\nflags : ignored\n"
    )
    assert native.cpuinfo_simd(x86) == ("SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2", "AVX512")
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd evtstrm asimdhp asimddp i8mm sve\n")
    assert native.cpuinfo_simd(arm) == ("NEON", "FP16_VA", "MATMUL_INT8", "SVE", "DOTPROD")
    assert native.cpuinfo_simd(tmp_path / "missing") == ()
    # An info string with no CPU features falls back to /proc/cpuinfo.
    assert native.simd_features(info="", cpuinfo_path=x86)[:2] == ("SSE3", "SSSE3")
    assert native.simd_features(info=NEW_FORMAT, cpuinfo_path=arm)[0] == "SSE3"


def test_ensure_backend_is_idempotent() -> None:
    assert native.ensure_backend() is True
    assert native.ensure_backend() is True


def test_backend_init_runs_once_across_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    import llama_cpp

    calls: list[int] = []

    def slow_init() -> None:
        calls.append(threading.get_ident())
        time.sleep(0.02)  # widen the window in which a second thread could slip in

    monkeypatch.setattr(native, "_backend_ready", False)
    monkeypatch.setattr(llama_cpp, "llama_backend_init", slow_init)
    barrier = threading.Barrier(8)
    results: list[bool] = []

    def worker() -> None:
        barrier.wait()
        results.append(native.ensure_backend())

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 8
    assert len(calls) == 1


def test_system_info_names_the_cpu_backend() -> None:
    info = native.system_info()
    assert "CPU : " in info or "AVX" in info or "NEON" in info


def test_backend_devices_include_the_cpu() -> None:
    devices = native.backend_devices()
    cpu = [d for d in devices if d.type is DeviceType.CPU]
    assert cpu, devices
    assert cpu[0].name and cpu[0].memory_total > 0
    assert 0 < cpu[0].memory_free <= cpu[0].memory_total


def test_gpu_offload_agrees_with_devices() -> None:
    # A local GPU/IGPU device, not llama_supports_gpu_offload(), which RPC alone makes true.
    has_gpu_device = any(
        d.type in (DeviceType.GPU, DeviceType.IGPU) and not d.name.startswith("RPC")
        for d in native.backend_devices()
    )
    assert native.supports_gpu_offload() is has_gpu_device


def test_version_and_load_error() -> None:
    import llama_cpp

    assert native.llama_cpp_version() == llama_cpp.__version__
    assert native.load_error() is None


def test_everything_degrades_without_llama_cpp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` raise ImportError
    monkeypatch.setattr(native, "_backend_ready", False)
    assert native.ensure_backend() is False
    assert native.supports_gpu_offload() is False
    assert native.system_info() == ""
    assert native.backend_devices() == ()
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("flags : avx avx2\n")
    assert native.simd_features(cpuinfo_path=cpuinfo) == ("AVX", "AVX2")
    assert native.load_error() is not None and "llama.cpp could not be loaded" in native.load_error()

    def no_metadata(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", no_metadata)
    assert native.llama_cpp_version() == ""


def test_imports_are_lazy_and_llava_is_never_imported() -> None:
    # In a fresh interpreter: other tests may have imported these modules already.
    code = (
        "import sys, engine.native.backend, engine.machine.hardware, engine.base.units\n"
        "assert 'llama_cpp' not in sys.modules, 'llama_cpp imported eagerly'\n"
        "assert 'pynvml' not in sys.modules, 'pynvml imported eagerly'\n"
        "native = engine.native.backend\n"
        "native.backend_devices(); native.system_info(); native.supports_gpu_offload()\n"
        "assert 'llama_cpp' in sys.modules\n"
        "assert 'llama_cpp.llava_cpp' not in sys.modules, 'llava_cpp imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)


def test_native_batch_refuses_more_logit_rows_than_reserved() -> None:
    """llama.cpp aborts on a batch with more outputs than n_outputs_max: never let one through."""
    from engine.native.backend import ensure_backend
    from engine.native.batch import NativeBatch

    assert ensure_backend()
    batch = NativeBatch(16, max_outputs=3)
    batch.add_run(0, 0, [1, 2, 3, 4], range(2, 4))
    batch.add_run(1, 0, [5], range(4, 5))
    assert batch.n_outputs == 3
    with pytest.raises(ValueError, match="logit rows"):
        batch.add_run(2, 0, [6], range(5, 6))
    batch.clear()
    batch.add_run(2, 0, [6, 7, 8], range(0, 3))  # a cleared batch starts counting again
    assert batch.n_outputs == 3
