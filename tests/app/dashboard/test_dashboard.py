"""The dashboard: its Qt-free history, and the view driven offscreen with fake and real sources."""

from __future__ import annotations

import csv
import math
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pynvml
import pytest
from PIL import Image
from PySide6.QtCore import QObject, QPoint, QPointF, Qt, Signal
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QWidget

from app.dashboard import DashboardView, MetricsHistory, SeriesTable, compare_memory, kv_rows
from app.dashboard import metrics as m
from app.dashboard.plots import MIN_LABEL_GAP_PX, SPANS_S, TimeAxis, ago, nice_ceiling, visible_span
from app.dashboard.view import BUSY_INTERVAL_MS, BUSY_REDRAW_S, MIN_WIDTH, PREFERRED_WIDTH
from engine.machine.hardware import GpuInfo, HardwareSnapshot
from engine.machine.telemetry import GpuSample, Telemetry, TelemetrySample
from engine.native.llama_log import ReportedMemory
from engine.requests.request import ChatRequest
from engine.requests.stats import EngineStats, SequenceStats, SlotState
from tests.conftest import SCRIPT, plan_for

GIB = 1024**3
NO_DRIVER = "No NVIDIA driver found (NVML is not available)"


# -- fakes --------------------------------------------------------------------------------------


class FakeTelemetry:
    """Scripted samples; ``gpus`` GPU entries per sample."""

    def __init__(self, gpus: int = 0, gpu_status: str = NO_DRIVER) -> None:
        self.gpu_status = gpu_status
        self.gpus = gpus
        self.calls = 0

    def sample(self) -> TelemetrySample:
        self.calls += 1
        gpus = tuple(
            GpuSample(i, 40.0 + i, (2 + i) * GIB, 24 * GIB, 50.0 + i, 120.0 + i) for i in range(self.gpus)
        )
        return TelemetrySample(
            timestamp=time.monotonic(),
            cpu_percent=float(10 + self.calls % 50),
            ram_used=8 * GIB + self.calls * 1024,
            ram_total=16 * GIB,
            process_rss=300 * 1024**2,
            gpus=gpus,
        )


@dataclass
class FakeGpu:
    name: str
    total: int
    used: int
    utilization: float
    temperature: float
    power: float


@dataclass
class FakeNvml:
    """An ``NvmlSource`` for ``engine.machine.telemetry.Telemetry``: the real pynvml path, fake GPUs."""

    gpus: list[FakeGpu] = field(default_factory=list)
    power_refused: int = 0  # how often power_w raised NotSupported

    def init(self) -> None: ...
    def shutdown(self) -> None: ...
    def driver_version(self) -> str:
        return "550.54.15"

    def device_count(self) -> int:
        return len(self.gpus)

    def device_handle(self, index: int) -> object:
        return self.gpus[index]

    def name(self, handle: FakeGpu) -> str:  # type: ignore[override]
        return handle.name

    def uuid(self, handle: FakeGpu) -> str:  # type: ignore[override]
        return f"GPU-{handle.name}"

    def memory(self, handle: FakeGpu) -> tuple[int, int, int]:  # type: ignore[override]
        return handle.total, handle.total - handle.used, handle.used

    def utilization_percent(self, handle: FakeGpu) -> float:  # type: ignore[override]
        return handle.utilization

    def temperature_c(self, handle: FakeGpu) -> float:  # type: ignore[override]
        return handle.temperature

    def power_w(self, handle: FakeGpu) -> float:  # type: ignore[override]
        self.power_refused += 1
        raise pynvml.NVMLError_NotSupported()  # common on consumer cards: the plot shows a gap


def stats(
    sequences: tuple[SequenceStats, ...] = (),
    *,
    hits: int = 0,
    misses: int = 0,
    reused: int = 0,
    drafted: int = 0,
    accepted: int = 0,
    active: int = 0,
    queued: int = 0,
    decode: float = 100.0,
) -> EngineStats:
    return EngineStats(
        sequences=sequences,
        n_ctx=2048,
        n_ctx_per_sequence=512,
        queue_depth=queued,
        active_requests=active,
        prefix_hits=hits,
        prefix_misses=misses,
        tokens_reused=reused,
        decode_tokens_per_second=decode,
        prefill_tokens_per_second=50.0,
        batch_fill=0.25,
        ticks=10,
        completed_requests=hits + misses,
        drafted_tokens=drafted,
        accepted_tokens=accepted,
    )


