"""``hearth worker``: this machine's devices served to other Hearths over llama.cpp's RPC.

``ggml_backend_rpc_start_server`` never returns while it serves. A Python signal handler
only runs in the main thread, between bytecodes, so a main thread blocked in that call
could never see SIGTERM or Ctrl+C: the server runs in a daemon thread and the main thread
waits for a signal (or for the server to give up, e.g. the port taken). There is no way to
stop llama.cpp's accept loop from outside, so a signal ends the process with ``os._exit``
once the message is printed; the OS closes the socket and frees the devices' buffers.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.base.errors import EngineError
from engine.base.units import format_bytes
from engine.rpc.endpoint import WorkerAddress

NO_AUTH_WARNING = (
    "warning: llama.cpp's RPC protocol has no authentication and no encryption: anyone who "
    "can reach this port can run computations on this machine and read what it holds. "
    "Serve only on a network you trust."
)


class WorkerRefused(EngineError):
    """A worker that must not start as asked (a network address without --allow-network)."""


@dataclass(frozen=True)
class WorkerConfig:
    address: WorkerAddress
    devices: tuple[str, ...] = ()  # ggml device names ("CPU", "CUDA0"); () = llama.cpp's choice
    cache_dir: str | None = None
    threads: int | None = None
    allow_network: bool = False


def check_config(config: WorkerConfig) -> None:
    if not config.address.is_loopback and not config.allow_network:
        raise WorkerRefused(
            f"Refusing to listen on {config.address.host}: the RPC protocol has no authentication. "
            "Add --allow-network to serve on a trusted network."
        )
    if config.threads is not None and config.threads < 1:
        raise WorkerRefused("--threads must be at least 1.")


def choose_devices(available: Sequence, wanted: Sequence[str]) -> tuple:
    """The devices to serve: those named (every name must exist), else the accelerators,
    else the CPU — rpc-server's own rule (tools/rpc/rpc-server.cpp, get_devices)."""
    if wanted:
        by_name = {d.name.lower(): d for d in available}
        missing = [w for w in wanted if w.lower() not in by_name]
        if missing:
            names = ", ".join(d.name for d in available) or "none"
            raise WorkerRefused(f"No device named {', '.join(missing)} here; devices: {names}.")
        return tuple(by_name[w.lower()] for w in wanted)
    local = [d for d in available if not d.name.startswith("RPC")]
    # By type where the device says it (an ACCEL device such as BLAS is no GPU), else by name.
    gpus = [d for d in local if getattr(d, "is_local_gpu", not d.name.upper().startswith("CPU"))]
    return tuple(gpus or [d for d in local if d.name.upper().startswith("CPU")][:1])


def _line_buffer_c_stdout() -> None:
    """llama.cpp's server prints its banner and each client with printf; into a pipe (a log,
    `| tee`, a supervisor) C's stdout is fully buffered and those lines would arrive late or
    never: make it line-buffered, as on a terminal. Best effort (glibc)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        stream = ctypes.c_void_p.in_dll(libc, "stdout")
        libc.setvbuf(stream, None, 1, 0)  # _IOLBF
    except (OSError, ValueError, AttributeError):
        pass


def run_worker(config: WorkerConfig, out: Callable[[str], None] = print) -> int:
    """Serve until a signal ends the process; returns (non-zero) only when serving failed."""
    check_config(config)
    from engine.rpc.native_rpc import local_devices, start_server

    devices = choose_devices(local_devices(), config.devices)
    if not devices:
        raise WorkerRefused("This llama.cpp build has no device to serve.")
    threads = config.threads or max(1, os.cpu_count() or 1)
    if not config.address.is_loopback:
        out(NO_AUTH_WARNING)
    out(f"hearth worker: serving at {config.address.endpoint} ({threads} threads)")
    for d in devices:
        out(
            f"  {d.name}: {d.description} — {format_bytes(d.memory_free)} free "
            f"of {format_bytes(d.memory_total)}"
        )
    if config.address.is_loopback:
        out("  (this machine only; --host ADDRESS --allow-network serves a trusted network)")
    sys.stdout.flush()

    _line_buffer_c_stdout()
    stopped = threading.Event()
    signalled: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        signalled.append(signum)
        stopped.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}

    def serve() -> None:
        try:
            start_server(config.address.endpoint, config.cache_dir, threads, devices)
        finally:
            stopped.set()  # llama.cpp gave up: it printed why (port in use, a device failed)

    server = threading.Thread(target=serve, name="rpc-server", daemon=True)
    server.start()
    try:
        while not stopped.wait(0.5):  # a timed wait: signals reach the main thread promptly
            pass
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if signalled:
        out(f"hearth worker: stopped ({signal.Signals(signalled[0]).name})")
        sys.stdout.flush()
        sys.stderr.flush()
        # The server thread is inside llama.cpp's accept loop, which nothing can end.
        os._exit(0)
    out(f"hearth worker: could not serve at {config.address.endpoint} (see llama.cpp's message above)")
    return 1
