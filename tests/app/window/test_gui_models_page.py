"""The Models page tells the truth: the library list and the model page, driven through
their real widgets (offscreen) with tiny generated models."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QFileDialog, QLabel

from app.platform.paths import AppPaths
from app.services.library import LibraryCounts
from app.settings.recent_folder import RecentFolder
from app.state.session import SessionState
from app.widgets.badge_delegate import BADGE_ROLE
from app.widgets.library_panel import PATH_ROLE
from app.widgets.model_panel import ModelPanel
from app.widgets.nav_rail import Page
from app.window.main_window import MainWindow
from app.wording.presenters import BASE_MODEL_BADGE, PARAMETERS_TIP, elide_middle, parameters_text
from engine.catalog import inspect_model
from engine.devtools.tiny_models import (
    TinyProjectorSpec,
    TinyTextSpec,
    write_tiny_projector,
    write_tiny_text_model,
)
from engine.machine.hardware import HardwareSnapshot
from tests.helpers import WAIT, add_and_select, drop, load, open_window, show_widget


def write_model(folder: Path, file: str, **spec: Any) -> Path:
    return write_tiny_text_model(folder / file, TinyTextSpec(**spec))


def library_item(window: MainWindow, path: Path):
    """The name cell of ``path``'s row in the library list (models and their projectors)."""
    model = window.library_panel.model
    matches = model.match(
        model.index(0, 0), PATH_ROLE, str(path), 1, Qt.MatchFlag.MatchExactly | Qt.MatchFlag.MatchRecursive
    )
    assert matches, f"{path.name} is not in the library list"
    return model.itemFromIndex(matches[0])


def select(qtbot, window: MainWindow, path: Path) -> None:
    """Open the Models page and click ``path`` in the library, as a user would; wait for
    the model panel to show it."""
    window.show_page(Page.MODELS)
    window.library_panel.select_path(path)
    qtbot.waitUntil(lambda: window.model_panel.subtitle.text() == str(path), timeout=WAIT)


def add_all(qtbot, window: MainWindow, *paths: Path) -> None:
    drop(window, *paths)
    qtbot.waitUntil(lambda: all(window.library.library.get(p) is not None for p in paths), timeout=WAIT)
    qtbot.waitUntil(lambda: not window.library.busy, timeout=WAIT)


def panel_facts(panel: ModelPanel) -> dict[str, QLabel]:
    form = panel.facts_form
    rows = {}
    for row in range(form.rowCount()):
        label = form.itemAt(row, form.ItemRole.LabelRole).widget()
        value = form.itemAt(row, form.ItemRole.FieldRole).widget()
        if isinstance(label, QLabel) and isinstance(value, QLabel):
            rows[label.text()] = value
    return rows


# -- 1. base models ------------------------------------------------------------------------


def test_a_base_model_is_named_for_what_it_is(qtbot, window: MainWindow, tmp_path: Path) -> None:
    base = write_model(tmp_path, "tiny-base.gguf", chat_template=None, name="Tiny Base")
    chat = write_model(tmp_path, "tiny-chat.gguf", name="Tiny Chat")
    add_all(qtbot, window, base, chat)

    base_item, chat_item = library_item(window, base), library_item(window, chat)
    assert base_item.data(BADGE_ROLE) == "base model"
    assert BASE_MODEL_BADGE in base_item.toolTip()
    assert chat_item.data(BADGE_ROLE) is None
    assert BASE_MODEL_BADGE not in chat_item.toolTip()

    panel = window.model_panel
    select(qtbot, window, base)
    assert panel.base_badge.isVisible() and panel.base_badge.text() == BASE_MODEL_BADGE
    assert "no chat template" in panel.base_badge.toolTip()
    select(qtbot, window, chat)
    assert not panel.base_badge.isVisible()


# -- 2. the page shows the selected model's session, not another's ------------------------


def test_another_model_shows_its_plan_and_a_load_that_replaces(
    qtbot, window: MainWindow, tiny_model: Path, tmp_path: Path
) -> None:
    other = write_model(tmp_path, "other.gguf", name="Other Tiny")
    load(qtbot, window, tiny_model, parallel=1)
    panel = window.model_panel
    add_and_select(qtbot, window, other)

    assert panel.plan() is not None and panel.plan().model.path == other
    assert panel.load_status.text() == ""
    assert not panel.load_progress.isVisibleTo(panel)
    assert panel.load_button.text() == "Load (replaces Tiny Llama)"
    assert panel.load_button.isEnabled()
    assert "Unloads Tiny Llama" in panel.load_button.toolTip()

    select(qtbot, window, tiny_model)
    assert panel.load_status.text() == "Loaded. Tiny Llama is ready to chat."
    assert panel.load_progress.isVisibleTo(panel)
    assert panel.load_button.text() == "Reload with these settings"

    select(qtbot, window, other)
    qtbot.mouseClick(panel.load_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.session.state is SessionState.READY, timeout=WAIT)
    assert window.session.plan.model.path == other
    select(qtbot, window, other)
    assert panel.load_status.text() == "Loaded. Other Tiny is ready to chat."
    assert panel.load_progress.isVisibleTo(panel)
    select(qtbot, window, tiny_model)
    assert panel.load_button.text() == "Load (replaces Other Tiny)"
    assert not panel.load_progress.isVisibleTo(panel)


