"""Settings (Ctrl+,): General, Hardware, Appearance, Remote servers and Hub, each page driven
as a user would, its values round-tripped through the store, and each setting seen to take
effect: new conversations, the load panel, the palette and font, downloads and the library."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase, QPalette
from PySide6.QtWidgets import QApplication, QPushButton

from app.chat.theme import apply_font_size, apply_theme, is_dark
from app.platform.paths import AppPaths, resolve_paths
from app.settings.load_settings import request_to_dict, settings_key
from app.settings.preferences import Preferences, Theme
from app.widgets.nav_rail import Page
from app.widgets.settings_dialog import SettingsDialog, SettingsPage
from app.window.main_window import MainWindow
from engine import DownloadState, LoadRequest
from engine.machine.hardware import GpuInfo, HardwareSnapshot
from tests.fake_hub import FakeHub
from tests.helpers import WAIT, add_and_select, open_window
from tests.hub_fixtures import TINY_REPO

GIB = 1 << 30


@pytest.fixture(autouse=True)
def system_appearance(qapp: QApplication):
    """The theme and font are the application's: put the system's back for the next test."""
    yield
    apply_theme(qapp, Theme.SYSTEM)
    apply_font_size(qapp, 0)


def open_settings(qtbot, window: MainWindow, page: SettingsPage | None = None) -> SettingsDialog:
    qtbot.keyClick(window, Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier)
    dialog = window.settings_dialog
    assert dialog is not None and dialog.isVisible()
    if page is not None:
        dialog.show_page(page)
    return dialog


def reopen(qtbot, window: MainWindow, paths: AppPaths, hardware: HardwareSnapshot) -> MainWindow:
    window.close()
    return open_window(qtbot, paths, hardware)


# -- the pages ---------------------------------------------------------------------------


def test_settings_has_the_pages_users_expect(qtbot, window: MainWindow) -> None:
    dialog = open_settings(qtbot, window)
    tabs = [dialog.tabs.tabText(i) for i in range(dialog.tabs.count())]
    assert tabs == ["General", "Hardware", "Appearance", "Remote servers", "Tools", "Hub"]
    assert dialog.current_page() is SettingsPage.GENERAL
    dialog.close()
    # A remote model's "settings" link still opens Remote servers.
    window.remote_panel.settings_requested.emit()
    assert dialog.isVisible() and dialog.current_page() is SettingsPage.REMOTE


def test_general_page_round_trips_through_the_store(
    qtbot, window: MainWindow, app_paths: AppPaths, hardware: HardwareSnapshot
) -> None:
    page = open_settings(qtbot, window).general_page
    assert page.load_last.isChecked()  # on by default
    qtbot.keyClick(page.load_last, Qt.Key.Key_Space)
    assert Preferences(window.store).load_last_model() is False
    page.defaults.system_prompt.setPlainText("You answer in French.")
    page.defaults.temperature.setValue(0.3)
    page.defaults.max_tokens.setValue(300)
    window.settings_dialog.close()  # closing keeps the system prompt typed just before
    preferences = Preferences(window.store)
    assert preferences.default_system_prompt() == "You answer in French."
    assert preferences.default_sampling()["temperature"] == 0.3
    assert "system_prompt" not in preferences.default_sampling()

    again = reopen(qtbot, window, app_paths, hardware)
    try:
        page = open_settings(qtbot, again).general_page
        assert not page.load_last.isChecked()
        shown = page.defaults.settings()
        assert (shown.system_prompt, shown.temperature, shown.max_tokens) == (
            "You answer in French.",
            0.3,
            300,
        )
        assert page.models_folder.text() == str(app_paths.models_dir)
    finally:
        again.close()


def test_a_new_conversation_gets_the_default_system_prompt_and_sampling(qtbot, window: MainWindow) -> None:
    window.new_chat_action.trigger()
    first = window.chat.current_id
    window.sampling_panel.temperature.setValue(1.7)  # this conversation's own
    page = open_settings(qtbot, window).general_page
    page.defaults.system_prompt.setPlainText("Be brief.")
    page.defaults.flush()
    page.defaults.top_k.setValue(7)
    page.defaults.max_tokens.setValue(512)
    window.settings_dialog.close()

    window.new_chat_action.trigger()
    new = window.store.get_conversation(window.chat.current_id)
    assert new.id != first
    assert new.system_prompt == "Be brief."
    assert (new.sampling["top_k"], new.sampling["max_tokens"], new.sampling["temperature"]) == (7, 512, 0.8)
    shown = window.sampling_panel.settings()
    assert (shown.system_prompt, shown.top_k, shown.max_tokens) == ("Be brief.", 7, 512)
    # The conversation the user tuned keeps its own settings.
    assert window.store.get_conversation(first).sampling["temperature"] == 1.7


def test_the_first_conversation_starts_from_the_defaults_too(
    qtbot, app_paths: AppPaths, hardware: HardwareSnapshot
) -> None:
    from app.store.history import Store

    store = Store(app_paths.database_file)
    preferences = Preferences(store)
    preferences.set_default_system_prompt("You are a pirate.")
    preferences.set_default_sampling({"temperature": 0.1, "top_k": "many", "seed": 42})  # a bad value
    store.close()
    window = open_window(qtbot, app_paths, hardware)
    try:
        shown = window.sampling_panel.settings()  # no conversation yet: what the first one gets
        assert (shown.system_prompt, shown.temperature, shown.seed) == ("You are a pirate.", 0.1, 42)
        assert shown.top_k == 40  # the engine's default where the saved value was not a number
        window.new_chat_action.trigger()
        conversation = window.store.get_conversation(window.chat.current_id)
        assert conversation.system_prompt == "You are a pirate." and conversation.sampling["seed"] == 42
        # Defaults changed while no conversation is shown are what the first one starts with.
        window.chat.delete(conversation.id)
        assert window.chat.current_id is None
        defaults = open_settings(qtbot, window).general_page.defaults
        defaults.temperature.setValue(0.6)
        assert window.sampling_panel.settings().temperature == 0.6
        window.new_chat_action.trigger()
        assert window.store.get_conversation(window.chat.current_id).sampling["temperature"] == 0.6
    finally:
        window.close()


# -- Hardware --------------------------------------------------------------------------


def gpu_machine(hardware: HardwareSnapshot) -> HardwareSnapshot:
    return dataclasses.replace(
        hardware,
        gpus=(GpuInfo(0, "NVIDIA RTX 4090", 24 * GIB, 20 * GIB, None, None),),
        gpu_offload_supported=True,
    )


def test_hardware_page_round_trips_and_feeds_the_load_panel(
    qtbot, app_paths: AppPaths, hardware: HardwareSnapshot, tiny_model: Path, scripted_model: Path
) -> None:
    machine = gpu_machine(hardware)
    window = open_window(qtbot, app_paths, machine)
    try:
        page = open_settings(qtbot, window, SettingsPage.HARDWARE).hardware_page
        assert page.threads.value() == 0 and page.threads.text() == "auto (the planner chooses)"
        assert page.threads.maximum() == machine.logical_cores  # no more threads than the CPU runs
        assert page.gpu_layers.text() == "auto (as many as fit)"
        page.threads.setValue(2)
        page.gpu_layers.setValue(1)
        preferences = Preferences(window.store)
        assert (preferences.default_threads(), preferences.default_gpu_layers()) == (2, 1)
        # A model with remembered settings keeps them; one without starts from the default.
        remembered = LoadRequest(context_per_conversation=512, gpu_layers=0)
        window.store.set_setting(settings_key(scripted_model), request_to_dict(remembered, None))
        add_and_select(qtbot, window, scripted_model)
        assert window.model_panel.gpu_spin.value() == 0
        add_and_select(qtbot, window, tiny_model)
        assert window.model_panel.gpu_spin.value() == 1
        assert window.model_panel.current_request().gpu_layers == 1
        # The threads default reaches the plan on screen at once (the model has none of its own).
        assert window.model_panel.current_request().default_threads == 2
        page.threads.setValue(1)
        assert window.model_panel.current_request().default_threads == 1
        page.threads.setValue(2)
        page.gpu_layers.setValue(page.gpu_layers.minimum())  # back to auto
        assert Preferences(window.store).default_gpu_layers() is None
        window = reopen(qtbot, window, app_paths, machine)
        page = open_settings(qtbot, window, SettingsPage.HARDWARE).hardware_page
        assert page.threads.value() == 2 and page.gpu_layers.value() == page.gpu_layers.minimum()
    finally:
        window.close()


def test_the_gpu_layers_default_leaves_a_cpu_only_machine_alone(
    qtbot, window: MainWindow, tiny_model: Path
) -> None:
    page = open_settings(qtbot, window, SettingsPage.HARDWARE).hardware_page
    assert "No usable GPU: every layer runs on the CPU." in page.note.text()
    page.gpu_layers.setValue(5)
    add_and_select(qtbot, window, tiny_model)
    assert window.model_panel.current_request().gpu_layers is None  # the CPU runs every layer


# -- Appearance ----------------------------------------------------------------------------


def test_theme_applies_live_to_the_window_and_the_chat(
    qtbot, window: MainWindow, app_paths: AppPaths, hardware: HardwareSnapshot
) -> None:
    app = QApplication.instance()
    system_base = app.palette().color(QPalette.ColorRole.Base)
    page = open_settings(qtbot, window, SettingsPage.APPEARANCE).appearance_page
    assert page.theme.currentData() is Theme.SYSTEM
    view = window.message_view
    page.theme.setCurrentIndex(page.theme.findData(Theme.DARK))
    assert is_dark(app.palette())
    # Widgets hear of it through posted events, as they would from the system.
    qtbot.waitUntil(lambda: is_dark(window.palette()) and is_dark(view.palette()))
    assert view._documents.renderer.style.dark  # the chat's Markdown and code colours follow
    assert Preferences(window.store).theme() is Theme.DARK
    page.theme.setCurrentIndex(page.theme.findData(Theme.LIGHT))
    assert not is_dark(app.palette())
    qtbot.waitUntil(lambda: not view._documents.renderer.style.dark)
    page.theme.setCurrentIndex(page.theme.findData(Theme.DARK))

    # Saved: the next start opens dark.
    window = reopen(qtbot, window, app_paths, hardware)
    try:
        assert is_dark(app.palette())
        qtbot.waitUntil(lambda: window.message_view._documents.renderer.style.dark)
        page = open_settings(qtbot, window, SettingsPage.APPEARANCE).appearance_page
        assert page.theme.currentData() is Theme.DARK
        page.theme.setCurrentIndex(page.theme.findData(Theme.SYSTEM))
        assert app.palette().color(QPalette.ColorRole.Base) == system_base
    finally:
        window.close()


def test_font_size_applies_live(
    qtbot, window: MainWindow, app_paths: AppPaths, hardware: HardwareSnapshot
) -> None:
    app = QApplication.instance()
    system = QFontDatabase.systemFont(QFontDatabase.SystemFont.GeneralFont).pointSize()
    page = open_settings(qtbot, window, SettingsPage.APPEARANCE).appearance_page
    assert page.font_size.text() == f"the system's ({system} pt)"
    size = system + 5
    page.font_size.setValue(size)
    assert app.font().pointSize() == size
    qtbot.waitUntil(lambda: window.composer.input.font().pointSize() == size)
    qtbot.waitUntil(lambda: window.message_view._layout.body_font.pointSize() == size)  # the chat's too
    assert Preferences(window.store).font_size() == size
    window = reopen(qtbot, window, app_paths, hardware)
    try:
        assert app.font().pointSize() == size
        page = open_settings(qtbot, window, SettingsPage.APPEARANCE).appearance_page
        assert page.font_size.value() == size
        page.font_size.setValue(page.font_size.minimum())  # the system's again
        assert app.font().pointSize() == system and Preferences(window.store).font_size() == 0
    finally:
        window.close()


# -- the models folder --------------------------------------------------------------------


def test_a_new_models_folder_is_scanned_and_used_from_now_on(
    qtbot, window: MainWindow, app_paths: AppPaths, tmp_path: Path, tiny_model: Path
) -> None:
    folder = tmp_path / "elsewhere" / "models"  # made when chosen
    (tmp_path / "elsewhere").mkdir()
    page = open_settings(qtbot, window).general_page
    assert page.set_models_folder(folder)
    assert page.models_folder.text() == str(folder) and page.folder_error.text() == ""
    assert window.paths.models_dir == folder
    assert window.discover.manager.downloader.models_dir == folder
    assert window.recent_folder.get() == folder
    # What the library scans: a model put there appears.
    qtbot.waitUntil(lambda: not window.library.busy, timeout=WAIT)
    assert folder in window.library.library.folders
    (folder / tiny_model.name).write_bytes(tiny_model.read_bytes())
    window.library.rescan()
    qtbot.waitUntil(lambda: any(e.path.parent == folder for e in window.library.entries()), timeout=WAIT)
    # Remembered for the next start and the CLI (no --models-dir).
    assert json.loads(app_paths.settings_file.read_text())["models_dir"] == str(folder)
    assert resolve_paths(app_paths.data_dir).models_dir == folder
    assert resolve_paths(app_paths.data_dir, tmp_path / "flag").models_dir == tmp_path / "flag"


def test_a_saved_models_folder_that_is_gone_falls_back_to_the_default(
    app_paths: AppPaths, tmp_path: Path
) -> None:
    app_paths.settings_file.write_text(json.dumps({"models_dir": str(tmp_path / "unplugged")}))
    assert resolve_paths(app_paths.data_dir).models_dir == app_paths.data_dir / "models"


def unwritable_folder(tmp_path: Path) -> Path:
    """A folder this process cannot write to: permission bits, or for root a read-only /sys."""
    if os.geteuid() == 0:
        return Path("/sys")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    return locked


def test_an_unusable_models_folder_is_refused_in_one_line(qtbot, window: MainWindow, tmp_path: Path) -> None:
    page = open_settings(qtbot, window).general_page
    before = window.paths.models_dir
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a folder")
    for folder, reason in (
        ("models", "is not a full path"),
        (a_file / "models", "is a file, not a folder"),
        (unwritable_folder(tmp_path), "Cannot write to"),
    ):
        assert not page.set_models_folder(folder)
        assert reason in page.folder_error.text() and "\n" not in page.folder_error.text()
        assert window.paths.models_dir == before and page.models_folder.text() == str(before)
    assert window.discover.manager.downloader.models_dir == before


@pytest.fixture()
def hub_window(qtbot, app_paths: AppPaths, hardware: HardwareSnapshot, fake_hub: FakeHub, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", fake_hub.url)
    win = open_window(qtbot, app_paths, hardware)
    yield win
    win.close()


def start_download(qtbot, window: MainWindow, quant: str = "Q8_0") -> None:
    """Discover: search "tiny", open the tiny repository, press Download on ``quant``."""
    window.show_page(Page.DISCOVER)
    page = window.discover_page
    page.search_field.setText("tiny")
    qtbot.mouseClick(page.search_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: page.results_model.rowCount() > 0, timeout=WAIT)
    row = next(
        i for i in range(page.results_model.rowCount()) if page.results_model.row(i).repo_id == TINY_REPO
    )
    page.results.setCurrentIndex(page.results_model.index(row))
    qtbot.waitUntil(lambda: page.quants.rowCount() > 0, timeout=WAIT)
    index = next(i for i in range(page.quants.rowCount()) if page.quants.item(i, 0).text() == quant)
    button = page.quants.cellWidget(index, 4)
    assert isinstance(button, QPushButton)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def test_downloads_land_in_the_models_folder_chosen(
    qtbot, hub_window: MainWindow, tmp_path: Path, fake_hub: FakeHub
) -> None:
    window = hub_window
    folder = tmp_path / "big-disk"
    page = open_settings(qtbot, window).general_page
    assert page.set_models_folder(folder)
    window.settings_dialog.close()
    start_download(qtbot, window)
    rows = window.discover_page.download_rows()
    qtbot.waitUntil(lambda: rows and all(r.state is DownloadState.DONE for r in rows.values()), timeout=WAIT)
    (target,) = [r.target for r in rows.values()]
    assert target.is_relative_to(folder) and target.is_file()
    qtbot.waitUntil(lambda: any(e.path == target for e in window.library.entries()), timeout=WAIT)


def test_the_models_folder_stays_while_a_download_is_unfinished(
    qtbot, hub_window: MainWindow, tmp_path: Path, fake_hub: FakeHub
) -> None:
    window = hub_window
    fake_hub.faults.trickle_bytes_per_s = 20_000
    start_download(qtbot, window)
    page = open_settings(qtbot, window).general_page
    before = window.paths.models_dir
    assert not page.set_models_folder(tmp_path / "other")
    assert "1 download not finished" in page.folder_error.text() and "\n" not in page.folder_error.text()
    assert window.paths.models_dir == before
    for key in list(window.discover_page.download_rows()):
        window.discover.manager.cancel(key)


# -- Hub -------------------------------------------------------------------------------------


def test_hub_settings_are_a_page_of_settings(qtbot, hub_window: MainWindow, memory_keyring) -> None:
    window = hub_window
    dialog = open_settings(qtbot, window, SettingsPage.HUB)
    page = dialog.hub_page
    assert page.parallel.value() == window.discover.manager.max_parallel == 2
    page.parallel.setValue(4)
    page.endpoint.setText("not a url")
    qtbot.mouseClick(dialog.hub_save, Qt.MouseButton.LeftButton)
    assert "not an http(s) URL" in page.error.text()
    assert window.discover.manager.max_parallel == 2  # nothing saved
    page.endpoint.setText("http://mirror.example:9000")
    page.token.setText("hf_from_settings")
    qtbot.mouseClick(dialog.hub_save, Qt.MouseButton.LeftButton)
    assert page.error.text() == ""
    assert window.discover.manager.max_parallel == 4
    assert window.discover.access.endpoint == "http://mirror.example:9000"
    assert window.discover.access.token == "hf_from_settings"
    assert window.discover_page.downloads_title.text() == "Downloads (at most 4 at once)"
    assert page.forget.isEnabled()