class FakeModel(QObject):
    """A model whose stats futures are answered later, from another thread."""

    ready = Signal()
    unloaded = Signal()

    def __init__(self, answer: EngineStats) -> None:
        super().__init__()
        self.answer = answer
        self.requests = 0
        self.outstanding: list[Future[EngineStats]] = []
        self.is_ready = True

    def request_stats(self) -> Future[EngineStats]:
        self.requests += 1
        future: Future[EngineStats] = Future()
        self.outstanding.append(future)
        return future

    def answer_all(self) -> None:
        futures, self.outstanding = self.outstanding, []

        def work() -> None:
            for f in futures:
                if f.set_running_or_notify_cancel():
                    f.set_result(self.answer)

        thread = threading.Thread(target=work)
        thread.start()
        thread.join()


def snapshot(gpus: tuple[GpuInfo, ...] = (), offload: bool = False) -> HardwareSnapshot:
    return HardwareSnapshot(
        cpu_name="Test CPU",
        physical_cores=4,
        logical_cores=8,
        simd=("AVX2", "FMA"),
        ram_total=16 * GIB,
        ram_available=12 * GIB,
        gpus=gpus,
        gpu_status=f"{len(gpus)} NVIDIA GPU found" if gpus else NO_DRIVER,
        driver_version="550.54.15" if gpus else None,
        gpu_offload_supported=offload,
        backend_devices=(),
    )


@pytest.fixture()
def view(qtbot):
    # A short window: plots redraw once per pixel of time, i.e. every tick here.
    v = DashboardView(FakeTelemetry(), snapshot=snapshot(), interval_ms=40, window_s=20)
    qtbot.addWidget(v)
    v.resize(1000, 800)
    yield v
    v.shutdown()


def points(view: DashboardView, card_attr: str, curve: int = 0) -> int:
    items = getattr(view, card_attr).items
    x = items[curve].xData if curve < len(items) else None  # GPU curves exist after the first sample
    return 0 if x is None else len(x)


# -- MetricsHistory (pure) ----------------------------------------------------------------------


def test_ring_keeps_the_newest_rows_in_time_order_as_views() -> None:
    table = SeriesTable(capacity=4)
    for t in range(6):
        table.append(float(t), {"a": t * 10.0})
    assert table.times().tolist() == [2.0, 3.0, 4.0, 5.0]
    assert table.series("a").tolist() == [20.0, 30.0, 40.0, 50.0]
    assert table.series("a").base is not None  # a view of the ring, not a copy
    assert table.latest("a") == 50.0
    table.append(6.0, {"b": 1.0})  # a column that appears late is NaN before it existed
    assert np.isnan(table.series("b")[:-1]).all() and table.series("b")[-1] == 1.0
    assert math.isnan(table.latest("a"))
    assert np.isnan(table.series("unknown")).all() and len(table.series("unknown")) == 4


def test_archive_keeps_the_whole_session_thinned() -> None:
    table = SeriesTable(capacity=4, archive_interval=1.0, archive_rows=8)
    for t in range(40):
        table.append(t * 0.5, {"v": float(t)})
    rows = list(table.export_rows())
    times = [t for t, _ in rows]
    assert times == sorted(times)
    assert times[0] == 0.0 and times[-1] == 19.5  # from the first sample to the newest
    assert times[-4:] == [18.0, 18.5, 19.0, 19.5]  # the ring at full resolution
    assert len(rows) < 40  # the older part thinned


def test_counters_accumulate_over_the_session_across_models() -> None:
    history = MetricsHistory()
    history.add_engine_stats(stats(hits=2, misses=1, reused=100), 1.0)
    history.add_engine_stats(stats(hits=3, misses=1, reused=150), 2.0)
    assert history.totals.prefix_hits == 3
    assert history.engine.latest(m.PREFIX_HIT_RATE) == pytest.approx(75.0)
    history.reset_engine()  # another model: its counters start again from zero
    history.add_engine_stats(stats(hits=1, misses=0, reused=10), 3.0)
    totals = history.totals
    assert (totals.prefix_hits, totals.prefix_misses, totals.tokens_reused) == (4, 1, 160)
    assert totals.prefix_hit_rate == pytest.approx(0.8)
    # A counter that drops without reset_engine is taken as a new model too.
    history.add_engine_stats(stats(hits=0, misses=1, reused=0), 4.0)
    assert history.totals.prefix_misses == 2
    assert history.engine.series(m.TOKENS_REUSED).tolist() == [100, 150, 160, 160]