def test_while_one_model_loads_another_waits_for_it(qtbot, window: MainWindow, tmp_path: Path) -> None:
    loading = write_model(tmp_path, "loading.gguf", name="Loading Tiny")
    other = write_model(tmp_path, "waiting.gguf", name="Waiting Tiny")
    add_all(qtbot, window, loading, other)
    panel = window.model_panel
    select(qtbot, window, loading)
    plan = panel.plan()
    panel.set_session(plan, SessionState.LOADING)  # what the window says while the executor works
    assert panel.load_status.text() == "Loading Loading Tiny…"
    assert panel.load_progress.isVisibleTo(panel) and panel.cancel_button.text() == "Cancel loading"

    select(qtbot, window, other)
    assert panel.load_status.text() == ""
    assert not panel.load_progress.isVisibleTo(panel)
    assert not panel.load_button.isEnabled()
    assert "wait for it or cancel it" in panel.load_button.toolTip()
    assert panel.cancel_button.isVisible() and panel.cancel_button.text() == "Cancel loading Loading Tiny"
    panel.set_session(None, SessionState.EMPTY)
    assert panel.load_button.isEnabled() and panel.load_button.text() == "Load model"


def test_a_load_error_ends_when_another_model_is_chosen_or_a_load_starts(
    qtbot, window: MainWindow, tmp_path: Path, tiny_model: Path
) -> None:
    broken = tmp_path / "soon-broken.gguf"
    broken.write_bytes(tiny_model.read_bytes())
    add_all(qtbot, window, broken, tiny_model)
    panel = window.model_panel

    def fail_loading() -> None:
        select(qtbot, window, broken)
        broken.write_bytes(b"GGUF but not really")
        qtbot.mouseClick(panel.load_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: window.session.state is SessionState.FAILED, timeout=WAIT)
        assert panel.load_status.text() == window.session.error.message
        assert "#d62728" in panel.load_status.styleSheet()

    fail_loading()
    select(qtbot, window, tiny_model)
    assert panel.load_status.text() == ""
    select(qtbot, window, broken)
    assert panel.load_status.text() == "", "the error was read and left behind"
    assert not panel.load_progress.isVisibleTo(panel)

    fail_loading()
    broken.write_bytes(tiny_model.read_bytes())  # the user fixes the file and tries again
    qtbot.mouseClick(panel.load_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.session.state is SessionState.READY, timeout=WAIT)
    select(qtbot, window, broken)
    assert panel.load_status.text().startswith("Loaded.")
    assert panel.load_status.styleSheet() == ""


def test_a_load_error_waits_on_the_page_of_the_model_that_failed(
    qtbot, window: MainWindow, tmp_path: Path
) -> None:
    failing = write_model(tmp_path, "failing.gguf", name="Failing Tiny")
    other = write_model(tmp_path, "bystander.gguf", name="Bystander Tiny")
    add_all(qtbot, window, failing, other)
    panel = window.model_panel
    select(qtbot, window, failing)
    panel.set_session(panel.plan(), SessionState.LOADING)
    select(qtbot, window, other)  # the user looks elsewhere while it loads
    panel.set_session(None, SessionState.FAILED)
    panel.show_load_error("Not enough memory to load Failing Tiny")
    assert panel.load_status.text() == ""
    select(qtbot, window, failing)
    assert panel.load_status.text() == "Not enough memory to load Failing Tiny"


# -- 3. vision -------------------------------------------------------------------------------


def test_the_projector_under_a_model_is_chosen_by_default(qtbot, window: MainWindow, tmp_path: Path) -> None:
    model = write_model(tmp_path, "tiny-llama.gguf")
    # Same name stem and folder: equally good matches, so the first by name comes first.
    second = write_tiny_projector(tmp_path / "mmproj-tiny-llama-q8_0.gguf", TinyProjectorSpec())
    first = write_tiny_projector(tmp_path / "mmproj-tiny-llama-f16.gguf", TinyProjectorSpec())
    add_all(qtbot, window, model, first, second)
    listed = library_item(window, model)
    assert [listed.child(r, 0).data(PATH_ROLE) for r in range(listed.rowCount())] == [str(first), str(second)]
    assert listed.child(0, 0).data(BADGE_ROLE) == "vision projector"

    panel = window.model_panel
    select(qtbot, window, model)
    assert panel.projector_combo.currentData().path == first
    assert panel.plan().request.projector.path == first
    panel.projector_combo.setCurrentIndex(panel.projector_combo.findText("none"))
    assert panel.plan().request.projector is None
    select(qtbot, window, first)  # a projector's own page
    select(qtbot, window, model)
    assert panel.projector_combo.currentText() == "none", "the user's choice stays"


