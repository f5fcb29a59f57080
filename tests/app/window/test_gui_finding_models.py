"""Finding models, as a new user does: the empty states point to Discover and Add models;
Discover suggests where to start and, offline, says what still works; a broken file says
in plain words what is wrong and can be removed with a button; the library's columns say
what they hold and mark the loaded model; the Models page stays usable at 1280×800 with
the Local server panel docked beside it."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QScrollArea

from app.platform.paths import AppPaths
from app.state.session import SessionState
from app.widgets.badge_delegate import BADGE_ROLE
from app.widgets.library_panel import COLUMNS, PARAMETERS_COLUMN, SIZE_COLUMN, LibraryPanel
from app.widgets.nav_rail import Page
from app.window.main_window import MainWindow
from app.wording.presenters import sentence
from engine import format_bytes, inspect_model
from engine.machine.hardware import HardwareSnapshot
from tests.helpers import WAIT, add_and_select, drop, load, open_window


def refused_endpoint() -> str:
    """A Hub address where nothing listens: connections are refused (offline)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def name_item(window: MainWindow, row: int = 0):
    return window.library_panel.model.item(row, 0)


# -- empty states -------------------------------------------------------------------------


def test_the_empty_library_points_to_discover_and_add_models(qtbot, window: MainWindow) -> None:
    label = window.library_panel.empty_label
    assert label.isVisible()
    assert "Discover" in label.text() and "Add models…" in label.text()
    assert "search for “GGUF”" not in label.text()
    assert "Discover" in window.model_panel.subtitle.text()
    label.linkActivated.emit("discover")  # what a click on the link does
    assert window.current_page() is Page.DISCOVER


def test_the_empty_librarys_add_link_asks_for_files(qtbot, window: MainWindow, monkeypatch) -> None:
    asked: list[str] = []
    # The system's file dialog is modal; what it would return is not under test.
    monkeypatch.setattr(
        "app.window.models_mediator.QFileDialog.getOpenFileNames",
        lambda _parent, title, *_args: (asked.append(title), ([], ""))[1],
    )
    window.library_panel.empty_label.linkActivated.emit("add")
    assert asked == ["Add models"]


# -- Discover -----------------------------------------------------------------------------


