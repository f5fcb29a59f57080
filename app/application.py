"""Start the GUI: a QApplication driven by a qasync event loop, and the main window."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication

from app.platform.gui_garbage import GuiThreadCollector
from app.platform.paths import AppPaths
from app.platform.resources import resource_path

APP_ID = "io.hearth.Hearth"


def create_application(argv: list[str] | None = None) -> QApplication:
    app = QApplication.instance() or QApplication(argv if argv is not None else sys.argv[:1])
    app.setApplicationName("Hearth")
    app.setOrganizationName("Hearth")
    app.setDesktopFileName(APP_ID)
    icon = resource_path("hearth.svg")
    if icon.exists():
        app.setWindowIcon(QIcon(str(icon)))
    if getattr(app, "garbage", None) is None:
        app.garbage = GuiThreadCollector(app)  # type: ignore[attr-defined]
    return app  # type: ignore[return-value]


def freeze_startup_heap() -> None:
    """What start-up made (modules, widgets, the engine's tables) lives as long as the app:
    kept out of the collector's sight, a full collection scans only what came later. In
    the open window a full collection otherwise took 50-100 ms, a visible stall whenever
    many objects were made at once (a 50,000-result Hub search)."""
    import gc

    gc.collect()
    gc.freeze()


def run_gui(paths: AppPaths, load: Path | None = None, send: str | None = None) -> int:
    """The window on a qasync loop. ``load``: a model to load at once (with its remembered
    settings); ``send``: a first message for a new chat once it is loaded."""
    import qasync
    from PySide6.QtCore import QLockFile
    from PySide6.QtWidgets import QMessageBox

    from app.platform.single_instance import InstanceServer, ask_running_to_raise
    from app.window.main_window import MainWindow

    app = create_application()
    paths.ensure()
    # One Hearth per data folder: a second one would mark the first's live replies as
    # interrupted and write to the same conversations.
    lock = QLockFile(str(paths.data_dir / "hearth.lock"))
    lock.setStaleLockTime(0)
    if not lock.tryLock(100):
        if ask_running_to_raise(paths.data_dir):
            print("hearth: Hearth is already running with this data folder: its window is brought forward.")
            return 0
        QMessageBox.information(
            None, "Hearth", f"Hearth is already running with this data folder:\n{paths.data_dir}"
        )
        return 1
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    window = MainWindow(paths)
    instance = InstanceServer(paths.data_dir)
    instance.raise_requested.connect(window.bring_forward)
    instance.listen()
    window.show()
    window.start(load_last=load is None)  # a model asked for replaces the last one
    freeze_startup_heap()
    if load is not None:
        window.load_and_send(load, send)
    with loop:
        closed = asyncio.Event()
        app.aboutToQuit.connect(closed.set)
        loop.run_until_complete(closed.wait())
        loop.run_until_complete(window.local_server.stopped())  # its socket, closed on this loop
    instance.close()
    lock.unlock()
    # Delete the application while Python is alive: Qt's exit handlers would otherwise
    # destroy objects whose Python wrappers are already gone (a crash on quit).
    del window
    app.garbage.stop()  # type: ignore[attr-defined]
    app.shutdown()
    return 0