def test_acceptance_rate_is_per_interval() -> None:
    history = MetricsHistory()
    history.add_engine_stats(stats(), 0.0)
    assert not history.speculation_seen
    history.add_engine_stats(stats(drafted=10, accepted=7), 1.0)
    history.add_engine_stats(stats(drafted=10, accepted=7), 2.0)
    history.add_engine_stats(stats(drafted=30, accepted=17), 3.0)
    rates = history.engine.series(m.ACCEPTANCE_RATE)
    assert math.isnan(rates[0]) and rates[1] == pytest.approx(70.0)
    assert math.isnan(rates[2])  # nothing drafted in that interval
    assert rates[3] == pytest.approx(50.0)
    assert history.speculation_seen and history.totals.acceptance_rate == pytest.approx(17 / 30)


def test_csv_has_every_series_and_skips_gaps(tmp_path: Path) -> None:
    history = MetricsHistory()
    telemetry = FakeTelemetry(gpus=1)
    history.add_telemetry(telemetry.sample())
    seqs = (SequenceStats(0, SlotState.ACTIVE, "chat-1", 40, 0), SequenceStats(1, SlotState.EMPTY, "", 0, 0))
    history.add_engine_stats(stats(seqs, hits=1, misses=1, active=1))
    history.mark_gap()
    history.mark_gap()  # a second mark adds nothing
    history.add_telemetry(telemetry.sample())
    path = tmp_path / "metrics.csv"
    assert history.to_csv(path) == 3
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["source"] for r in rows] == ["telemetry", "engine", "telemetry"]
    first, engine = rows[0], rows[1]
    assert int(first[m.RAM_TOTAL]) == 16 * GIB
    assert float(first[m.gpu_column(0, "utilization_percent")]) == 40.0
    assert first[m.DECODE_TPS] == ""  # the other source's columns stay empty
    assert float(engine[m.PREFIX_HIT_RATE]) == 50.0
    assert int(engine[m.kv_sequence_column(0)]) == 40
    assert engine[m.CPU_PERCENT] == ""
    assert float(rows[2]["time_s"]) >= float(rows[0]["time_s"])
    assert rows[0]["clock"][:4].isdigit()


def test_gap_breaks_the_series() -> None:
    history = MetricsHistory()
    history.add_telemetry(FakeTelemetry().sample())
    history.mark_gap()
    assert len(history.telemetry) == 2 and math.isnan(history.telemetry.latest(m.CPU_PERCENT))
    assert len(history.engine) == 0  # nothing to break yet


def test_nice_ceiling() -> None:
    assert [nice_ceiling(v) for v in (0.0, 1.5, 3.0, 7.0, 11.0, 240.0)] == [1, 2, 5, 10, 20, 250]
    assert nice_ceiling(float("nan"), floor=4) == 4


def test_kv_rows_remember_who_a_cached_sequence_belongs_to() -> None:
    last: dict[int, str] = {}
    names = {"chat-1": "Trip planning"}.get
    active = stats(
        (SequenceStats(0, SlotState.ACTIVE, "chat-1", 40, 0), SequenceStats(1, SlotState.EMPTY, "", 0, 0))
    )
    rows = kv_rows(active, last, names)
    assert [(r.sequence_id, r.name, r.state) for r in rows] == [(0, "Trip planning", "active")]
    cached = stats(
        (SequenceStats(0, SlotState.REUSABLE, "", 52, 52), SequenceStats(1, SlotState.ACTIVE, "chat-9", 8, 0))
    )
    rows = kv_rows(cached, last, names)
    assert [(r.name, r.state, r.reusable_tokens) for r in rows] == [
        ("Trip planning", "reusable", 52),
        ("chat-9", "active", 0),  # no name known: the id
    ]
    freed = stats((SequenceStats(0, SlotState.EMPTY, "", 0, 0),))
    assert kv_rows(freed, last, names) == () and 0 not in last


# -- the view -----------------------------------------------------------------------------------


