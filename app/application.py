"""Start the GUI: a QApplication driven by a qasync event loop, the services built in order
(``build_services``, read top to bottom), and the main window given them."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication

from app.platform.gui_garbage import GuiThreadCollector
from app.platform.paths import AppPaths
from app.platform.resources import resource_path
from app.services.bundle import Services
from app.services.discover import DiscoverController
from app.services.documents import DocumentsService
from app.services.library import LibraryController
from app.services.local_server import LocalServer
from app.services.model_session import ModelSession
from app.services.remote_servers import RemoteServers
from app.services.tools import ToolsService
from app.services.workers import WorkerRegistry
from app.settings.key_vault import KeyVault
from app.settings.recent_folder import RecentFolder
from app.store.history import Store
from engine import HardwareSnapshot

if TYPE_CHECKING:
    from app.window.main_window import MainWindow

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


def build_services(
    paths: AppPaths, hardware: HardwareSnapshot | None = None, keys: KeyVault | None = None
) -> Services:
    """The app's long-lived services, each after what it needs. ``hardware``: the machine as
    measured (None: the window measures it when it starts); ``keys``: where remote servers'
    API keys go (the system keyring when None). None has a parent yet: the window takes them."""
    store = Store(paths.database_file)  # conversations and settings
    session = ModelSession()  # the one model that answers chats
    library = LibraryController(paths.library_file, default_folders=(paths.models_dir,))
    recent_folder = RecentFolder(store, paths.models_dir)  # where the file dialogs open
    remote_servers = RemoteServers(store, keys or KeyVault.system())
    workers = WorkerRegistry(paths.workers_file)  # RPC workers a model may be split over
    session.model_ready.connect(lambda model: workers.set_in_use(model.plan.workers))
    session.model_unloaded.connect(lambda: workers.set_in_use(()))
    # the Hub: search, plans (with the workers' devices), downloads
    discover = DiscoverController(paths, hardware, workers=lambda: workers.workers)
    # The Local server: the OpenAI-compatible API serving whatever model is loaded.
    local_server = LocalServer(store, lambda: session.model)
    # Collections of the user's files: the index and the embedder open on a worker when needed.
    documents = DocumentsService(paths)
    tools = ToolsService(paths, store)  # MCP servers (mcp.json); started with the window
    return Services(
        paths, hardware, store, session, library, recent_folder,
        remote_servers, workers, discover, local_server, documents, tools,
    )  # fmt: skip


def build_window(
    paths: AppPaths,
    hardware: HardwareSnapshot | None = None,
    telemetry: object | None = None,
    keys: KeyVault | None = None,
) -> MainWindow:
    """The main window on ``paths``, with its services built (not yet shown or started)."""
    from app.window.main_window import MainWindow

    return MainWindow(build_services(paths, hardware, keys), telemetry)


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
    window = build_window(paths)
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
