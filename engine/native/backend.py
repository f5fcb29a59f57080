"""The one place that brings up llama.cpp's process-wide state and asks the build what it can do.

``llama_cpp`` is imported lazily inside each function: loading it maps several native
libraries (hundreds of milliseconds), and the CLI, the GUI's first paint and most tests
must not pay for that just by importing an engine module. Every function here degrades
to an empty/False answer when ``llama_cpp`` cannot be imported (not installed, a missing
``libgomp``, a broken bundle), so hardware discovery still works and the caller can show
``load_error()`` to the user.

Never import ``llama_cpp.llava_cpp``: that library is no longer built and the import fails.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import threading
from pathlib import Path
from types import ModuleType

from engine.base.errors import LoadFailed, NativeBuildUnsafe
from engine.machine.devices import BackendDevice, DeviceType
from engine.native.lib_dir import cpuinfo_simd, llama_lib_dir, parse_simd, register_dynamic_backends
from engine.native.probe import check_build

# The only mutable module state in the engine: llama_backend_init must run exactly once per
# process, and both the GUI thread and executor threads may be first to need it. A build
# that failed its self-check (engine/native/probe.py) is never initialised in this process.
_backend_lock = threading.Lock()
_backend_ready = False
_unsafe_reason: str | None = None


def _llama() -> ModuleType | None:
    """``llama_cpp`` or None. Python caches a successful import, so this is cheap after the first."""
    try:
        import llama_cpp
    except Exception:  # ImportError, or OSError/RuntimeError when a shared library will not load
        return None
    return llama_cpp


def load_error() -> str | None:
    """Why llama.cpp cannot be used in this process, in one line; None when it can."""
    if _unsafe_reason is not None:
        return _unsafe_reason
    try:
        import llama_cpp  # noqa: F401
    except Exception as exc:
        return f"llama.cpp could not be loaded: {type(exc).__name__}: {exc}".splitlines()[0]
    return None


def ensure_backend() -> bool:
    """Run ``llama_backend_init`` once per process; True when llama.cpp is ready to use.

    Safe to call from any thread, any number of times. Call it before any other llama.cpp
    function (every function in this module does). The first call in a process checks that
    this build survived its self-check in a child process (probing it once per build), so a
    build that would die of SIGILL never runs here; ``load_error()`` then says why.
    """
    global _backend_ready, _unsafe_reason
    if _backend_ready:  # fast path without the lock: the flag only ever goes False -> True
        return True
    with _backend_lock:
        if _backend_ready:
            return True
        if _unsafe_reason is not None:
            return False
        if llama_lib_dir() is not None:  # without llama_cpp there is nothing to probe
            verdict = check_build()
            if not verdict.ok:
                _unsafe_reason = verdict.message  # said by load_error() and the typed errors
                return False
        llama = _llama()
        if llama is None:
            return False
        fix_malloc_threshold()
        register_dynamic_backends()
        llama.llama_backend_init()
        # Route native logs through Python logging before anything else is printed
        # (llama-cpp-python's own callback writes every level to stderr).
        from engine.native.llama_log import get_router

        get_router()
        _backend_ready = True
        return True


# glibc's mallopt parameter, and the size from which each allocation is its own mapping.
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 1024 * 1024


def fix_malloc_threshold() -> bool:
    """Give every allocation of 1 MiB or more its own mapping, for the life of the process.

    glibc raises its mmap threshold each time a mapped block is freed, up to 32 MiB, and
    its heap trim threshold with it: after llama.cpp frees one loader or warmup buffer,
    buffers of that size land in the heap, and freed ones stay resident there. What a load
    costs then depends on what was freed before it (a tiny model's growth swung by 20%
    between 1, 4 and 8 conversations). A fixed threshold keeps llama.cpp's buffers (KV,
    compute, output, the samplers' candidate arrays) in mappings that are returned the
    moment they are freed, so the process holds what the plan says. Nothing that runs
    per token allocates that much (the sampler chain keeps its candidate array). False
    where there is no glibc.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    except (OSError, AttributeError):
        return False