def test_plots_receive_points_and_no_gpu_says_why(qtbot, view: DashboardView) -> None:
    view.resize(1000, 2400)  # every card on screen
    view.show()
    assert view.is_sampling
    qtbot.waitUntil(lambda: points(view, "cpu_card") >= 3, timeout=5000)
    assert points(view, "memory_card", 0) >= 3 and points(view, "process_card") >= 3
    assert view.history.telemetry.latest(m.RAM_TOTAL) == 16 * GIB
    assert "CPU" in view.cpu_card.title_label.text() and "%" in view.cpu_card.title_label.text()
    assert "GiB" in view.memory_card.title_label.text()
    assert "Used" in view.memory_card.legend.text() and "16.0 GiB" in view.memory_card.legend.text()
    assert view.gpu_message.isVisible()
    assert (
        NO_DRIVER in view.gpu_message.message.text() and "run on the CPU" in view.gpu_message.message.text()
    )
    assert not any(card.isVisible() for card in view.gpu_cards)
    assert view.status.text() == "No model loaded"


def test_fake_nvml_gpus_get_plots(qtbot) -> None:
    nvml = FakeNvml(
        [
            FakeGpu("NVIDIA RTX 4090", 24 * GIB, 3 * GIB, 55.0, 61.0, 0.0),
            FakeGpu("NVIDIA RTX A2000", 6 * GIB, 1 * GIB, 5.0, 40.0, 0.0),
        ]
    )
    telemetry = Telemetry(nvml=nvml)
    gpus = tuple(GpuInfo(i, g.name, g.total, g.total - g.used, None, None) for i, g in enumerate(nvml.gpus))
    v = DashboardView(telemetry, snapshot=snapshot(gpus, offload=True), interval_ms=40, window_s=20)
    qtbot.addWidget(v)
    v.resize(1000, 2400)  # tall enough that the GPU cards are on screen
    assert v.gpu_message.message.text() == "Reading the GPUs…"  # not "no GPU" before the first sample
    v.show()
    qtbot.waitUntil(lambda: points(v, "gpu_util_card", 1) >= 3, timeout=5000)
    assert not v.gpu_message.isVisible()
    assert all(card.isVisible() for card in v.gpu_cards)
    assert len(v.gpu_util_card.items) == 2 and len(v.gpu_vram_card.items) == 4  # used + total each
    assert "GPU 0" in v.gpu_util_card.legend.text() and "55%" in v.gpu_util_card.legend.text()
    assert "61 °C" in v.gpu_temp_card.legend.text()
    assert v.history.telemetry.latest(m.gpu_column(1, "vram_used_bytes")) == 1 * GIB
    assert math.isnan(v.history.telemetry.latest(m.gpu_column(0, "power_w")))  # NotSupported
    assert nvml.power_refused > 0  # a gap because the GPU refused, not because nobody asked
    assert not v.gpu_section.note.isVisible()  # the build can offload
    v.shutdown()


def test_gpu_with_a_cpu_only_build_says_so(qtbot) -> None:
    gpus = (GpuInfo(0, "NVIDIA RTX 4090", 24 * GIB, 20 * GIB, None, None),)
    v = DashboardView(FakeTelemetry(gpus=1), snapshot=snapshot(gpus, offload=False), interval_ms=40)
    qtbot.addWidget(v)
    v.show()
    qtbot.waitUntil(lambda: v.gpu_util_card.isVisible(), timeout=5000)
    assert v.gpu_section.note.isVisible() and "CPU-only" in v.gpu_section.note.text()


def test_cards_out_of_sight_are_not_redrawn(qtbot, view: DashboardView) -> None:
    view.resize(1000, 500)  # the System cards are scrolled out of view
    view.show()
    qtbot.waitUntil(lambda: view.throughput_card.updates >= 3, timeout=5000)
    assert view.cpu_card.updates == 0 and len(view.history.telemetry) >= 3  # sampled, not drawn
    view.live_scroll.ensureWidgetVisible(view.cpu_card)
    qtbot.waitUntil(lambda: points(view, "cpu_card") >= 3, timeout=5000)


def test_sampling_stops_while_hidden(qtbot, view: DashboardView) -> None:
    view.show()
    qtbot.waitUntil(lambda: len(view.history.telemetry) >= 2, timeout=5000)
    view.hide()
    assert not view.is_sampling
    calls = view.telemetry.calls  # type: ignore[attr-defined]
    qtbot.wait(200)
    assert view.telemetry.calls == calls  # type: ignore[attr-defined]
    view.show()
    assert view.is_sampling
    qtbot.waitUntil(lambda: view.telemetry.calls > calls, timeout=5000)  # type: ignore[attr-defined]
    cpu = view.history.telemetry.series(m.CPU_PERCENT)
    assert np.isnan(cpu).any()  # the pause is a gap in the line, not a straight segment


