"""The first window, driven through its real widgets (offscreen)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QPushButton

from app.application import build_window
from app.platform.paths import AppPaths
from app.widgets.badge_delegate import BADGE_ROLE
from app.widgets.nav_rail import Page
from app.window.main_window import MainWindow
from engine.machine.hardware import HardwareSnapshot
from engine.planner import Verdict
from tests.helpers import add_and_select, drag_enter, drop, open_window


def drop_and_plan(qtbot, window: MainWindow, model: Path) -> None:
    """Drop ``model`` onto the window and wait until the model panel shows its plan."""
    drop(window, model)
    qtbot.waitUntil(lambda: window.model_panel.plan() is not None, timeout=10_000)


def facts(window: MainWindow) -> dict[str, str]:
    form = window.model_panel.facts_form
    out = {}
    for row in range(form.rowCount()):
        label = form.itemAt(row, form.ItemRole.LabelRole).widget()
        value = form.itemAt(row, form.ItemRole.FieldRole).widget()
        if isinstance(label, QLabel) and isinstance(value, QLabel):
            out[label.text()] = value.text()
    return out


def test_empty_library_explains_how_to_add_models(window: MainWindow) -> None:
    assert window.library_panel.empty_label.isVisible()
    assert "Drop" in window.library_panel.empty_label.text()
    assert window.current_page() is Page.MODELS
    assert "GGUF" in window.model_panel.subtitle.text()
    assert window.model_panel.title.text() == "Select a model"


def test_dropping_a_model_adds_it_and_shows_metadata_and_plan(
    qtbot, window: MainWindow, tiny_model: Path
) -> None:
    drop_and_plan(qtbot, window, tiny_model)
    assert window.library_panel.selected_path() == tiny_model
    shown = facts(window)
    assert shown["Architecture"] == "llama"
    assert shown["Layers"] == "2"
    assert shown["Chat template"] == "yes"
    plan = window.model_panel.plan()
    assert plan.verdict is Verdict.FITS
    assert "Fits" in window.model_panel.verdict_label.text()
    assert window.model_panel.memory_bar.devices() == plan.memory


def test_plan_follows_context_and_parallel_controls(qtbot, window: MainWindow, tiny_model: Path) -> None:
    drop_and_plan(qtbot, window, tiny_model)
    panel = window.model_panel
    before = panel.plan()
    panel.ctx_spin.setValue(2048)
    panel.parallel_spin.setValue(4)
    after = panel.plan()
    assert after.params.n_ctx == 2048 * 4
    assert after.params.n_seq_max == 4
    kv = lambda plan: sum(d.kv_cache for d in plan.memory)  # noqa: E731
    assert kv(after) > kv(before)


def test_memory_for_conversations_shares_one_pool_and_relabels_the_context(
    qtbot, window: MainWindow, tiny_model: Path
) -> None:
    drop_and_plan(qtbot, window, tiny_model)
    panel = window.model_panel
    panel.ctx_spin.setValue(4096)
    panel.parallel_spin.setValue(8)
    own = panel.plan()
    assert panel.pool_spin.text() == "each conversation its own"
    assert panel._ctx_label.text() == "Context per conversation"
    panel.pool_spin.setValue(4096)
    shared = panel.plan()
    assert panel.current_request().kv_pool == 4096
    assert panel._ctx_label.text() == "Longest conversation"
    assert (shared.params.kv_unified, shared.params.n_ctx, shared.params.n_ctx_seq) == (True, 4096, 4096)
    kv = lambda plan: sum(d.kv_cache for d in plan.memory)  # noqa: E731
    assert kv(own) == 8 * kv(shared)
    panel.pool_spin.setValue(0)
    assert panel._ctx_label.text() == "Context per conversation"
    assert panel.plan().params.kv_unified is False


def test_a_smaller_model_of_the_same_vocabulary_is_paired_as_the_draft_by_default(
    qtbot, window: MainWindow, tiny_model: Path, tmp_path: Path
) -> None:
    from engine.devtools.tiny_models import TinyTextSpec, write_tiny_text_model

    spec = TinyTextSpec(n_embd=256, n_layer=6, name="Big Llama")
    big = write_tiny_text_model(tmp_path / "big-llama.gguf", spec)
    add_and_select(qtbot, window, big, tiny_model)
    qtbot.waitUntil(lambda: window.model_panel.plan() is not None, timeout=10_000)
    panel = window.model_panel
    assert panel.speculation_combo.currentText() == "Draft model: Tiny Llama"
    plan = panel.plan()
    assert plan.request.draft is not None and plan.request.draft.path == tiny_model
    assert panel.current_speculation().draft_path == tiny_model
    panel.speculation_combo.setCurrentIndex(panel.speculation_combo.findData(None))  # Off
    assert panel.plan().request.draft is None and panel.current_speculation() is None


def test_dropping_a_folder_lists_invalid_files_with_their_reason(
    qtbot, window: MainWindow, tmp_path: Path, tiny_model: Path, tiny_projector: Path
) -> None:
    folder = tmp_path / "dropped"
    (folder / "nested").mkdir(parents=True)
    (folder / "nested" / "tiny-llama.gguf").write_bytes(tiny_model.read_bytes())
    (folder / "nested" / "mmproj-tiny-llama.gguf").write_bytes(tiny_projector.read_bytes())
    (folder / "notes.gguf").write_bytes(b"hello, not a model")
    drop(window, folder)
    qtbot.waitUntil(lambda: window.library.counts().models == 1, timeout=10_000)
    counts = window.library.counts()
    assert (counts.models, counts.projectors, counts.invalid) == (1, 1, 1)
    texts = [
        window.library_panel.model.item(r, 0).text() for r in range(window.library_panel.model.rowCount())
    ]
    assert any("notes.gguf" in t and "not a GGUF" in t for t in texts)
    model_row = next(r for r, t in enumerate(texts) if t == "Tiny Llama")
    projector = window.library_panel.model.item(model_row, 0).child(0, 0)
    assert projector is not None and projector.data(BADGE_ROLE) == "vision projector"
    assert window.status_label.text() == "1 model · 1 projector · 1 unusable"


def test_remove_from_library_keeps_the_file(
    qtbot, window: MainWindow, tmp_path: Path, tiny_model: Path
) -> None:
    copy = tmp_path / "keep-me.gguf"
    copy.write_bytes(tiny_model.read_bytes())
    add_and_select(qtbot, window, copy, timeout=10_000)
    window.library_panel.remove_action.trigger()
    qtbot.waitUntil(lambda: window.library.counts().models == 0, timeout=10_000)
    assert copy.exists()


def test_library_is_remembered_across_restarts(
    qtbot, app_paths: AppPaths, hardware: HardwareSnapshot, tiny_model: Path
) -> None:
    first = build_window(app_paths, hardware=hardware)
    qtbot.addWidget(first)
    first.start()
    drop(first, tiny_model)
    qtbot.waitUntil(lambda: first.library.counts().models == 1, timeout=10_000)
    first.close()
    second = build_window(app_paths, hardware=hardware)
    qtbot.addWidget(second)
    second.start()
    qtbot.waitUntil(lambda: second.library.counts().models == 1, timeout=10_000)
    second.close()


def test_non_gguf_drops_are_refused(window: MainWindow, tmp_path: Path) -> None:
    text = tmp_path / "readme.txt"
    text.write_text("hi")
    assert not drag_enter(window, text).isAccepted()


def test_does_not_fit_shows_a_one_click_fix(qtbot, window: MainWindow, gemma_path: Path) -> None:
    drop_and_plan(qtbot, window, gemma_path)
    panel = window.model_panel
    panel.parallel_spin.setValue(64)
    panel.ctx_spin.setValue(32768)
    assert panel.plan().verdict is Verdict.DOES_NOT_FIT
    assert "short by" in panel.verdict_label.text()
    fixes = panel.suggestions_box.findChildren(QPushButton)
    assert fixes, "a plan that does not fit offers fixes"
    qtbot.mouseClick(fixes[0], Qt.MouseButton.LeftButton)
    assert panel.plan().verdict is not Verdict.DOES_NOT_FIT


def test_a_build_that_failed_its_self_check_is_said_in_the_window(
    qtbot, app_paths: AppPaths, hardware, capsys
):
    message = (
        "llama.cpp crashed with SIGILL (illegal instruction) in its self-check on this CPU; it was "
        "compiled for AVX2, AMX_INT8. Rebuild it safely with: HEARTH_CPU=portable make native"
    )
    win = open_window(qtbot, app_paths, replace(hardware, native_error=message))
    assert win.native_label.text() == message and win.native_label.isVisible()
    assert win.model_panel.load_status.text() == message
    assert capsys.readouterr().err.strip() == f"hearth: {message}"
    win.close()