@pytest.fixture()
def offline(qtbot, app_paths: AppPaths, hardware: HardwareSnapshot, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HF_ENDPOINT", refused_endpoint())
    win = open_window(qtbot, app_paths, hardware)
    win.show_page(Page.DISCOVER)
    yield win
    win.close()


def test_discover_suggests_where_to_start_before_any_search(
    qtbot, window: MainWindow, fake_hub, monkeypatch
) -> None:
    window.show_page(Page.DISCOVER)
    page = window.discover_page
    assert page.results_stack.currentWidget() is page.start_panel
    assert page.start_panel.isVisible()
    labels = [b.text() for b in page.start_panel.buttons]
    assert "Gemma 3 270M" in labels and len(labels) >= 4
    assert "fits this computer" in page.start_panel.intro.text()


def test_a_suggested_search_searches(qtbot, app_paths, hardware, fake_hub, monkeypatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", fake_hub.url)
    window = open_window(qtbot, app_paths, hardware)
    window.show_page(Page.DISCOVER)
    page = window.discover_page
    qtbot.mouseClick(page.start_panel.buttons[0], Qt.MouseButton.LeftButton)
    assert page.search_field.text() == "gemma-3-270m"
    assert page.results_stack.currentWidget() is page.results
    status = page.search_status
    qtbot.waitUntil(lambda: "repositories" in status.text() or "match" in status.text(), timeout=WAIT)
    window.close()


def test_offline_discover_says_what_still_works(
    qtbot, offline: MainWindow, tiny_model: Path, monkeypatch
) -> None:
    add_and_select(qtbot, offline, tiny_model)
    offline.show_page(Page.DISCOVER)
    page = offline.discover_page
    page.search_field.setText("qwen")
    qtbot.mouseClick(page.search_button, Qt.MouseButton.LeftButton)
    panel = page.offline_panel
    qtbot.waitUntil(lambda: page.results_stack.currentWidget() is panel, timeout=WAIT)
    assert panel.isVisible()
    assert "Cannot reach the Hub" in panel.message.text()
    assert "1 model already on this computer" in panel.works.text()
    assert (
        panel.library_button.isVisible()
        and panel.library_button.text() == "Open the library (1 model on disk)"
    )
    assert panel.add_button.isVisible() and panel.retry_button.isVisible()
    qtbot.mouseClick(panel.library_button, Qt.MouseButton.LeftButton)
    assert offline.current_page() is Page.MODELS
    offline.show_page(Page.DISCOVER)
    asked: list[str] = []
    monkeypatch.setattr(
        "app.window.models_mediator.QFileDialog.getOpenFileNames",
        lambda _parent, title, *_args: (asked.append(title), ([], ""))[1],
    )
    qtbot.mouseClick(panel.add_button, Qt.MouseButton.LeftButton)
    assert asked == ["Add models"]
    # Try again searches again (still offline: the same panel, no crash, no stale results).
    with qtbot.waitSignal(offline.discover.search_offline, timeout=WAIT):
        qtbot.mouseClick(panel.retry_button, Qt.MouseButton.LeftButton)
    assert page.results_stack.currentWidget() is panel and page.results_model.rowCount() == 0


def test_offline_with_an_empty_library_offers_add_models(qtbot, offline: MainWindow) -> None:
    page = offline.discover_page
    page.search_field.setText("qwen")
    qtbot.mouseClick(page.search_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: page.results_stack.currentWidget() is page.offline_panel, timeout=WAIT)
    assert not page.offline_panel.library_button.isVisible()
    assert "add .gguf files you already have" in page.offline_panel.works.text()


# -- a broken file ------------------------------------------------------------------------


def test_a_broken_file_says_what_is_wrong_whole_and_has_a_remove_button(
    qtbot, window: MainWindow, tiny_model: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(tiny_model.read_bytes()[:2500])
    drop(window, broken)
    qtbot.waitUntil(lambda: window.library.counts().invalid == 1, timeout=WAIT)
    item = name_item(window)
    assert item.text() == "broken.gguf — incomplete file"  # short enough not to be cut
    reason = window.library.library.get(broken).error
    assert reason.startswith("incomplete file: only its first 2.4 KiB are here")
    assert reason.endswith("Download it again.")
    assert sentence(reason) in item.toolTip()  # whole
    window.library_panel.select_path(broken)
    subtitle = window.model_panel.subtitle
    said = f"Hearth cannot use this file. {sentence(reason)}"
    qtbot.waitUntil(lambda: subtitle.text() == said, timeout=WAIT)
    assert subtitle.wordWrap()
    remove = window.library_panel.remove_button
    assert remove.isVisible() and remove.isEnabled() and remove.text() == "Remove from library"
    qtbot.mouseClick(remove, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.library.library.get(broken) is None, timeout=WAIT)
    assert broken.exists()  # forgotten, not deleted


def test_the_remove_button_needs_a_selection(qtbot, window: MainWindow, tiny_model: Path) -> None:
    drop(window, tiny_model)
    qtbot.waitUntil(lambda: window.library.counts().models == 1, timeout=WAIT)
    panel = window.library_panel
    panel.tree.setCurrentIndex(panel.proxy.index(-1, -1))
    assert not panel.remove_button.isEnabled()
    panel.select_first()
    assert panel.remove_button.isEnabled()


# -- columns and the loaded model ---------------------------------------------------------


def test_size_is_the_file_size_and_parameters_have_their_own_column(
    qtbot, window: MainWindow, tiny_model: Path
) -> None:
    window.resize(1600, 900)
    add_and_select(qtbot, window, tiny_model)
    model = window.library_panel.model
    headers = [model.horizontalHeaderItem(c).text() for c in range(model.columnCount())]
    assert headers == list(COLUMNS) == ["Model", "Parameters", "Quant", "Size"]
    info = inspect_model(tiny_model)
    assert model.item(0, SIZE_COLUMN).text() == format_bytes(tiny_model.stat().st_size)
    assert model.item(0, PARAMETERS_COLUMN).text() == (info.size_label or "133.1K")
    assert "parameters" in model.horizontalHeaderItem(PARAMETERS_COLUMN).toolTip().lower()
    assert "on disk" in model.horizontalHeaderItem(SIZE_COLUMN).toolTip()


def test_the_loaded_model_is_marked_in_the_library(
    qtbot, window: MainWindow, tiny_model: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other.gguf"
    other.write_bytes(tiny_model.read_bytes())
    drop(window, other)
    load(qtbot, window, tiny_model)
    panel = window.library_panel
    assert panel.loaded_path() == tiny_model
    rows = {
        Path(name_item(window, r).data(Qt.ItemDataRole.UserRole + 2)): name_item(window, r) for r in range(2)
    }
    loaded, unloaded = rows[tiny_model], rows[other]
    assert loaded.data(BADGE_ROLE) == "loaded" and loaded.font().bold()
    assert loaded.toolTip().startswith("Loaded now")
    assert unloaded.data(BADGE_ROLE) is None and not unloaded.font().bold()
    # The mark survives the list being rebuilt (a rescan), and goes with the model.
    window.library.rescan()
    qtbot.waitUntil(lambda: not window.library.busy, timeout=WAIT)
    rows = {
        Path(name_item(window, r).data(Qt.ItemDataRole.UserRole + 2)): name_item(window, r) for r in range(2)
    }
    assert rows[tiny_model].data(BADGE_ROLE) == "loaded"
    window.unload_model()
    qtbot.waitUntil(lambda: window.session.state is SessionState.EMPTY, timeout=WAIT)
    rows = {
        Path(name_item(window, r).data(Qt.ItemDataRole.UserRole + 2)): name_item(window, r) for r in range(2)
    }
    assert rows[tiny_model].data(BADGE_ROLE) is None and not rows[tiny_model].font().bold()


def test_the_library_panel_lists_the_models_that_can_see(
    qtbot, window: MainWindow, tiny_model: Path, tiny_projector: Path, tmp_path: Path
) -> None:
    other = tmp_path / "blind.gguf"
    other.write_bytes(tiny_model.read_bytes())
    drop(window, tiny_model, tiny_projector)
    qtbot.waitUntil(lambda: window.library.library.get(tiny_projector) is not None, timeout=WAIT)
    qtbot.waitUntil(lambda: not window.library.busy, timeout=WAIT)
    panel: LibraryPanel = window.library_panel
    name = window.library.library.get(tiny_model).display_name
    assert panel.vision_models() == ((name, tiny_model),)
    # A second file of the same model, with the projector beside it too: told apart.
    twin = tmp_path / "twin" / "tiny-llama-copy.gguf"
    twin.parent.mkdir()
    twin.write_bytes(tiny_model.read_bytes())
    (twin.parent / tiny_projector.name).write_bytes(tiny_projector.read_bytes())
    drop(window, twin.parent)
    qtbot.waitUntil(lambda: len(panel.vision_models()) == 2, timeout=WAIT)
    assert sorted(panel.vision_models()) == sorted(
        ((f"{name} ({tiny_model.name})", tiny_model), (f"{name} ({twin.name})", twin))
    )


# -- the Models page at 1280×800 with the server panel docked -----------------------------


@pytest.mark.parametrize("size", [(1280, 800), (1366, 768)])
def test_the_models_page_fits_beside_the_docked_server_panel(
    qtbot, window: MainWindow, tiny_model: Path, size: tuple[int, int]
) -> None:
    window.resize(*size)
    add_and_select(qtbot, window, tiny_model)
    window.show_page(Page.MODELS)
    window.show_server_panel()
    qtbot.wait(50)  # laid out
    assert window.server_dock.isVisible()
    page = window.models_page
    assert page.geometry().right() <= window.width()
    (area,) = [a for a in window.model_panel.findChildren(QScrollArea) if a.widgetResizable()]
    assert not area.horizontalScrollBar().isVisible(), "no sideways scrolling"
    assert area.viewport().width() >= area.widget().minimumSizeHint().width()
    bar = window.model_panel.memory_bar
    assert bar.visibleRegion().boundingRect().width() == bar.width(), "the memory bar is drawn whole"
    assert bar.width() >= bar.minimumSizeHint().width()
    assert page.side.width() >= 240  # the library still there
