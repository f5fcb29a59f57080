"""CPU threads where the user meets them: the load panel, the saved settings, the CLI, the
dashboard's CPU card, and the note under a reply that other programs slowed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.chat import MessageData, MessageView, ReplyStats
from app.chat.data import CPU_BUSY_NOTE
from app.cli.commands import run_cli
from app.dashboard import metrics as m
from app.dashboard.system_cards import cpu_summary
from app.dashboard.view import DashboardView
from app.platform.paths import AppPaths
from app.settings.load_settings import request_from_dict, request_to_dict, settings_key
from app.state.session import SessionState
from app.widgets.model_panel import ModelPanel
from app.window.main_window import MainWindow
from engine import MAX_THREADS, LoadRequest, Role, StopReason
from engine.catalog import inspect_model
from engine.machine.cpu_load import CpuContention, CpuMeter, CpuReading
from engine.machine.hardware import HardwareSnapshot, described_machine
from engine.machine.telemetry import TelemetrySample
from engine.requests.completion import Completion, Timings, Usage
from tests.helpers import WAIT, add_and_select, open_window, show_widget

GIB = 1024**3


# -- saved with the model's load settings --------------------------------------------------


def test_threads_round_trip_with_the_load_settings() -> None:
    request = LoadRequest(context_per_conversation=2048, parallel=2, threads=3, default_threads=1)
    data = json.loads(json.dumps(request_to_dict(request, None)))
    assert data["threads"] == 3
    back = request_from_dict(data, lambda _path: None)
    assert back is not None and back.threads == 3
    # The default is the user's for every model, not part of this one's settings.
    assert back.default_threads is None
    auto = request_from_dict(request_to_dict(LoadRequest(), None), lambda _path: None)
    assert auto is not None and auto.threads is None
    # Settings saved before threads existed, or broken: the default's choice.
    for value in (None, 0, -2, MAX_THREADS + 1, "4", True, 2.5):
        stored = {**data, "threads": value}
        assert request_from_dict(stored, lambda _path: None).threads is None
    stored = dict(data)
    del stored["threads"]
    assert request_from_dict(stored, lambda _path: None).threads is None


# -- the load panel ----------------------------------------------------------------------------


class FakeCpu:
    """CPU clocks a test moves: other programs' load as it pleases."""

    def __init__(self) -> None:
        self.at, self.busy = 0.0, 0.0

    def read(self) -> CpuReading:
        return CpuReading(self.at, self.busy, 0.0)

    def run_others(self, seconds: float, cpus: float) -> None:
        self.at += seconds
        self.busy += seconds * cpus


@pytest.fixture()
def panel(qtbot, tiny_model: Path, hardware: HardwareSnapshot) -> ModelPanel:
    panel = show_widget(qtbot, ModelPanel(), 700, 900)
    panel.set_hardware(hardware)  # 2 cores, idle
    panel.show_model(inspect_model(tiny_model))
    return panel


def test_the_threads_box_is_wide_enough_for_what_auto_means_now(qtbot, panel: ModelPanel) -> None:
    # The box was sized for "auto" and drew "auto (1)" cut to "o (1)".
    spin = panel.threads_spin
    qtbot.waitUntil(lambda: spin.width() >= spin.sizeHint().width())
    assert spin.fontMetrics().horizontalAdvance(spin.text()) < spin.lineEdit().width()


def test_the_load_panel_sets_a_models_threads(panel: ModelPanel) -> None:
    assert panel.threads_spin.value() == 0
    assert panel.threads_spin.text() == "auto (2)"
    assert panel.current_request().threads is None
    assert panel.plan().params.n_threads == 2
    assert "threads 2" in panel.params_label.text()
    panel.threads_spin.setValue(1)
    assert panel.current_request().threads == 1
    assert panel.plan().params.n_threads == panel.plan().params.n_threads_batch == 1
    assert "threads 1" in panel.params_label.text()
    panel.threads_spin.setValue(6)  # more than the cores: allowed, and the plan says what it costs
    assert panel.plan().params.n_threads == 6
    assert "Threads 6 (your setting) on 2 cores" in panel.reasons_label.text()
    # Remembered settings put the control back.
    panel.apply_request(LoadRequest(threads=3))
    assert panel.threads_spin.value() == 3 and panel.plan().params.n_threads == 3
    panel.apply_request(LoadRequest())
    assert panel.threads_spin.value() == 0 and panel.plan().params.n_threads == 2


def test_the_settings_default_applies_to_a_model_without_its_own(panel: ModelPanel) -> None:
    panel.set_default_threads(1)
    assert panel.threads_spin.text() == "default (1, from Settings)"
    assert panel.plan().params.n_threads == 1
    request = panel.current_request()
    assert request.threads is None and request.default_threads == 1  # not saved as the model's own
    panel.threads_spin.setValue(2)
    assert panel.plan().params.n_threads == 2  # the model's own setting wins
    panel.set_default_threads(0)  # back to the planner
    panel.threads_spin.setValue(0)
    assert panel.current_request().default_threads is None
    assert panel.threads_spin.text() == "auto (2)"