def test_one_projector_is_chosen_and_a_model_without_any_has_none(
    qtbot, window: MainWindow, tiny_model: Path, tiny_projector: Path, tmp_path: Path
) -> None:
    wide = write_model(tmp_path, "wide.gguf", n_embd=128, n_ff=256, name="Wide Tiny")  # no 128-wide projector
    add_all(qtbot, window, tiny_model, tiny_projector, wide)
    panel = window.model_panel
    select(qtbot, window, tiny_model)
    assert panel.projector_combo.currentText() == tiny_projector.name
    select(qtbot, window, wide)
    assert panel.projector_combo.currentText() == "none" and not panel.projector_combo.isEnabled()


def test_a_request_the_planner_refuses_is_said_in_red(qtbot, window: MainWindow, tiny_model: Path) -> None:
    add_all(qtbot, window, tiny_model)
    panel = window.model_panel
    select(qtbot, window, tiny_model)
    panel.kv_combo.setCurrentIndex(panel.kv_combo.findText("q8_0"))  # 16-wide heads: not whole blocks
    assert panel.plan() is None and "divisible by 32" in panel.verdict_label.text()
    assert "#d62728" in panel.verdict_label.styleSheet()


# -- 4. smaller points -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "text"), [(20, "Qwen2.5 Coder 1.5B"), (9, "Qwen…1.5B"), (8, "Qwen….5B"), (2, "Q…"), (1, "…")]
)
def test_elide_middle_keeps_both_ends(limit: int, text: str) -> None:
    assert elide_middle("Qwen2.5 Coder 1.5B", limit) == text
    assert len(text) <= limit


def test_library_counts_are_said_in_words() -> None:
    assert LibraryCounts(1, 1, 0).describe() == "1 model · 1 projector"
    assert LibraryCounts(2, 0, 3).describe() == "2 models · 0 projectors · 3 unusable"


def test_one_parameters_line_explains_a_label_that_disagrees(qtbot, tiny_model: Path, hardware) -> None:
    info = inspect_model(tiny_model)
    assert parameters_text(info) == "133.1K"  # its derived label, 133K, says the same
    assert parameters_text(replace(info, size_label="1.5B", parameter_count=1_777_088_000)) == (
        "1.8B (labelled 1.5B)"
    )
    assert parameters_text(replace(info, size_label="270M", parameter_count=268_098_176)) == "268.1M"
    assert parameters_text(replace(info, size_label="8x7B", parameter_count=46_702_792_704)) == (
        "46.7B (labelled 8x7B)"
    )
    panel = show_widget(qtbot, ModelPanel(), 900, 700)
    panel.set_hardware(hardware)
    panel.show_model(replace(info, size_label="1M"))
    rows = panel_facts(panel)
    assert "Size" not in rows
    assert rows["Parameters"].text() == "133.1K (labelled 1M)"
    assert rows["Parameters"].toolTip() == PARAMETERS_TIP


def test_a_context_past_the_maximum_is_lowered_to_it_and_said(
    qtbot, window: MainWindow, tiny_model: Path
) -> None:
    add_all(qtbot, window, tiny_model)
    panel = window.model_panel
    select(qtbot, window, tiny_model)
    assert panel.ctx_hint.isVisible()
    assert panel.ctx_hint.text() == "Maximum 4,096 (the model's training context)"
    qtbot.wait(10)  # laid out
    hint_bottom = panel.ctx_hint.mapTo(panel, QPoint(0, panel.ctx_hint.height())).y()
    assert panel.ctx_hint.height() >= panel.ctx_hint.sizeHint().height(), "the hint is drawn whole"
    assert hint_bottom <= panel.parallel_spin.mapTo(panel, QPoint(0, 0)).y(), "and not under the next row"
    panel.ctx_spin.setFocus()
    panel.ctx_spin.lineEdit().selectAll()
    qtbot.keyClicks(panel.ctx_spin, "1000000")
    assert panel.ctx_spin.lineEdit().text().startswith("1000000"), "every digit typed is kept"
    qtbot.keyClick(panel.ctx_spin, Qt.Key.Key_Return)
    assert panel.ctx_spin.value() == 4096
    assert panel.ctx_hint.text() == (
        "1,000,000 is more than the maximum: set to 4,096 (the model's training context)."
    )
    assert panel.plan().params.n_ctx_seq == 4096
    panel.ctx_spin.setValue(2048)
    assert panel.ctx_hint.text().startswith("Maximum 4,096")


