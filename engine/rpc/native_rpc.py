"""ctypes over libggml-rpc, the library the engine's own llama.cpp loads (``GGML_RPC=ON``).

``llama_cpp`` does not bind ggml-rpc. The library is opened from the same ``llama_cpp/lib``
folder the engine loads llama.cpp from (``engine.native.lib_dir.llama_lib_dir``): in a build with
its backends linked in, libggml already loaded it and dlopen hands back that copy, so the
devices registered here are the ones llama.cpp sees.

Every function here can abort the process inside llama.cpp when a worker cannot be reached
(ggml-rpc's rpc_dispatcher::start calls GGML_ABORT on a failed connect or handshake, and
its dispatcher thread on any failed send or receive). Call them only in a child process:
the probe (``engine.rpc.probe``), or a split model's own (``engine.model_process.child``, after
a probe reached the worker, with ``engine.rpc.guard`` installed).
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from pathlib import Path

from engine.base.errors import LoadFailed

_c = ctypes
_dev_t = _c.c_void_p
_lock = threading.Lock()
_bindings: _Bindings | None = None
_registered: dict[str, tuple[int, ...]] = {}  # endpoint -> its device handles (llama.cpp keeps them)


@dataclass(frozen=True)
class LocalDevice:
    """A ggml device of this process, with its native handle (for ``start_server``)."""

    name: str
    description: str
    handle: int
    memory_free: int
    memory_total: int
    type: int = 0  # ggml_backend_dev_type: 0 CPU, 1 GPU, 2 IGPU, 3 ACCEL

    @property
    def is_local_gpu(self) -> bool:
        """A GPU of this machine (RPC devices report the GPU type too: told apart by name)."""
        return self.type in (1, 2) and not self.name.startswith("RPC")


@dataclass(frozen=True)
class _Bindings:
    start_server: object
    add_server: object
    get_device_memory: object
    reg_dev_count: object
    reg_dev_get: object
    dev_count: object
    dev_get: object
    dev_name: object
    dev_description: object
    dev_memory: object
    dev_type: object
    set_abort_callback: object


def library_path() -> Path | None:
    """libggml-rpc in llama_cpp/lib, or None when this build has none."""
    from engine.native.lib_dir import llama_lib_dir

    folder = llama_lib_dir()
    if folder is None:
        return None
    return _soname(folder, "ggml-rpc")


def _soname(folder: Path, lib: str) -> Path | None:
    """``lib`` by the name other libraries link it by (``libggml-base.so.0``), else any.

    llama-cpp-python installs ``libX.so``, ``libX.so.0`` and ``libX.so.0.x`` as copies, not
    links, and a copy opened by another name is a second library with its own globals:
    ggml's abort callback set in ``libggml-base.so`` would never be seen by the
    ``libggml-base.so.0`` that libggml-rpc calls. Opening the linked name (dlopen matches
    it to the loaded file) reaches the copy llama.cpp itself uses.
    """
    for name in (f"lib{lib}.so.0", f"lib{lib}.so", f"lib{lib}.dylib", f"{lib}.dll"):
        if (folder / name).exists():
            return folder / name
    return None


def bindings() -> _Bindings:
    """The prototypes, built once; ``LoadFailed`` when this llama.cpp was built without RPC."""
    global _bindings
    with _lock:
        if _bindings is not None:
            return _bindings
        from engine.native.backend import require_backend

        require_backend()
        path = library_path()
        if path is None:
            raise LoadFailed(
                "This llama.cpp build has no RPC backend (libggml-rpc): rebuild with `make native`."
            )
        rpc = _c.CDLL(str(path))
        ggml = _c.CDLL(str(_soname(path.parent, "ggml") or path))
        base = _c.CDLL(str(_soname(path.parent, "ggml-base") or path))
        size_p = _c.POINTER(_c.c_size_t)
        _bindings = _Bindings(
            start_server=_c.CFUNCTYPE(
                None, _c.c_char_p, _c.c_char_p, _c.c_size_t, _c.c_size_t, _c.POINTER(_dev_t)
            )(("ggml_backend_rpc_start_server", rpc)),
            add_server=_c.CFUNCTYPE(_c.c_void_p, _c.c_char_p)(("ggml_backend_rpc_add_server", rpc)),
            get_device_memory=_c.CFUNCTYPE(None, _c.c_char_p, _c.c_uint32, size_p, size_p)(
                ("ggml_backend_rpc_get_device_memory", rpc)
            ),
            reg_dev_count=_c.CFUNCTYPE(_c.c_size_t, _c.c_void_p)(("ggml_backend_reg_dev_count", ggml)),
            reg_dev_get=_c.CFUNCTYPE(_dev_t, _c.c_void_p, _c.c_size_t)(("ggml_backend_reg_dev_get", ggml)),
            dev_count=_c.CFUNCTYPE(_c.c_size_t)(("ggml_backend_dev_count", ggml)),
            dev_get=_c.CFUNCTYPE(_dev_t, _c.c_size_t)(("ggml_backend_dev_get", ggml)),
            dev_name=_c.CFUNCTYPE(_c.c_char_p, _dev_t)(("ggml_backend_dev_name", ggml)),
            dev_description=_c.CFUNCTYPE(_c.c_char_p, _dev_t)(("ggml_backend_dev_description", ggml)),
            dev_memory=_c.CFUNCTYPE(None, _dev_t, size_p, size_p)(("ggml_backend_dev_memory", ggml)),
            dev_type=_c.CFUNCTYPE(_c.c_int, _dev_t)(("ggml_backend_dev_type", ggml)),
            set_abort_callback=_c.CFUNCTYPE(_c.c_void_p, _c.c_void_p)(("ggml_set_abort_callback", base)),
        )
        return _bindings


def local_devices() -> tuple[LocalDevice, ...]:
    """This process's ggml devices with their handles, in ggml's order (RPC devices included)."""
    b = bindings()
    out = []
    for i in range(b.dev_count()):
        dev = b.dev_get(i)
        if not dev:
            continue
        free, total = _c.c_size_t(0), _c.c_size_t(0)
        b.dev_memory(dev, _c.byref(free), _c.byref(total))
        out.append(
            LocalDevice(
                name=(b.dev_name(dev) or b"").decode(errors="replace"),
                description=(b.dev_description(dev) or b"").decode(errors="replace"),
                handle=int(dev),
                memory_free=free.value,
                memory_total=total.value,
                type=int(b.dev_type(dev)),
            )
        )
    return tuple(out)


def start_server(
    endpoint: str, cache_dir: str | None, n_threads: int, devices: tuple[LocalDevice, ...]
) -> None:
    """Serve ``devices`` at ``endpoint``; returns only when the server could not start
    (llama.cpp prints why: the port taken, a device that would not initialise)."""
    b = bindings()
    array = (_dev_t * len(devices))(*(d.handle for d in devices))
    b.start_server(
        endpoint.encode(), cache_dir.encode() if cache_dir else None, n_threads, len(devices), array
    )


def add_server(endpoint: str) -> tuple[int, ...]:
    """Register the worker at ``endpoint`` (once per process) and return its device handles.

    Connects to the worker: call only after a child process reached it (see module docs).
    Unlike llama.cpp's own tools, Hearth does not ``ggml_backend_register`` the returned
    registry: the worker's devices stay out of ggml's device list, so no other model, no
    hardware snapshot and no device query ever talks to a worker (a query to a lost one
    would abort); a split load names them explicitly (engine/runtime/loader.py).
    """
    b = bindings()
    reg = b.add_server(endpoint.encode())
    if not reg:
        raise LoadFailed(f"The worker at {endpoint} offers no devices.")
    handles = tuple(int(b.reg_dev_get(reg, i)) for i in range(b.reg_dev_count(reg)))
    with _lock:
        _registered[endpoint] = handles
    return handles


def registered() -> dict[str, tuple[int, ...]]:
    """The workers registered in this process, with their device handles."""
    with _lock:
        return dict(_registered)


def device_memory(endpoint: str, index: int) -> tuple[int, int]:
    """(free, total) bytes of device ``index`` on the worker at ``endpoint``."""
    b = bindings()
    free, total = _c.c_size_t(0), _c.c_size_t(0)
    b.get_device_memory(endpoint.encode(), index, _c.byref(free), _c.byref(total))
    return free.value, total.value