def test_auto_threads_follow_other_programs_load(qtbot, panel: ModelPanel) -> None:
    cpu = FakeCpu()
    panel.set_cpu_meter(CpuMeter(0.0, read=cpu.read, cpus=2))
    assert panel.plan().params.n_threads == 2
    for _ in range(10):  # another program keeps one core busy for 20 s
        cpu.run_others(2.0, 1.0)
        panel._cpu_timer.timeout.emit()
    assert panel.plan().params.n_threads == 1
    assert panel.threads_spin.text() == "auto (1)"
    assert "Threads 1 of 2 cores: other programs keep 1 core of 2 busy." in panel.reasons_label.text()
    panel.threads_spin.setValue(2)  # the user's setting wins, and is told what it costs
    assert panel.plan().params.n_threads == 2
    assert "1 would be faster while they run" in panel.reasons_label.text()
    for _ in range(15):  # the other program ends: the plan stops saying so
        cpu.run_others(2.0, 0.0)
        panel._cpu_timer.timeout.emit()
    assert "would be faster" not in panel.reasons_label.text()
    cpu.run_others(2.0, 1.0)
    for _ in range(10):
        cpu.run_others(2.0, 1.0)
        panel._cpu_timer.timeout.emit()
    panel.threads_spin.setValue(0)
    assert panel.plan().params.n_threads == 1
    for _ in range(15):  # the other program ends
        cpu.run_others(2.0, 0.0)
        panel._cpu_timer.timeout.emit()
    assert panel.plan().params.n_threads == 2
    # The panel looks only while it is shown.
    assert panel._cpu_timer.isActive()
    panel.hide()
    assert not panel._cpu_timer.isActive()


def test_a_described_machine_is_not_measured(qtbot, panel: ModelPanel) -> None:
    assert panel._cpu_meter is None  # the tests' machine is described: nothing live


def test_threads_set_in_the_panel_load_the_model_and_are_remembered(
    qtbot, app_paths: AppPaths, hardware: HardwareSnapshot, scripted_model: Path
) -> None:
    window = open_window(qtbot, app_paths, hardware)
    try:
        add_and_select(qtbot, window, scripted_model)
        window.model_panel.threads_spin.setValue(1)
        qtbot.mouseClick(window.model_panel.load_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: window.session.state is SessionState.READY, timeout=WAIT)
        assert window.session.model.plan.params.n_threads == 1
        assert window.store.get_setting(settings_key(scripted_model))["threads"] == 1
    finally:
        window.close()
    second: MainWindow = open_window(qtbot, app_paths, hardware)
    try:
        second.library_panel.select_path(scripted_model)
        qtbot.waitUntil(lambda: second.model_panel.subtitle.text() == str(scripted_model), timeout=WAIT)
        assert second.model_panel.threads_spin.value() == 1
    finally:
        second.close()