def test_stats_are_requested_one_at_a_time_and_handled_on_the_gui_thread(qtbot, view: DashboardView) -> None:
    model = FakeModel(stats((SequenceStats(0, SlotState.ACTIVE, "chat-1", 40, 0),), active=1))
    seen: list[int] = []
    view.stats_received.connect(lambda _s: seen.append(threading.get_ident()))
    view.set_model(model)
    view.show()
    qtbot.waitUntil(lambda: model.requests == 1, timeout=5000)
    qtbot.wait(200)  # several ticks: still one request out, none piled up
    assert model.requests == 1
    model.answer_all()  # answered on another thread, like the executor
    qtbot.waitUntil(lambda: bool(seen), timeout=5000)
    assert seen[0] == threading.get_ident()
    assert view.history.latest_stats is model.answer
    qtbot.waitUntil(lambda: model.requests >= 2, timeout=5000)  # polling resumed
    assert "1\u00a0active" in view.status.text()  # kept on one line when the status wraps
    view.set_model(None)
    assert all(f.cancelled() for f in model.outstanding)  # the unanswered request is withdrawn
    assert view.kv_panel.rows == ()


def test_sampling_slows_to_once_a_second_while_the_model_serves(qtbot) -> None:
    v = DashboardView(FakeTelemetry(), interval_ms=250)
    qtbot.addWidget(v)
    model = FakeModel(stats(active=1))
    v.set_model(model)
    assert v.interval_ms == 250 and not v.is_busy
    v.record_stats(stats(active=1))
    assert v.is_busy and v.interval_ms == BUSY_INTERVAL_MS == 1000  # decode keeps the CPU
    gaps: list[float] = []
    v.cpu_card.refresh = lambda now, force=False, min_gap_s=0.0: gaps.append(min_gap_s)  # type: ignore[method-assign]
    v.shows = lambda card: True  # type: ignore[method-assign]
    v.refresh()
    assert gaps == [BUSY_REDRAW_S]  # and the plots every two seconds
    v.record_stats(stats(queued=1))
    assert v.interval_ms == BUSY_INTERVAL_MS  # waiting requests count as busy too
    v.record_stats(stats())
    assert not v.is_busy and v.interval_ms == 250  # idle again: four samples a second
    v.refresh()
    assert gaps[-1] == 0.0
    v.record_stats(stats(active=2))
    v.set_model(None)  # a new model starts idle
    assert v.interval_ms == 250
    v.set_interval(50)  # one interval for both, as the GUI tests use
    v.record_stats(stats(active=1))
    assert v.interval_ms == 50
    v.shutdown()


def test_speculation_plot_appears_with_drafts(qtbot, view: DashboardView) -> None:
    view.show()
    view.record_stats(stats())
    assert not view.speculation_card.isVisible()
    view.record_stats(stats(drafted=8, accepted=6))
    assert view.speculation_card.isVisible()
    view.refresh(force=True)
    assert "75%" in view.speculation_card.legend.text()


def test_kv_panel_follows_requests_on_a_tiny_model(qtbot, make_tiny_model) -> None:
    from engine.loaded_model import Engine

    # A long context, so replies outlive several samples (the tiny model decodes ~3k tokens/s).
    path = make_tiny_model("looping.gguf", script=SCRIPT[:-1], script_loops=True, n_ctx_train=32768)
    model = Engine.load(plan_for(path, ctx=8192, parallel=4)).wait_ready(60)
    v = DashboardView(FakeTelemetry(), interval_ms=40, window_s=20)
    qtbot.addWidget(v)
    v.resize(1000, 900)
    names = {"chat-1": "Trip planning", "chat-2": "Rust lifetimes", "chat-3": "Soup"}
    lookups: list[str] = []
    v.set_owner_names(lambda owner: lookups.append(owner) or names.get(owner))  # like a database query
    v.set_model(model)
    v.show()
    handles = []
    try:
        handles = [
            model.submit(
                ChatRequest(prompt=f"Conversation {i} says hello", owner=f"chat-{i}", max_tokens=8000)
            )
            for i in (1, 2, 3)
        ]

        def active_names() -> set[str]:
            return {r.name for r in v.kv_panel.rows if r.state == "active"}

        qtbot.waitUntil(lambda: active_names() == {"Trip planning", "Rust lifetimes", "Soup"}, timeout=20_000)
        table = v.kv_panel.table
        assert table.rowCount() == 3
        shown = {table.item(r, 1).text(): table.item(r, 2).text() for r in range(3)}
        assert shown == {"Trip planning": "Active", "Rust lifetimes": "Active", "Soup": "Active"}
        assert v.kv_panel.bar.used > 0 and "cells in use" in v.kv_panel.bar.text()
        qtbot.waitUntil(lambda: points(v, "throughput_card") >= 2, timeout=5000)
        assert v.history.engine.latest(m.ACTIVE) == 3

        handles[1].cancel()  # the request for "Rust lifetimes" ends
        handles[1].wait(10)
        qtbot.waitUntil(lambda: active_names() == {"Trip planning", "Soup"}, timeout=10_000)
        rust = [r for r in v.kv_panel.rows if r.name == "Rust lifetimes"]
        assert all(r.state != "active" for r in rust)  # cached (still named) or freed
        assert "2 active" in v.kv_panel.note.text()
        assert len(lookups) < 10  # names are cached, not looked up on every stats update
    finally:
        for handle in handles:
            handle.cancel()
        v.shutdown()
        model.unload()