def test_parallel_conversations_are_set_per_model(qtbot, window: MainWindow, tmp_path: Path) -> None:
    first = write_model(tmp_path, "first.gguf", name="First Tiny")
    second = write_model(tmp_path, "second.gguf", name="Second Tiny")
    add_all(qtbot, window, first, second)
    panel = window.model_panel
    select(qtbot, window, first)
    panel.parallel_spin.setValue(4)
    panel.ctx_spin.setValue(2048)
    select(qtbot, window, second)
    assert panel.parallel_spin.value() == 1, "the second model keeps its own setting"
    assert panel.ctx_spin.value() == 4096
    assert panel.plan().params.n_seq_max == 1
    panel.parallel_spin.setValue(2)
    select(qtbot, window, first)
    assert (panel.parallel_spin.value(), panel.ctx_spin.value()) == (4, 2048)
    select(qtbot, window, second)
    assert panel.parallel_spin.value() == 2


def test_long_names_are_elided_in_the_middle_and_a_narrow_list_keeps_the_name(
    qtbot, window: MainWindow, tmp_path: Path
) -> None:
    name = "Meta Llama 3.1 8B Instruct Abliterated Uncensored Extended Context Imatrix"
    model = write_model(tmp_path, "long.gguf", name=name)
    add_all(qtbot, window, model)
    tree = window.library_panel.tree
    assert tree.textElideMode() == Qt.TextElideMode.ElideMiddle
    assert library_item(window, model).toolTip().splitlines()[0] == name
    window.show_page(Page.MODELS)

    def columns_shown() -> list[bool]:
        return [not tree.isColumnHidden(c) for c in range(4)]

    window.models_page.setSizes([700, 620])
    qtbot.waitUntil(lambda: columns_shown() == [True] * 4, timeout=WAIT)
    window.models_page.setSizes([240, 1080])
    qtbot.waitUntil(lambda: columns_shown() == [True, False, False, False], timeout=WAIT)
    assert tree.columnWidth(0) >= tree.viewport().width() - 1, "the name takes the room the others left"
    tip = library_item(window, model).toolTip()
    assert "parameters · F32 ·" in tip and "on disk" in tip, "what the hidden columns said is in the tooltip"


class FakeDialogs:
    """QFileDialog's static functions, answered as a user would; records where each opened."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened_in: list[str] = []
        self.answer: Any = None
        monkeypatch.setattr(QFileDialog, "getOpenFileNames", staticmethod(self._files))
        monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(self._folder))

    def _files(self, _parent, _caption, directory, _filter):
        self.opened_in.append(directory)
        return self.answer, ""

    def _folder(self, _parent, _caption, directory):
        self.opened_in.append(directory)
        return self.answer


def test_file_dialogs_open_where_models_were_last_added(
    qtbot,
    monkeypatch: pytest.MonkeyPatch,
    app_paths: AppPaths,
    hardware: HardwareSnapshot,
    tmp_path: Path,
    tiny_model: Path,
) -> None:
    dialogs = FakeDialogs(monkeypatch)
    elsewhere = tmp_path / "downloads"
    elsewhere.mkdir()
    copy = elsewhere / "tiny.gguf"
    copy.write_bytes(tiny_model.read_bytes())
    window = open_window(qtbot, app_paths, hardware)
    dialogs.answer = []  # cancelled: nothing remembered
    window.add_files_action.trigger()
    dialogs.answer = [str(copy)]
    window.add_files_action.trigger()
    qtbot.waitUntil(lambda: window.library.counts().models == 1, timeout=WAIT)
    dialogs.answer = ""
    window.add_folder_action.trigger()
    assert dialogs.opened_in == [str(app_paths.models_dir)] * 2 + [str(elsewhere)]
    window.close()

    again = open_window(qtbot, app_paths, hardware)
    dialogs.answer = str(elsewhere.parent)
    again.add_folder_action.trigger()
    dialogs.answer = []
    again.add_files_action.trigger()
    assert dialogs.opened_in[-2:] == [str(elsewhere), str(elsewhere.parent)]
    again.close()  # while the folder is still being scanned: its result must not land in a closed window


def test_a_remembered_folder_that_is_gone_falls_back_to_the_models_folder(tmp_path: Path) -> None:
    settings: dict[str, Any] = {}

    class Settings:
        def get_setting(self, key: str, default: Any = None) -> Any:
            return settings.get(key, default)

        def set_setting(self, key: str, value: Any) -> None:
            settings[key] = value

    models = tmp_path / "models"
    models.mkdir()
    recent = RecentFolder(Settings(), models)
    assert recent.get() == models
    gone = tmp_path / "unmounted"
    gone.mkdir()
    recent.remember(gone)
    assert recent.get() == gone
    gone.rmdir()
    assert recent.get() == models
