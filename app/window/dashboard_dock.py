"""The dashboard's dock: the live ``DashboardView``, made the first time the dock shows (it
samples while visible), kept told of the loaded model, its load, the RPC workers and the
documents' embedding model while one is open."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QDockWidget, QWidget

from app.dashboard import DashboardView
from app.services.document_jobs import OpenEmbedder
from app.services.model_session import ModelSession
from app.services.workers import WorkerRegistry
from engine import HardwareSnapshot, LoadedModel


class DashboardDock(QDockWidget):
    """``hardware``: the machine as measured then (None until the window starts); ``owner_names``:
    a request owner's display name (a conversation's title)."""

    def __init__(
        self,
        session: ModelSession,
        workers: WorkerRegistry,
        telemetry: object | None,
        hardware: Callable[[], HardwareSnapshot | None],
        owner_names: Callable[[str], str | None],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__("Dashboard", parent)
        self.setObjectName("dashboardDock")
        self.setVisible(False)
        self.session = session
        self.workers = workers
        self._telemetry = telemetry
        self._hardware = hardware
        self._owner_names = owner_names
        self.view: DashboardView | None = None  # created on first show: it samples while visible
        self._embedder: OpenEmbedder | None = None
        self.action = self.toggleViewAction()
        self.action.setText("Dashboard")
        self.action.setShortcut(QKeySequence("Ctrl+D"))
        self.action.toggled.connect(self.ensure)

    def ensure(self, visible: bool) -> None:
        if self.isVisible() != visible:
            self.setVisible(visible)
        if not visible or self.view is not None:
            return
        self.view = DashboardView(self._telemetry, snapshot=self._hardware())
        self.view.set_owner_names(self._owner_names)
        self.view.set_workers(self.workers.workers)
        self._show_embedder()
        model = self.session.ready_model
        if model is not None:
            self.view.set_model(model)
            self.view.set_load_report(model.plan, model.reported_memory)
        self.setWidget(self.view)

    def loading(self, model: LoadedModel | None) -> None:
        """A load began: the view measures its memory growth from here."""
        if self.view is not None:
            self.view.set_model(model)

    def ready(self, model: LoadedModel) -> None:
        if self.view is not None:
            self.view.set_model(model)
            self.view.set_load_report(model.plan, model.reported_memory)

    def set_embedder(self, embedder: OpenEmbedder | None) -> None:
        """The documents' embedder opened (its name and memory) or closed (None)."""
        self._embedder = embedder
        self._show_embedder()

    def _show_embedder(self) -> None:
        if self.view is None:
            return
        e = self._embedder
        self.view.set_embedder(e.name if e is not None else None, e.memory if e is not None else 0)

    def set_workers(self, workers: tuple) -> None:
        if self.view is not None:
            self.view.set_workers(workers)

    def shutdown(self) -> None:
        if self.view is not None:
            self.view.shutdown()