def test_export_writes_csv_and_pngs(qtbot, view: DashboardView, tmp_path: Path) -> None:
    view.show()
    for _ in range(3):
        view.sample_now()
        view.record_stats(stats((SequenceStats(0, SlotState.ACTIVE, "chat-1", 40, 0),), hits=1, active=1))
    result = view.export(tmp_path)
    assert result is not None and result.folder.parent == tmp_path
    with result.csv.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == result.rows == 6
    assert {"time_s", "clock", "source", m.CPU_PERCENT, m.DECODE_TPS, m.kv_sequence_column(0)} <= set(rows[0])
    names = {p.name for p in result.images}
    assert {"dashboard.png", "cpu.png", "throughput.png", "kv-cache.png"} <= names
    assert "speculation-acceptance.png" not in names  # hidden: no drafts this session
    for png in result.images:
        with Image.open(png) as image:
            image.verify()
        with Image.open(png) as image:
            assert image.format == "PNG" and image.width > 100 and image.height > 50
    assert view.export(tmp_path).folder != result.folder  # a second export never overwrites


def test_load_report_shows_predicted_beside_reported(qtbot, view: DashboardView, tiny_model: Path) -> None:
    plan = plan_for(tiny_model, ctx=512, parallel=2)
    reported = ReportedMemory(
        model={"CPU_Mapped": 1_000_000},
        kv={"CPU": 2_000_000},
        compute={"CPU": 3_000_000},
        output={"CPU": 500_000},
    )
    view.set_load_report(plan, reported, rss_delta=7 * 1024**2)
    rows = {r.label: r for r in compare_memory(plan, reported)}
    assert rows["Weights"].reported == 1_000_000 and rows["KV cache"].reported == 2_000_000
    assert rows["Total"].reported == 6_500_000
    assert rows["Total"].predicted == plan.total_bytes
    table = view.hardware_view.memory_table
    labels = [table.item(r, 0).text() for r in range(table.rowCount())]
    assert labels[0] == "Weights" and labels[-1] == "Total"
    assert table.item(table.rowCount() - 1, 2).text() == "6.2 MiB"
    assert "7.0 MiB" in view.hardware_view.rss_label.text()
    hardware_text = " ".join(
        view.hardware_view.machine_form.itemAt(i).widget().text()
        for i in range(view.hardware_view.machine_form.count())
    )
    assert "Test CPU" in hardware_text and "AVX2" in hardware_text and "CPU only" in hardware_text


def test_load_memory_is_measured_across_a_load(qtbot, view: DashboardView, tiny_model: Path) -> None:
    model = FakeModel(stats())
    model.is_ready = False
    model.plan = plan_for(tiny_model, ctx=512, parallel=2)  # type: ignore[attr-defined]
    view.set_model(model)
    assert "loading" in view.status.text()
    assert view.hardware_view.memory_table.rowCount() >= 2  # the prediction, before any load report
    assert view.hardware_view.rss_label.isHidden()
    model.is_ready = True
    model.ready.emit()
    assert not view.hardware_view.rss_label.isHidden()  # (on the Hardware tab)
    assert "grew by" in view.hardware_view.rss_label.text()
    model.unloaded.emit()  # an unloaded model is dropped
    assert view.model is None and view.status.text() == "No model loaded"