def release_freed_memory() -> None:
    """Hand memory freed by llama.cpp back to the system (glibc keeps it in its arenas).

    After a model is unloaded, its context's and loader's buffers stay in the executor
    thread's malloc arena: about 200 MB after 60 Gemma load/unload cycles, which
    ``malloc_trim(0)`` returns. A no-op where there is no glibc.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def require_backend() -> None:
    """``ensure_backend`` for code that is about to load a model: a typed error when it cannot."""
    if not ensure_backend():
        reason = load_error() or "llama.cpp is not available."
        raise NativeBuildUnsafe(reason) if _unsafe_reason is not None else LoadFailed(reason)


def supports_gpu_offload() -> bool:
    """Whether this llama.cpp build has a GPU backend (CUDA, Vulkan, Metal, ...) with a device.

    Not ``llama_supports_gpu_offload()``: that is also true whenever the RPC backend is
    built in (every Hearth build, engine/native/build.py), which would make a CPU-only
    build look able to offload to the machine's GPU. RPC workers' devices reach the
    planner on their own (``HardwareSnapshot.remote_devices``).
    """
    if not ensure_backend():
        return False
    return any(
        d.type in (DeviceType.GPU, DeviceType.IGPU) and not d.name.startswith("RPC")
        for d in backend_devices()
    )


def system_info() -> str:
    """``llama_print_system_info()``: per backend, ``"CPU : SSE3 = 1 | AVX = 1 | ... | "``."""
    if not ensure_backend():
        return ""
    llama = _llama()
    assert llama is not None
    raw = llama.llama_print_system_info()
    return raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw or "")


def llama_cpp_version() -> str:
    """The installed llama-cpp-python version, e.g. ``"0.3.36"``; ``""`` when unknown.

    Package metadata first, because it answers without loading the native libraries; the
    module attribute covers bundles (PyInstaller) that did not copy the metadata.
    """
    try:
        return importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        pass
    llama = _llama()
    return str(getattr(llama, "__version__", "")) if llama is not None else ""


def backend_devices() -> tuple[BackendDevice, ...]:
    """The ggml backend devices this build can use, in ggml's order (CPU is always there).

    ``llama_cpp`` does not bind these functions, so we build our own ctypes prototypes
    over ``llama_cpp._ggml.libggml`` instead of setting argtypes on the shared function
    objects, which other code may also configure.
    """
    if not ensure_backend():
        return ()
    try:
        from llama_cpp import _ggml

        lib = _ggml.libggml
    except Exception:
        return ()
    c = ctypes
    dev_t = c.c_void_p
    try:
        dev_count = c.CFUNCTYPE(c.c_size_t)(("ggml_backend_dev_count", lib))
        dev_get = c.CFUNCTYPE(dev_t, c.c_size_t)(("ggml_backend_dev_get", lib))
        dev_name = c.CFUNCTYPE(c.c_char_p, dev_t)(("ggml_backend_dev_name", lib))
        dev_desc = c.CFUNCTYPE(c.c_char_p, dev_t)(("ggml_backend_dev_description", lib))
        dev_type = c.CFUNCTYPE(c.c_int, dev_t)(("ggml_backend_dev_type", lib))
        # void ggml_backend_dev_memory(dev, size_t *free, size_t *total): free comes first.
        dev_memory = c.CFUNCTYPE(None, dev_t, c.POINTER(c.c_size_t), c.POINTER(c.c_size_t))(
            ("ggml_backend_dev_memory", lib)
        )
    except AttributeError:  # a libggml without the device API: report nothing rather than guess
        return ()

    devices: list[BackendDevice] = []
    for i in range(dev_count()):
        dev = dev_get(i)
        if not dev:
            continue
        try:
            kind = DeviceType(dev_type(dev))
        except ValueError:  # a device type newer than this code: we could not plan for it anyway
            continue
        free, total = c.c_size_t(0), c.c_size_t(0)
        dev_memory(dev, c.byref(free), c.byref(total))
        devices.append(
            BackendDevice(
                name=_text(dev_name(dev)),
                description=_text(dev_desc(dev)),
                type=kind,
                memory_total=total.value,
                memory_free=free.value,
            )
        )
    return tuple(devices)


def simd_features(info: str | None = None, cpuinfo_path: Path = Path("/proc/cpuinfo")) -> tuple[str, ...]:
    """SIMD features of the CPU backend, e.g. ``("SSE3", "SSSE3", "AVX", "AVX2", "FMA")``.

    From ``system_info()`` (what this build actually uses — a portable build may use less
    than the CPU has); from /proc/cpuinfo flags when llama.cpp is unavailable or reports
    nothing. ``info`` and ``cpuinfo_path`` exist for tests.
    """
    features = parse_simd(system_info() if info is None else info)
    return features or cpuinfo_simd(cpuinfo_path)


def _text(raw: bytes | None) -> str:
    return raw.decode("utf-8", errors="replace") if raw else ""
