"""The services the start-up script (``app.application.build_services``) makes, handed to the
main window as one value: the window wires its widgets to them and owns them from then on."""

from __future__ import annotations

from dataclasses import dataclass

from app.platform.paths import AppPaths
from app.services.discover import DiscoverController
from app.services.documents import DocumentsService
from app.services.library import LibraryController
from app.services.local_server import LocalServer
from app.services.model_session import ModelSession
from app.services.remote_servers import RemoteServers
from app.services.tools import ToolsService
from app.services.workers import WorkerRegistry
from app.settings.recent_folder import RecentFolder
from app.store.history import Store
from engine import HardwareSnapshot


@dataclass(frozen=True)
class Services:
    paths: AppPaths
    hardware: HardwareSnapshot | None  # None: measured when the window starts
    store: Store
    session: ModelSession
    library: LibraryController
    recent_folder: RecentFolder
    remote_servers: RemoteServers
    workers: WorkerRegistry
    discover: DiscoverController
    local_server: LocalServer
    documents: DocumentsService
    tools: ToolsService
