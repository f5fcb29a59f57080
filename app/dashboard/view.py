"""DashboardView: live plots of the machine and the engine, the KV cache, the hardware, export.

Threads: everything here runs on the GUI thread. Telemetry is sampled here (psutil and
NVML are quick and need no native llama.cpp handle); engine statistics are *requested*
from the executor (``request_stats()`` queues a command answered between two batches)
and the answer comes back through a queued Qt signal. Nothing blocks on a future, and at
most one request is outstanding, so a long batch cannot pile commands onto the executor.

The sections are their own modules, mixed into the view: ``engine_cards``, ``system_cards``
and ``gpu_cards`` (each builds its cards and follows what they show); ``cards`` lays them
out, ``status_line`` says what the line atop the view says.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Protocol

import psutil
from PySide6.QtCore import QSize, Qt, QTimer, Signal, SignalInstance
from PySide6.QtGui import QHideEvent, QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QLabel,
    QScrollArea,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.dashboard.engine_cards import EngineCards
from app.dashboard.export import ExportResult, export_session
from app.dashboard.gpu_cards import GpuCards
from app.dashboard.hardware_view import HardwareView
from app.dashboard.kv_panel import OwnerNames, names_from
from app.dashboard.metrics import MetricsHistory
from app.dashboard.plots import (
    PlotCard,
)
from app.dashboard.status_line import status_text
from app.dashboard.system_cards import SystemCards
from app.widgets.workers_panel import WorkersPanel
from engine import (
    EngineStats,
    HardwareSnapshot,
    LoadPlan,
    ReportedMemory,
    TelemetrySample,
)

log = logging.getLogger("hearth.dashboard")

DEFAULT_INTERVAL_MS = 250
# While the model generates, one sample a second: on two cores each tick (telemetry, a stats
# answer, plots redrawn and painted) is taken from llama.cpp's threads, and a 4 Hz dashboard
# cost decode ~3% where 1 Hz costs ~1%. Idle, the view is cheap and samples at the default.
BUSY_INTERVAL_MS = 1000
BUSY_REDRAW_S = 2.0  # and the plots redrawn at most every two seconds (numbers every second)
STATS_TIMEOUT_S = 10.0  # an unanswered stats request older than this is given up and re-asked
CARD_MIN_WIDTH = 440  # below twice this the cards stack in one column
# A dock beside the chat: usable from MIN_WIDTH (no horizontal scrolling; the KV table
# drops its least needed column), comfortable at PREFERRED_WIDTH.
MIN_WIDTH = 340
PREFERRED_WIDTH = 420


class TelemetrySource(Protocol):
    """``engine.machine.hardware.Telemetry`` or a fake: one cheap sample per call, on this thread."""

    def sample(self) -> TelemetrySample: ...


class StatsSource(Protocol):
    """``engine.loaded_model.LoadedModel`` or a fake."""

    def request_stats(self) -> Future[EngineStats]: ...


class DashboardView(EngineCards, SystemCards, GpuCards, QWidget):
    """Live dashboard: engine throughput and KV cache, CPU/RAM, GPUs, hardware, export.

    ``telemetry``: an object with ``sample() -> TelemetrySample`` (default: a new
    ``engine.machine.hardware.Telemetry``, closed by ``shutdown()``). ``snapshot``: the app's
    ``HardwareSnapshot`` for the hardware tab and the no-GPU message. Sampling runs every
    ``interval_ms`` while the view is shown and stops while it is hidden.
    """

    stats_received = Signal(object)  # EngineStats, after it was recorded (GUI thread)
    exported = Signal(object)  # ExportResult
    _stats_done = Signal(object, int)  # Future, model generation: hops from executor to GUI thread

    def __init__(
        self,
        telemetry: TelemetrySource | None = None,
        *,
        snapshot: HardwareSnapshot | None = None,
        interval_ms: int = DEFAULT_INTERVAL_MS,
        busy_interval_ms: int = BUSY_INTERVAL_MS,
        window_s: float = 300.0,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._owns_telemetry = telemetry is None
        if telemetry is None:
            from engine import Telemetry

            telemetry = Telemetry()
        self.telemetry: TelemetrySource = telemetry
        self.history = MetricsHistory(window_s=window_s, interval_s=interval_ms / 1000)
        self.window_s = window_s
        self._snapshot = snapshot
        self._model: StatsSource | None = None
        self._generation = 0  # bumps on every set_model: late answers for an old model are dropped
        self._pending: Future[EngineStats] | None = None
        self._pending_since = 0.0
        self._names: OwnerNames = names_from(None)
        self._hidden_at: float | None = None
        self._gpu_layout: tuple[int, ...] | None = None
        self._kv_layout: tuple[int, int] | None = None
        self._rss_before_load: int | None = None
        self._load_rss: tuple[object, int] | None = None  # (plan, rss delta) of the last load
        self._last_export_dir = ""
        self._connections: list[tuple[SignalInstance, Callable[[], None]]] = []
        self.tick_count = 0
        self.tick_seconds = 0.0  # time spent in ticks, for the benchmark's cost figure

        self._idle_interval = interval_ms
        self._busy_interval = max(interval_ms, busy_interval_ms)
        self._busy = False  # the last stats showed a request being served
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._tick)
        self._stats_done.connect(self._on_stats_done, Qt.ConnectionType.QueuedConnection)

        self._build()
        self._update_gpu_panel()
        if snapshot is not None:
            self.set_snapshot(snapshot)

    # -- construction ------------------------------------------------------------------------

    def _build(self) -> None:
        tel, eng, w = self.history.telemetry, self.history.engine, self.window_s

        self.status = QLabel("No model loaded")
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status.setWordWrap(True)  # one line when there is room, more in a narrow dock
        # A tool button: as tall as the tabs it sits beside.
        self.export_button = QToolButton()
        self.export_button.setText("Export…")
        self.export_button.setAutoRaise(True)
        self.export_button.setToolTip("Save this session's metrics (CSV) and the plots (PNG) to a folder")
        self.export_button.clicked.connect(lambda: self.export())

        self._build_engine(eng, w)
        self._build_system(tel, w)
        self._build_gpu(tel, w)
        self.workers_panel = WorkersPanel(can_add=False)  # RPC workers: devices, memory, reachability, RTT
        self.workers_panel.setVisible(False)

        self.live_content = QWidget()
        live_layout = QVBoxLayout(self.live_content)
        live_layout.setContentsMargins(8, 4, 8, 8)
        for section in (self.engine_section, self.system_section, self.gpu_section):
            live_layout.addWidget(section)
        live_layout.addWidget(self.workers_panel)
        live_layout.addStretch(1)
        self.live_scroll = QScrollArea()
        self.live_scroll.setWidgetResizable(True)
        self.live_scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        self.live_scroll.setWidget(self.live_content)

        self.hardware_view = HardwareView()
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(self.live_scroll, "Live")
        self.tabs.addTab(self.hardware_view, "Hardware")
        # Beside the tabs rather than the status, which keeps the full width to wrap in.
        self.tabs.setCornerWidget(self.export_button, Qt.Corner.TopRightCorner)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.status)
        layout.addWidget(self.tabs, 1)

    @property
    def plot_cards(self) -> tuple[PlotCard, ...]:
        return (
            self.throughput_card,
            self.requests_card,
            self.kv_plot_card,
            self.batch_card,
            self.prefix_rate_card,
            self.reused_card,
            self.speculation_card,
            self.cpu_card,
            self.memory_card,
            self.process_card,
            *self.gpu_cards,
        )

    def sizeHint(self) -> QSize:
        return QSize(PREFERRED_WIDTH, 720)

    def minimumSizeHint(self) -> QSize:
        return QSize(MIN_WIDTH, 240)

    # -- public API --------------------------------------------------------------------------

    @property
    def interval_ms(self) -> int:
        return self._timer.interval()

    def set_interval(self, interval_ms: int, busy_interval_ms: int | None = None) -> None:
        """Sample every ``interval_ms`` while idle, every ``busy_interval_ms`` (default: the
        same) while the model serves a request."""
        self._idle_interval = max(10, interval_ms)
        self._busy_interval = max(self._idle_interval, busy_interval_ms or self._idle_interval)
        self._apply_interval()

    @property
    def is_busy(self) -> bool:
        """Whether the last stats showed the model serving (sampling at the busy interval)."""
        return self._busy

    def _apply_interval(self) -> None:
        interval = self._busy_interval if self._busy else self._idle_interval
        if self._timer.interval() != interval:
            self._timer.setInterval(interval)

    @property
    def is_sampling(self) -> bool:
        return self._timer.isActive()

    @property
    def model(self) -> StatsSource | None:
        return self._model

    def set_model(self, model: StatsSource | None) -> None:
        """Observe ``model`` (a LoadedModel, loading or ready) from now on; None: no model."""
        if model is self._model:
            return
        for signal, slot in self._connections:
            with contextlib.suppress(RuntimeError, TypeError):  # the model is already gone
                signal.disconnect(slot)
        self._connections = []
        self._model = model
        self._generation += 1
        if self._pending is not None:
            self._pending.cancel()  # still queued: the executor skips a cancelled future
            self._pending = None
        self.history.reset_engine()
        self.kv_panel.reset()
        self._rss_before_load = None
        self._busy = False
        self._apply_interval()
        if model is not None:
            plan = getattr(model, "plan", None)
            if isinstance(plan, LoadPlan):
                self.hardware_view.set_load_report(plan)
            if not getattr(model, "is_ready", True) and hasattr(model, "ready"):
                # Memory the load takes, as the OS sees it: RSS now against RSS when ready.
                self._rss_before_load = psutil.Process().memory_info().rss
                self._connect(model.ready, self._on_model_ready)  # type: ignore[attr-defined]
            if hasattr(model, "unloaded"):
                self._connect(model.unloaded, self._on_model_unloaded)  # type: ignore[attr-defined]
        self._update_status()
        if self.is_sampling:
            self.poll_stats()

    def _connect(self, signal: SignalInstance, slot: Callable[[], None]) -> None:
        signal.connect(slot)
        self._connections.append((signal, slot))

    def set_owner_names(self, names: Mapping[str, str] | Callable[[str], str | None] | None) -> None:
        """How owner ids (ChatRequest.owner) are shown: a dict id -> name, or a function
        returning a name or None (None shows the id)."""
        self._names = names_from(names)
        self.kv_panel.set_names(self._names)

    def set_workers(self, workers: tuple) -> None:
        """The RPC workers the window knows (``WorkerInfo``s); hidden while there are none."""
        self.workers_panel.set_workers(workers)
        self.workers_panel.setVisible(bool(workers))

    def set_snapshot(self, snapshot: HardwareSnapshot) -> None:
        self._snapshot = snapshot
        self.hardware_view.set_snapshot(snapshot)
        self._update_gpu_panel()

    def set_load_report(
        self, plan: LoadPlan, reported: ReportedMemory | None = None, rss_delta: int | None = None
    ) -> None:
        """The last load's predicted memory beside llama.cpp's reported buffers
        (``engine.native.llama_log.parse_buffer_sizes`` of the load's log lines). ``rss_delta``
        defaults to the growth the view measured itself while ``plan`` loaded."""
        if rss_delta is None and self._load_rss is not None and self._load_rss[0] is plan:
            rss_delta = self._load_rss[1]
        self.hardware_view.set_load_report(plan, reported, rss_delta)

    def export(self, folder: str | Path | None = None) -> ExportResult | None:
        """Save metrics.csv and the plots as PNGs into a new folder inside ``folder``
        (None: ask with a folder dialog; returns None if the user cancels)."""
        if folder is None:
            start = self._last_export_dir or str(Path.home())
            chosen = QFileDialog.getExistingDirectory(self, "Export dashboard to folder", start)
            if not chosen:
                return None
            folder = chosen
        self._last_export_dir = str(folder)
        self.refresh(force=True)  # cards scrolled out of view may be behind
        panels: list[tuple[str, QWidget]] = [(c.title, c) for c in self.plot_cards if self.shows(c)]
        panels.append(("KV cache", self.kv_panel))
        try:
            result = export_session(self.history, folder, self.live_content, panels)
        except OSError as exc:
            self.status.setText(f"Export failed: {exc}")
            raise
        self.status.setText(f"Saved {len(result.files)} files to {result.folder}")
        QTimer.singleShot(6000, self, self._update_status)  # context: cancelled with the view
        self.exported.emit(result)
        return result

    def shows(self, card: QWidget) -> bool:
        """Whether ``card`` is part of the live page now (not, e.g., the GPU plots without a GPU)."""
        return any(s.cards.shows(card) for s in (self.engine_section, self.system_section, self.gpu_section))

    def sample_now(self) -> None:
        """One sampling step right away (telemetry, a stats request, a full redraw)."""
        self._tick(force=True)

    def refresh(self, force: bool = False) -> None:
        """Redraw the plots from the history (only those on screen unless ``force``)."""
        now = time.monotonic()
        gap = BUSY_REDRAW_S if self._busy else 0.0
        for card in self.plot_cards:
            if self.shows(card):
                card.refresh(now, force, gap)

    def shutdown(self) -> None:
        """Stop sampling, drop the model, release the telemetry source if the view made it."""
        self._timer.stop()
        self.set_model(None)
        if self._owns_telemetry:
            close = getattr(self.telemetry, "close", None)
            if close is not None:
                close()
            self._owns_telemetry = False

    # -- sampling ----------------------------------------------------------------------------

    def _tick(self, force: bool = False) -> None:
        started = time.perf_counter()
        self.sample_telemetry()
        self.poll_stats()
        self.refresh(force)
        self.tick_count += 1
        self.tick_seconds += time.perf_counter() - started

    def sample_telemetry(self) -> None:
        try:
            sample = self.telemetry.sample()
        except Exception:  # a failing sensor must not take the dashboard down
            log.warning("telemetry sample failed", exc_info=True)
            return
        self.history.add_telemetry(sample)
        if self.history.gpu_indices != self._gpu_layout:
            self._update_gpu_panel()
        self._note_other_programs(sample)

    def poll_stats(self) -> None:
        """Ask the model for stats unless a request is still out (answered by the executor)."""
        model = self._model
        if model is None or not getattr(model, "is_ready", True):
            return
        now = time.monotonic()
        if self._pending is not None:
            if now - self._pending_since < STATS_TIMEOUT_S:
                return
            self._pending.cancel()  # unanswered for long (executor stuck or gone): ask afresh
        try:
            future = model.request_stats()
        except Exception:
            log.debug("request_stats failed", exc_info=True)
            return
        self._pending, self._pending_since = future, now
        generation = self._generation
        emit = self._stats_done.emit

        def done(f: Future[EngineStats]) -> None:
            # Runs on the executor thread: only hand the future over to the GUI thread.
            with contextlib.suppress(RuntimeError):  # the view was deleted meanwhile
                emit(f, generation)

        future.add_done_callback(done)

    def _on_stats_done(self, future: Future[EngineStats], generation: int) -> None:
        if future is self._pending:
            self._pending = None
        if generation != self._generation or future.cancelled():
            return
        error = future.exception()
        if error is not None:
            log.debug("stats request failed: %s", error)
            return
        self.record_stats(future.result())

    def record_stats(self, stats: EngineStats, timestamp: float | None = None) -> None:
        """Add one EngineStats (normally from the model's request_stats) and update the panels."""
        self.history.add_engine_stats(stats, timestamp)
        self._busy = stats.active_requests > 0 or stats.queue_depth > 0
        self._apply_interval()
        self._show_engine_stats(stats)
        self._update_status()
        self.stats_received.emit(stats)

    # -- model signals -----------------------------------------------------------------------

    def _on_model_ready(self) -> None:
        model = self._model
        if self.sender() is not model or self._rss_before_load is None:
            return
        delta = psutil.Process().memory_info().rss - self._rss_before_load
        self._rss_before_load = None
        plan = getattr(model, "plan", None)
        if isinstance(plan, LoadPlan):
            self._load_rss = (plan, delta)
            self.hardware_view.set_load_report(plan, None, delta)
        self._update_status()

    def _on_model_unloaded(self) -> None:
        if self.sender() is self._model:
            self.set_model(None)

    def _update_status(self) -> None:
        text = status_text(self._model, self.history)
        if text != self.status.text():
            self.status.setText(text)

    # -- Qt events ---------------------------------------------------------------------------

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._hidden_at is not None:
            # Nothing was sampled while hidden: break the lines rather than draw across the gap.
            if time.monotonic() - self._hidden_at > 2 * self.interval_ms / 1000:
                self.history.mark_gap()
            self._hidden_at = None
        if not self._timer.isActive():
            self._timer.start()
            QTimer.singleShot(0, self, self._tick)  # fresh numbers now, not one interval later

    def hideEvent(self, event: QHideEvent) -> None:
        super().hideEvent(event)
        if self._timer.isActive():
            self._timer.stop()
            self._hidden_at = time.monotonic()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        columns = max(1, min(3, self.width() // CARD_MIN_WIDTH))
        for section in (self.engine_section, self.system_section, self.gpu_section):
            section.cards.set_columns(columns)


__all__ = ["DEFAULT_INTERVAL_MS", "DashboardView", "StatsSource", "TelemetrySource"]