def test_plots_redraw_once_per_pixel_of_time(qtbot) -> None:
    v = DashboardView(FakeTelemetry(), interval_ms=40, window_s=300)
    qtbot.addWidget(v)
    v.resize(1000, 800)
    v.show()
    qtbot.waitExposed(v)
    v.set_interval(10_000)  # ticks out of the way: refresh by hand
    card = v.cpu_card
    v.live_scroll.ensureWidgetVisible(card)
    qtbot.wait(10)
    pixel_s = 300 / card.plot.getPlotItem().getViewBox().width()
    t = time.monotonic() + 100
    assert card.refresh(t)
    assert card.span == 120  # 100 s of data: a 2-minute axis, redrawn as often as a 5-minute one
    assert not card.refresh(t + pixel_s / 3)  # nothing would move on screen
    assert card.refresh(t + pixel_s * 1.01)
    assert card.refresh(t + pixel_s * 1.02, force=True)  # export and explicit refreshes always draw
    t += 10
    assert card.refresh(t)
    assert not card.refresh(t + 1.5, min_gap_s=BUSY_REDRAW_S)  # a busy model: every 2 s at most
    assert card.refresh(t + 2.1, min_gap_s=BUSY_REDRAW_S)
    v.shutdown()


# -- x range, wheel, narrow docks ----------------------------------------------------------------


def test_the_x_range_grows_with_the_data_up_to_the_window(qtbot) -> None:
    v = DashboardView(FakeTelemetry(), interval_ms=250, window_s=300)
    qtbot.addWidget(v)
    card = v.throughput_card
    view_box = card.plot.getPlotItem().getViewBox()
    start = 1000.0
    shown = {}
    for second in range(0, 600, 5):  # ten minutes of stats, one row every 5 s
        v.history.add_engine_stats(stats(), timestamp=start + second)
        card.refresh(start + second, force=True)
        shown[second] = (card.span, view_box.viewRange()[0][0])
    assert shown[20] == (30.0, pytest.approx(-30.6))  # 20 s open: a 30 s axis, not 5 minutes
    assert shown[45][0] == 60.0 and shown[100][0] == 120.0 and shown[150][0] == 180.0
    assert shown[250][0] == 300.0 and shown[595][0] == 300.0  # full, then scrolling
    for second, (span, _left) in shown.items():
        assert second <= span or span == 300  # every row is on screen while the table fills ...
        assert second >= span / 2 or span == SPANS_S[0]  # ... and fills at least half of it
    assert visible_span(10.0, 20.0) == 20.0  # a short window is shown whole


def test_time_axis_labels_stay_apart_at_any_width() -> None:
    axis = TimeAxis()
    for span in SPANS_S:
        for pixels in (220.0, 300.0, 600.0, 1200.0):
            (major, _), (minor, _) = axis.tickSpacing(-span, 0.0, pixels)
            assert major * pixels / span >= MIN_LABEL_GAP_PX and minor == major / 2
    assert axis.tickStrings([-120.0, -90.0, -30.0, 0.0], 1.0, 30.0) == ["−2 min", "−90 s", "−30 s", "now"]
    assert ago(29.999999) == "−30 s"