# -- the CLI -------------------------------------------------------------------------------------


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = run_cli(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_takes_threads(capsys, tiny_model: Path) -> None:
    code, out, _ = run(capsys, "plan", str(tiny_model), "--threads", "1", "--json")
    assert code == 0
    plan = json.loads(out)
    assert plan["params"]["n_threads"] == plan["params"]["n_threads_batch"] == 1
    assert plan["request"]["threads"] == 1
    code, out, _ = run(capsys, "plan", str(tiny_model), "--json")
    assert json.loads(out)["request"]["threads"] is None  # the planner's choice


@pytest.mark.parametrize("value", ["0", "-3", str(MAX_THREADS + 1), "two", "1.5"])
@pytest.mark.parametrize("command", ["plan", "chat", "bench", "serve"])
def test_threads_out_of_range_are_one_line_errors(
    capsys, tiny_model: Path, command: str, value: str
) -> None:
    argv = [command, str(tiny_model)] + (["hi"] if command == "chat" else [])
    code, out, err = run(capsys, *argv, "--threads", value)
    assert code == 2 and out == ""
    assert err == f"hearth: --threads must be a whole number from 1 to {MAX_THREADS}, not {value!r}.\n"


def test_chat_runs_with_the_threads_asked_for(capsys, scripted_model: Path) -> None:
    code, _, err = run(capsys, "chat", str(scripted_model), "hello", "--threads", "1", "--ctx", "512")
    assert code == 0, err
    assert "tok/s" in err


# -- the dashboard ---------------------------------------------------------------------------------


class ScriptedTelemetry:
    """Telemetry with the CPU figures a test sets."""

    gpu_status = "No NVIDIA driver found (NVML is not available)"

    def __init__(self) -> None:
        self.cpu, self.hearth = 100.0, 3.0

    def sample(self) -> TelemetrySample:
        return TelemetrySample(time.monotonic(), self.cpu, 8 * GIB, 16 * GIB, 300 << 20, (), self.hearth)


def test_the_cpu_card_shows_hearth_apart_from_other_programs(qtbot) -> None:
    telemetry = ScriptedTelemetry()
    view = DashboardView(telemetry, snapshot=described_machine(), interval_ms=40)
    show_widget(qtbot, view, 900, 900)
    view.sample_now()
    legend = view.cpu_card.legend.text()
    assert [s.label for s in view.cpu_card.series] == ["All cores", "Hearth", "Other programs"]
    assert "All cores&nbsp;<b>100%</b>" in legend
    assert "Hearth&nbsp;<b>3%</b>" in legend and "Other programs&nbsp;<b>97%</b>" in legend
    assert view.history.telemetry.latest(m.OTHERS_CPU_PERCENT) == 97.0
    note = view.system_section.note
    assert note.isVisible()
    assert note.text() == (
        "CPU 100% · Hearth 3% · other programs 97%: other programs are using the CPU, so replies are slower."
    )
    telemetry.cpu, telemetry.hearth = 60.0, 40.0  # other programs at 20%: still said (hysteresis)
    view.sample_now()
    assert note.isVisible() and note.text().startswith("CPU 60% · Hearth 40% · other programs 20%")
    telemetry.cpu, telemetry.hearth = 90.0, 80.0  # Hearth busy, the others quiet
    view.sample_now()
    assert not note.isVisible()
    assert "Hearth&nbsp;<b>80%</b>" in view.cpu_card.legend.text()


def test_a_source_that_cannot_tell_hearth_apart_shows_the_total_only() -> None:
    sample = TelemetrySample(0.0, 42.0, 1, 2, 3, ())
    assert sample.others_cpu_percent is None
    assert cpu_summary(sample) == "CPU 42%"


# -- under the reply -------------------------------------------------------------------------------


def completion(cpu: CpuContention | None) -> Completion:
    timings = Timings(0.0, 0.28, 0.4, 12.0, 3_250.0, 1.1)
    return Completion("hi", StopReason.STOP_TOKEN, Usage(40, 0, 14), timings, cpu=cpu)


def test_the_reply_line_says_when_other_programs_slowed_it(qtbot) -> None:
    slowed = ReplyStats.from_completion(completion(CpuContention(12.4, 1.03, 1.1, cores=2, threads=2)))
    assert slowed.cpu_slowed and slowed.threads == 2 and slowed.cores == 2
    assert slowed.summary() == (
        f"0.28 s to first token · 1.1 tok/s · 40 prompt tokens · end of turn · {CPU_BUSY_NOTE}"
    )
    assert CPU_BUSY_NOTE == "the CPU was busy with other programs"
    assert "other programs used 1.0 of its 2 cores" in slowed.details()
    assert ReplyStats.from_dict(slowed.to_dict()) == slowed
    calm = ReplyStats.from_completion(completion(CpuContention(12.4, 1.03, 1.1, cores=2, threads=1)))
    assert not calm.cpu_slowed and CPU_BUSY_NOTE not in calm.summary()
    unknown = ReplyStats.from_completion(completion(None))  # too quick to tell, or a remote model
    assert not unknown.cpu_slowed and "CPU" not in unknown.details()
    # A reply stored before this was recorded reads as not slowed.
    old = {k: v for k, v in slowed.to_dict().items() if k not in ("cpu_slowed", "cpu_busy_elsewhere")}
    assert not ReplyStats.from_dict(old).cpu_slowed

    view = show_widget(qtbot, MessageView(), 800, 600, exposed=True)
    view.set_messages(
        [
            MessageData("u", Role.USER, "hi"),
            MessageData("slow", Role.ASSISTANT, "ok", stats=slowed),
            MessageData("calm", Role.ASSISTANT, "ok", stats=calm),
        ]
    )
    assert view.stats_text("slow").endswith(" · the CPU was busy with other programs")
    assert CPU_BUSY_NOTE not in view.stats_text("calm")


def test_the_windows_load_panel_takes_the_settings_default(
    qtbot, app_paths: AppPaths, hardware: HardwareSnapshot, scripted_model: Path
) -> None:
    from app.settings.preferences import Preferences
    from app.store.history import Store

    with Store(app_paths.database_file) as store:
        Preferences(store).set_default_threads(1)
    window = open_window(qtbot, app_paths, hardware)
    try:
        add_and_select(qtbot, window, scripted_model)
        panel = window.model_panel
        assert panel.threads_spin.value() == 0 and panel.threads_spin.text() == "default (1, from Settings)"
        assert panel.plan().params.n_threads == 1
    finally:
        window.close()


def test_memory_for_conversations_round_trips_with_the_load_settings() -> None:
    shared = LoadRequest(context_per_conversation=32768, parallel=8, kv_pool=32768)
    back = request_from_dict(json.loads(json.dumps(request_to_dict(shared, None))), lambda _path: None)
    assert back is not None and back.kv_pool == 32768
    older = request_to_dict(LoadRequest(parallel=2), None)
    del older["kv_pool"]  # saved before the pool existed: each conversation its own
    assert request_from_dict(older, lambda _path: None).kv_pool is None
