"""The RPC workers the user added: remembered in ``workers.json``, probed and pinged off the
GUI thread, and the devices of those that answer handed to the planner.

Probing a worker starts a child process (llama.cpp aborts the process that cannot reach a
worker, see engine/rpc/workers.py) and can take seconds; pinging is a TCP connect. Both
run on a worker thread; results come back as a queued signal.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QTimer, Signal

from app.services.planning import planning_hardware
from engine import (
    EngineError,
    HardwareSnapshot,
    WorkerAddress,
    WorkerInfo,
    WorkerState,
    parse_worker_address,
    ping_worker,
    probe_worker,
)

log = logging.getLogger("hearth.workers")

PING_INTERVAL_MS = 5000  # round-trip time and reachability for the dashboard


class WorkerRegistry(QObject):
    """Remembered workers and what is known about each; ``changed`` after every answer."""

    changed = Signal()
    _answered = Signal(object)  # WorkerInfo, from a probe thread

    def __init__(
        self,
        path: Path | None,
        *,
        probe: Callable[[WorkerAddress], WorkerInfo] = probe_worker,
        ping: Callable[[WorkerAddress], tuple[float | None, str]] = ping_worker,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.path = path
        self._probe = probe
        self._ping = ping
        self._info: dict[WorkerAddress, WorkerInfo] = {}
        self._busy: set[WorkerAddress] = set()
        # Endpoints the loaded model is using. llama.cpp's RPC server serves one client at a
        # time, so a probe of one would wait for the model to unload: only pinged meanwhile.
        self._in_use: frozenset[str] = frozenset()
        self._answered.connect(self._on_answer, Qt.ConnectionType.QueuedConnection)
        for address in self._read():
            self._info[address] = WorkerInfo(address, WorkerState.OFFLINE, reason="not checked yet")
        self._timer = QTimer(self)
        self._timer.setInterval(PING_INTERVAL_MS)
        self._timer.timeout.connect(self.ping_all)

    # -- what is known --------------------------------------------------------------

    @property
    def workers(self) -> tuple[WorkerInfo, ...]:
        return tuple(self._info.values())

    def hardware(self, snapshot: HardwareSnapshot) -> HardwareSnapshot:
        """``snapshot`` with the devices of the workers that answered, for the planner."""
        return planning_hardware(snapshot, self._info.values())

    # -- changes ----------------------------------------------------------------------

    def add(self, text: str) -> WorkerAddress:
        """Remember ``host:port`` and probe it; raises EngineError for an address that is not one."""
        address = parse_worker_address(text)
        if address not in self._info:
            self._info[address] = WorkerInfo(address, WorkerState.OFFLINE, reason="checking…")
            self._write()
            self.changed.emit()
        self.probe(address)
        return address

    def remove(self, address: WorkerAddress) -> None:
        if self._info.pop(address, None) is not None:
            self._write()
            self.changed.emit()

    def start(self) -> None:
        """Probe every remembered worker, then keep pinging them."""
        for address in list(self._info):
            self.probe(address)
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()

    def set_in_use(self, endpoints: Iterable[str]) -> None:
        """The workers a loaded model uses (none: ``()``); they are pinged, never probed."""
        self._in_use = frozenset(endpoints)

    def probe(self, address: WorkerAddress) -> None:
        """Ask the worker for its devices and memory (a child process, on a thread)."""
        if address in self._busy or address.endpoint in self._in_use:
            return
        self._busy.add(address)
        threading.Thread(
            target=self._run_probe, args=(address,), name="hearth-worker-probe", daemon=True
        ).start()

    def ping_all(self) -> None:
        """Refresh reachability and round-trip time; a worker that comes back is probed again."""
        for address in list(self._info):
            if address not in self._busy:
                self._busy.add(address)
                threading.Thread(target=self._run_ping, args=(address,), daemon=True).start()

    # -- threads ------------------------------------------------------------------------

    def _run_probe(self, address: WorkerAddress) -> None:
        try:
            info = self._probe(address)
        except EngineError as exc:
            info = WorkerInfo(address, WorkerState.OFFLINE, reason=exc.message)
        except Exception as exc:  # a bug costs this answer, never the window
            log.exception("probing %s failed", address)
            info = WorkerInfo(address, WorkerState.OFFLINE, reason=f"probe failed: {exc}")
        self._answered.emit(info)

    def _run_ping(self, address: WorkerAddress) -> None:
        rtt, why = self._ping(address)
        known = self._info.get(address)
        if known is None:
            self._answered.emit(None)
            return
        if rtt is None:
            info = replace(known, state=WorkerState.OFFLINE, reason=why, rtt_ms=None)
        elif not known.online and address.endpoint not in self._in_use:
            info = self._probe(address)  # it answers again: read its devices anew
        else:
            info = replace(known, rtt_ms=rtt)
        self._answered.emit(info)

    def _on_answer(self, info: WorkerInfo | None) -> None:
        if info is None:
            return
        self._busy.discard(info.address)
        if info.address in self._info:  # not removed meanwhile
            self._info[info.address] = info
            self.changed.emit()

    # -- persistence ------------------------------------------------------------------

    def _read(self) -> Iterable[WorkerAddress]:
        if self.path is None:
            return []
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return []
        out = []
        for text in data.get("workers", []) if isinstance(data, dict) else []:
            try:
                out.append(parse_worker_address(str(text)))
            except EngineError:
                log.warning("ignoring a remembered worker that is not host:port: %r", text)
        return out

    def _write(self) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"workers": [a.endpoint for a in self._info]}, indent=2) + "\n")
            tmp.replace(self.path)
        except OSError as exc:
            log.warning("could not remember the workers: %s", exc)
