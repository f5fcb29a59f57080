"""Where llama.cpp's native libraries are and what they were built for, known before the backend is up.

Shared by the backend (``engine.native.backend``) and the child processes that check a build
or a model file (``probe``, ``model_check``), which must not bring up the backend themselves:
nothing here calls ``llama_backend_init`` or starts a probe.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from pathlib import Path

# system_info keys that describe how the CPU backend was built, not instruction sets.
_NON_SIMD_KEYS = frozenset(
    {
        "ACCELERATE",
        "BLAS",
        "CPU_HBM",
        "CUDA",
        "GPUBLAS",
        "KLEIDIAI",
        "LLAMAFILE",
        "METAL",
        "OPENMP",
        "REPACK",
        "RVV_VLEN",
        "SVE_CNT",
    }
)

# /proc/cpuinfo flag -> the name llama.cpp's system_info uses for the same feature, so
# both sources give the same vocabulary. Order is the order system_info prints them in.
_CPUINFO_FLAGS: tuple[tuple[str, str], ...] = (
    ("pni", "SSE3"),  # the kernel calls SSE3 "pni" (Prescott New Instructions)
    ("ssse3", "SSSE3"),
    ("avx", "AVX"),
    ("avx_vnni", "AVX_VNNI"),
    ("avx2", "AVX2"),
    ("f16c", "F16C"),
    ("fma", "FMA"),
    ("bmi2", "BMI2"),
    ("avx512f", "AVX512"),
    ("avx512vbmi", "AVX512_VBMI"),
    ("avx512_vnni", "AVX512_VNNI"),
    ("avx512_bf16", "AVX512_BF16"),
    ("amx_int8", "AMX_INT8"),
    # aarch64 "Features" line
    ("asimd", "NEON"),
    ("asimdhp", "FP16_VA"),
    ("i8mm", "MATMUL_INT8"),
    ("sve", "SVE"),
    ("asimddp", "DOTPROD"),
    ("sme", "SME"),
    ("sme2", "SME2"),
)


def llama_lib_dir() -> Path | None:
    """Where llama_cpp's native libraries are, found without importing (and so loading) them."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")  # set by the bundle's runtime hook
    if override and Path(override).is_dir():
        return Path(override)
    try:
        spec = importlib.util.find_spec("llama_cpp")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    lib = Path(next(iter(spec.submodule_search_locations))) / "lib"
    return lib if lib.is_dir() else None


def register_dynamic_backends() -> int:
    """Load the backend modules of a ``GGML_BACKEND_DL`` build; the number of backends registered.

    The packaged app's llama.cpp keeps its CPU variants (one per instruction-set level) and
    GPU backends as modules in ``llama_cpp/lib``, and ggml picks the best one the CPU can
    run. ggml only looks beside the executable and in the working directory by itself, so
    we point it at the folder. A build with its backends linked in has them registered
    already and this does nothing.
    """
    try:
        from llama_cpp import _ggml

        lib = _ggml.libggml
        reg_count = ctypes.CFUNCTYPE(ctypes.c_size_t)(("ggml_backend_reg_count", lib))
        count = int(reg_count())
        folder = llama_lib_dir()
        if count == 0 and folder is not None:
            load_all = ctypes.CFUNCTYPE(None, ctypes.c_char_p)(("ggml_backend_load_all_from_path", lib))
            load_all(str(folder).encode())
            count = int(reg_count())
    except (ImportError, OSError, AttributeError):
        return 0
    return count


def parse_simd(info: str) -> tuple[str, ...]:
    """Enabled SIMD features in a ``llama_print_system_info`` string, in printed order.

    Newer builds print one segment per backend, ``"CPU : SSE3 = 1 | AVX = 1 | ... | "``
    (a CUDA build adds ``"CUDA : ARCHS = 890 | ..."``): only the CPU segment counts.
    Older builds print one flat list, ``"AVX = 1 | AVX2 = 0 | ... | LLAMAFILE = 1 | "``.
    """
    current: str | None = None  # backend whose segment we are in; None before any "NAME :"
    saw_backend = False
    found: list[str] = []
    for part in info.split("|"):
        item = part.strip()
        if " : " in item:  # "CPU : SSE3 = 1" starts a backend's segment
            current, item = (s.strip() for s in item.split(" : ", 1))
            saw_backend = True
        if "=" not in item:
            continue
        key, value = (s.strip() for s in item.split("=", 1))
        in_cpu = current == "CPU" if saw_backend else True
        if in_cpu and value == "1" and key and key not in _NON_SIMD_KEYS and key not in found:
            found.append(key)
    return tuple(found)


def cpuinfo_simd(path: Path = Path("/proc/cpuinfo")) -> tuple[str, ...]:
    """SIMD features from the first ``flags`` (x86) or ``Features`` (arm64) line, llama.cpp names."""
    try:
        text = path.read_text(errors="replace")
    except OSError:  # not Linux
        return ()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags = set(value.split())
            return tuple(name for flag, name in _CPUINFO_FLAGS if flag in flags)
    return ()
