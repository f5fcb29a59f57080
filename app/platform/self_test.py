"""Checks a packaged Hearth can run on this machine, for packagers, CI and bug reports.

``hearth --self-test`` writes a tiny random-weight model into a temporary folder, plans and
loads it through the engine, generates a few greedy tokens and unloads it, and makes sure
Qt starts and renders Hearth's icon (the SVG plugins are the part of a bundle that goes
missing most easily). It prints one line and exits 0, or ``Hearth self-test FAILED: ...``
and exits 1. It needs no display, no network and no model, and writes only inside its
temporary folder.

``hearth --startup-probe`` opens the real main window on a fresh, empty data folder and
prints how long it took from process start until the window was painted: the cold start
time users see when they double-click the icon.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

SELF_TEST_TOKENS = 16
_TIMEOUT_S = 120.0  # generous: a loaded CI machine, and a tiny model loads in milliseconds


class SelfTestFailed(Exception):
    """A check failed; the message is the one-line reason printed after FAILED."""


def run_self_test() -> int:
    """Run every check and print one line; the process exit code (0 ok, 1 failed)."""
    try:
        with tempfile.TemporaryDirectory(prefix="hearth-self-test-") as tmp, _isolated_env(Path(tmp)):
            report = _self_test(Path(tmp))
    except SelfTestFailed as exc:
        print(f"Hearth self-test FAILED: {exc}", flush=True)
        return 1
    except Exception as exc:  # the point of a self-test: any failure becomes a readable line
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
        print(f"Hearth self-test FAILED: {reason}", flush=True)
        return 1
    print(f"Hearth self-test OK: {report}", flush=True)
    return 0


def _self_test(tmp: Path) -> str:
    from engine import llama_cpp_version, native_load_error

    error = native_load_error()
    if error is not None:
        raise SelfTestFailed(error)
    qt = _check_qt()

    from engine import (
        GREEDY,
        ChatMessage,
        ChatRequest,
        Engine,
        EngineError,
        LoadRequest,
        inspect_model,
        plan_load,
        take_snapshot,
        write_tiny_text_model,
    )

    try:
        model_path = write_tiny_text_model(tmp / "self-test-tiny-llama.gguf")
        snapshot = take_snapshot()
        plan = plan_load(
            inspect_model(model_path), snapshot, LoadRequest(context_per_conversation=256, parallel=1)
        )
        if not plan.fits:
            raise SelfTestFailed("the planner says a 0.5 MB model does not fit: " + "; ".join(plan.reasons))
        started = time.perf_counter()
        model = Engine.load(plan).wait_ready(_TIMEOUT_S)
        load_seconds = time.perf_counter() - started
        try:
            request = ChatRequest(
                messages=(ChatMessage("user", "Say something."),),
                sampling=GREEDY,
                max_tokens=SELF_TEST_TOKENS,
                ignore_eos=True,  # random weights may pick end-of-turn at once; we want the tokens
                cache=False,
                owner="self-test",
            )
            completion = model.submit(request).wait(_TIMEOUT_S)
        finally:
            model.unload()
    except EngineError as exc:
        raise SelfTestFailed(exc.message) from exc
    except TimeoutError as exc:
        raise SelfTestFailed(f"{exc} (limit {_TIMEOUT_S:.0f} s)") from exc

    tokens = completion.usage.completion_tokens
    if tokens != SELF_TEST_TOKENS:
        raise SelfTestFailed(
            f"asked for {SELF_TEST_TOKENS} tokens, got {tokens} ({completion.stop_reason.value})"
        )
    device = _device_label(plan.params.n_gpu_layers, snapshot)
    tps = completion.timings.decode_tokens_per_second
    return (
        f"llama.cpp {llama_cpp_version() or 'unknown version'}, {device}, "
        f"loaded in {load_seconds:.2f} s, {tokens} tokens at {tps:,.0f} tok/s, {qt}"
    )


def _device_label(gpu_layers: int, snapshot: object) -> str:
    from engine import DeviceType, HardwareSnapshot

    assert isinstance(snapshot, HardwareSnapshot)
    if gpu_layers > 0:
        gpus = [d.description or d.name for d in snapshot.backend_devices if d.type is not DeviceType.CPU]
        return f"GPU ({gpus[0]})" if gpus else "GPU"
    # What this llama.cpp build uses, which for a portable build is less than the CPU offers.
    simd = [f for f in snapshot.simd if f.startswith(("AVX", "NEON", "SVE", "AMX"))]
    return f"CPU ({', '.join(simd)})" if simd else "CPU"


def _check_qt() -> str:
    """Import the GUI, start Qt as it does and render the app icon; ``"Qt 6.x.y (platform)"``."""
    from PySide6 import __version__ as pyside_version
    from PySide6.QtGui import QGuiApplication

    from app.application import create_application
    from app.platform.resources import resource_path

    # The window's whole import graph: in a bundle, a module PyInstaller missed fails here
    # with its name instead of when a user opens the app.
    importlib.import_module("app.window.main_window")
    if not resource_path("hearth.svg").is_file():
        raise SelfTestFailed(f"resources are missing: no {resource_path('hearth.svg')}")
    app = create_application()
    pixmap = app.windowIcon().pixmap(64, 64)
    if pixmap.isNull():
        raise SelfTestFailed("Qt cannot render Hearth's SVG icon (Qt's SVG plugins or libQt6Svg are missing)")
    return f"Qt {pyside_version} ({QGuiApplication.platformName()})"


@contextlib.contextmanager
def _isolated_env(tmp: Path) -> Iterator[None]:
    """Keep Qt, fontconfig and anything else that caches per user inside ``tmp``.

    The self-test always runs Qt offscreen: it must work over ssh and in CI, and a missing
    display would make Qt abort the process instead of letting us print a reason.
    """
    overrides = {
        "QT_QPA_PLATFORM": "offscreen",
        "XDG_CACHE_HOME": str(tmp / "cache"),
        "XDG_CONFIG_HOME": str(tmp / "config"),
        "XDG_DATA_HOME": str(tmp / "data"),
        "XDG_STATE_HOME": str(tmp / "state"),
    }
    from PySide6.QtCore import QCoreApplication

    if QCoreApplication.instance() is not None:
        overrides.pop("QT_QPA_PLATFORM")  # Qt is already up (called from a test): keep its platform
    saved = {key: os.environ.get(key) for key in overrides}
    os.environ.update(overrides)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# -- startup probe -------------------------------------------------------------------------------


def seconds_since_process_start() -> float:
    """Seconds since this process was created (the bootloader's start, in a PyInstaller bundle).

    On Linux, from the start time in /proc/self/stat against the same boot-based clock
    (10 ms resolution). psutil's create_time() is not used there: it adds the boot time,
    which the kernel reports in whole seconds, so its absolute error can reach a second.
    """
    if sys.platform.startswith("linux"):
        try:
            stat = Path("/proc/self/stat").read_text()
            # Field 22 (starttime); split after the ")" that ends the command name, which may hold spaces.
            start_ticks = int(stat.rsplit(")", 1)[1].split()[19])
            return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError, AttributeError):
            pass
    import psutil

    return time.time() - psutil.Process().create_time()


def run_startup_probe(timeout: float = 60.0) -> int:
    """Open the main window exactly as ``hearth`` does, on an empty temporary data folder; print
    the time from process start to the first painted frame and exit."""
    with tempfile.TemporaryDirectory(prefix="hearth-startup-probe-") as tmp:
        return _startup_probe(Path(tmp), timeout)


def _startup_probe(tmp: Path, timeout: float) -> int:
    import asyncio

    import qasync
    from PySide6.QtCore import QEvent, QObject, QTimer

    from app.application import build_window, create_application
    from app.platform.paths import resolve_paths

    shown_at: list[float] = []

    class FirstPaint(QObject):
        """Records the first paint of the main window, then stops the loop after it is on screen."""

        def eventFilter(self, watched: QObject, event: QEvent) -> bool:
            if event.type() == QEvent.Type.Paint and not shown_at:
                # After this paint event is handled the frame is flushed; a zero timer runs after that.
                QTimer.singleShot(0, lambda: (shown_at.append(seconds_since_process_start()), painted.set()))
            return False

    # The same sequence as app.application.run_gui, so the number is what a user waits.
    app = create_application()
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    painted = asyncio.Event()
    window = build_window(resolve_paths(tmp / "data").ensure())
    watcher = FirstPaint()
    window.installEventFilter(watcher)
    window.show()
    window.start()
    with loop:
        try:
            loop.run_until_complete(asyncio.wait_for(painted.wait(), timeout))
        except TimeoutError:
            print(f"Hearth startup probe FAILED: no window painted within {timeout:.0f} s", flush=True)
            return 1
        empty_state = window.library_panel.empty_label.isVisible()
        window.close()
    print(
        f"Hearth startup probe: first window painted {shown_at[0]:.2f} s after process start "
        f"(Qt platform {app.platformName()}; empty-library help shown: {'yes' if empty_state else 'no'})",
        flush=True,
    )
    return 0