def test_wheel_over_a_plot_scrolls_the_page_instead_of_zooming(qtbot, view: DashboardView) -> None:
    view.resize(420, 600)
    view.show()
    qtbot.waitExposed(view)
    bar = view.live_scroll.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == 0
    plot = view.requests_card.plot
    view_box = plot.getPlotItem().getViewBox()
    assert view_box.state["mouseEnabled"] == [False, False]
    before = view_box.viewRange()
    viewport = plot.viewport()
    at = QPointF(viewport.width() / 2, viewport.height() / 2)
    wheel = QWheelEvent(
        at,
        viewport.mapToGlobal(at),
        QPoint(0, 0),
        QPoint(0, -120),  # one notch down
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(viewport, wheel)
    assert bar.value() > 0  # the page moved
    assert view_box.viewRange() == before  # the plot did not zoom


@pytest.mark.parametrize("width", [MIN_WIDTH, 360, 420, 700])
def test_the_dashboard_fits_a_narrow_dock_without_scrolling_sideways(qtbot, width: int) -> None:
    v = DashboardView(FakeTelemetry(), snapshot=snapshot(), interval_ms=40)
    qtbot.addWidget(v)
    assert v.sizeHint().width() == PREFERRED_WIDTH and v.minimumSizeHint().width() == MIN_WIDTH
    assert QWidget.minimumSizeHint(v).width() <= MIN_WIDTH  # what its layout really needs
    v.set_owner_names({"chat-1": "Trip planning with a long conversation title"})
    v.record_stats(
        stats(
            (
                SequenceStats(0, SlotState.ACTIVE, "chat-1", 40, 12),
                SequenceStats(1, SlotState.REUSABLE, "", 52, 52),
            ),
            active=1,
        )
    )
    v.resize(width, 800)
    v.show()
    qtbot.waitExposed(v)
    assert v.width() == width
    assert v.live_scroll.horizontalScrollBar().maximum() == 0
    table = v.kv_panel.table
    shown = [c for c in range(table.columnCount()) if not table.isColumnHidden(c)]
    used = sum(table.columnWidth(c) for c in shown)
    assert used <= table.viewport().width()  # every shown column fits: nothing cut at the right
    prefix_shown = 4 in shown
    assert prefix_shown == (width >= 700)  # the least needed column goes first
    assert table.item(0, 3).toolTip().endswith("cached prefix: 12 tokens")  # still readable
    assert table.item(0, 1).toolTip() == "Trip planning with a long conversation title (chat-1)"
    assert {1, 2, 3} <= set(shown)
    v.tabs.setCurrentWidget(v.hardware_view)
    qtbot.wait(10)
    assert v.hardware_view.horizontalScrollBar().maximum() == 0
    v.shutdown()


def test_memory_differences_shorten_in_a_narrow_table(qtbot, view: DashboardView, tiny_model: Path) -> None:
    plan = plan_for(tiny_model, ctx=512, parallel=2)
    reported = ReportedMemory(
        model={"CPU_Mapped": 1_000_000}, kv={"CPU": 2_000_000}, compute={"CPU": 3_000_000}
    )
    view.set_load_report(plan, reported)
    view.tabs.setCurrentWidget(view.hardware_view)
    table = view.hardware_view.memory_table
    total = table.rowCount() - 1
    view.resize(900, 800)
    view.show()
    qtbot.waitExposed(view)
    wide = table.item(total, 3).text()
    assert "B (" in wide and wide.endswith("%)")  # "−1.2 MiB (−20%)"
    view.resize(MIN_WIDTH, 800)
    qtbot.waitUntil(lambda: table.item(total, 3).text() != wide, timeout=2000)
    assert table.item(total, 3).text() == wide.split("(")[1].rstrip(")")  # just the share
    assert table.item(total, 3).toolTip() == wide


def test_a_shared_pool_is_shown_as_one_pool_with_what_each_conversation_holds(qtbot) -> None:
    from dataclasses import replace

    from app.dashboard.status_line import status_text

    v = DashboardView(FakeTelemetry(), interval_ms=250)
    qtbot.addWidget(v)
    sequences = (
        SequenceStats(0, SlotState.ACTIVE, "chat-1", 900, 0),
        SequenceStats(1, SlotState.REUSABLE, "chat-2", 300, 300),
        SequenceStats(2, SlotState.EMPTY, "", 0, 0),
    )
    pooled = replace(stats(sequences, active=1), shared_pool=True, evicted_prefixes=2)
    v.set_model(FakeModel(pooled))
    v.record_stats(pooled)
    assert v.kv_panel.title == "KV cache — one pool of 2,048 cells, 3 conversations, each up to 512"
    note = v.kv_panel.note.text()
    assert "1,200 of 2,048 cells held" in note and "2 cached evicted for room" in note
    assert [r.cells_used for r in v.kv_panel.rows] == [900, 300]
    own = stats(sequences, active=1)
    v.record_stats(own)
    assert v.kv_panel.title == "KV cache — 3 sequences × 512 cells"
    assert "cells held" not in v.kv_panel.note.text()

    history = MetricsHistory()
    history.add_engine_stats(replace(own, drafting_with="qwen-0.5b.gguf"))
    assert "drafting\u00a0with\u00a0qwen-0.5b.gguf" in status_text(FakeModel(own), history)
    history.add_engine_stats(replace(own, draft_note="Not drafting with qwen-0.5b.gguf: on this machine…"))
    line = status_text(FakeModel(own), history)
    assert line.endswith("<br>Not drafting with qwen-0.5b.gguf: on this machine…")
