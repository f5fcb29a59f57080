"""The RPC workers as the window shows them: the hardware panel's list and its Add (a
host:port asked for), the plan on screen planned again with their devices, the dashboard
told; a worker that cannot be added says why in the status bar."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QInputDialog, QWidget

from app.services.workers import WorkerRegistry
from app.widgets.hardware_panel import HardwarePanel
from app.widgets.model_panel import ModelPanel
from app.window.dashboard_dock import DashboardDock
from engine import DEFAULT_API_HOST, DEFAULT_WORKER_PORT, EngineError, HardwareSnapshot


class WorkersView:
    """``planning_hardware``: this machine with the workers' devices; ``hardware_known``:
    whether this machine has been measured yet (the plan waits for it)."""

    def __init__(
        self,
        workers: WorkerRegistry,
        hardware_panel: HardwarePanel,
        model_panel: ModelPanel,
        dashboard: DashboardDock,
        planning_hardware: Callable[[], HardwareSnapshot],
        hardware_known: Callable[[], bool],
        say: Callable[[str], None],
        dialog_parent: QWidget,
    ) -> None:
        self.workers = workers
        self.hardware_panel = hardware_panel
        self.model_panel = model_panel
        self.dashboard = dashboard
        self._planning_hardware = planning_hardware
        self._hardware_known = hardware_known
        self._say = say
        self._dialog_parent = dialog_parent
        workers.changed.connect(self.changed)
        hardware_panel.workers.add_requested.connect(self.ask)

    def ask(self) -> None:
        text, ok = QInputDialog.getText(
            self._dialog_parent,
            "Add worker",
            "host:port of a machine running `hearth worker`\n"
            "(llama.cpp's RPC has no authentication: add only machines on a network you trust)",
            text=f"{DEFAULT_API_HOST}:{DEFAULT_WORKER_PORT}",  # a worker on this machine
        )
        if ok and text.strip():
            self.add(text)

    def add(self, text: str) -> None:
        try:
            self.workers.add(text)
        except EngineError as exc:
            self._say(exc.message)

    def changed(self) -> None:
        workers = self.workers.workers
        self.hardware_panel.workers.set_workers(workers)
        if self._hardware_known():
            self.model_panel.set_hardware(self._planning_hardware())
        self.dashboard.set_workers(workers)
