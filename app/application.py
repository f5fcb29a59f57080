"""Start the GUI: a QApplication driven by a qasync event loop, and the main window."""

from __future__ import annotations

import asyncio
import sys

from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication

from app.paths import AppPaths
from app.resources import resource_path

APP_ID = "io.hearth.Hearth"


def create_application(argv: list[str] | None = None) -> QApplication:
    app = QApplication.instance() or QApplication(argv if argv is not None else sys.argv[:1])
    app.setApplicationName("Hearth")
    app.setOrganizationName("Hearth")
    app.setDesktopFileName(APP_ID)
    icon = resource_path("hearth.svg")
    if icon.exists():
        app.setWindowIcon(QIcon(str(icon)))
    return app  # type: ignore[return-value]


def run_gui(paths: AppPaths) -> int:
    import qasync

    from app.main_window import MainWindow

    app = create_application()
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    window = MainWindow(paths.ensure())
    window.show()
    window.start()
    with loop:
        closed = asyncio.Event()
        app.aboutToQuit.connect(closed.set)
        loop.run_until_complete(closed.wait())
    return 0
