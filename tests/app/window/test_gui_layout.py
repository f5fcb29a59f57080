"""The window's navigation and layout: one rail of pages, columns that fold instead of being
crushed, a chat header that names who answers, Esc that stops from anywhere."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QPoint, Qt

from app.platform.paths import AppPaths
from app.widgets.nav_rail import Page
from app.window.chats_page import CHAT_MIN_WIDTH, LIST_MIN_WIDTH
from app.window.main_window import MainWindow
from engine.devtools.tiny_models import TinyTextSpec, write_tiny_text_model
from engine.machine.hardware import HardwareSnapshot
from tests.helpers import WAIT, load, open_window, send, set_max_tokens


def inside_window(window: MainWindow, widget) -> bool:
    """Whether all of ``widget`` lies inside the window (nothing cut off at an edge)."""
    top_left = widget.mapTo(window, QPoint(0, 0))
    return top_left.x() >= 0 and top_left.x() + widget.width() <= window.width()


def test_one_navigation_with_a_page_per_button(qtbot, window: MainWindow) -> None:
    assert [b.text() for b in window.nav.buttons.values()] == ["Chats", "Models", "Discover", "Documents"]
    qtbot.mouseClick(window.nav.buttons[Page.CHATS], Qt.MouseButton.LeftButton)
    assert window.current_page() is Page.CHATS
    assert window.conversation_list.isVisible() and window.message_view.isVisible()
    qtbot.mouseClick(window.nav.buttons[Page.MODELS], Qt.MouseButton.LeftButton)
    assert window.current_page() is Page.MODELS
    assert window.library_panel.isVisible() and window.model_panel.isVisible()
    assert window.nav.buttons[Page.MODELS].isChecked() and not window.nav.buttons[Page.CHATS].isChecked()
    qtbot.keyClick(window, Qt.Key.Key_3, Qt.KeyboardModifier.ControlModifier)
    assert window.current_page() is Page.DISCOVER and window.discover_page.search_field.isVisible()
    qtbot.keyClick(window, Qt.Key.Key_4, Qt.KeyboardModifier.ControlModifier)
    assert window.current_page() is Page.DOCUMENTS and window.documents_page.panel.isVisible()
    qtbot.keyClick(window, Qt.Key.Key_1, Qt.KeyboardModifier.ControlModifier)
    assert window.current_page() is Page.CHATS
    # "New chat" is offered once: in the conversation list (and Ctrl+N), not the toolbar too.
    toolbar = window.findChild(type(window.addToolBar("probe")), "mainToolbar")
    assert window.new_chat_action not in toolbar.actions()


def test_settings_fit_beside_the_chat_at_the_default_size(qtbot, window: MainWindow) -> None:
    window.resize(1280, 800)
    window.show_page(Page.CHATS)
    qtbot.waitUntil(lambda: window.chats_page.width() > 1000)
    page = window.chats_page
    assert page.settings_shown() and page.list_shown()
    assert inside_window(window, window.sampling_panel)
    assert window.conversation_list.width() >= LIST_MIN_WIDTH
    assert page.column.width() >= CHAT_MIN_WIDTH


def test_the_dashboard_folds_the_settings_instead_of_crushing_the_chat(qtbot, window: MainWindow) -> None:
    window.resize(1280, 800)
    window.show_page(Page.CHATS)
    window.dashboard_action.trigger()
    qtbot.waitUntil(lambda: window.dashboard is not None and window.dashboard.isVisible())
    page = window.chats_page
    qtbot.waitUntil(lambda: not page.settings_shown(), timeout=WAIT)
    assert window.conversation_list.width() >= LIST_MIN_WIDTH
    assert page.column.width() >= CHAT_MIN_WIDTH
    assert not window.conversation_list.list.horizontalScrollBar().isVisible()
    assert not page.header.settings_button.isChecked()
    # Asked for without room, the settings take the list's place; folded, the list returns.
    page.header.settings_button.click()
    assert page.settings_shown() and not page.list_shown()
    assert inside_window(window, window.sampling_panel)
    page.header.settings_button.click()
    assert page.list_shown() and not page.settings_shown()
    # Closing the dashboard gives the room back, and the settings come back as wanted.
    page.header.settings_button.click()
    window.dashboard_action.trigger()
    qtbot.waitUntil(lambda: page.settings_shown() and page.list_shown(), timeout=WAIT)


def test_folded_settings_are_remembered(qtbot, app_paths: AppPaths, hardware: HardwareSnapshot) -> None:
    first = open_window(qtbot, app_paths, hardware)
    first.chats_page.header.settings_button.click()
    assert not first.chats_page.settings_shown()
    first.close()
    second = open_window(qtbot, app_paths, hardware)
    assert not second.chats_page.settings_wanted()
    second.close()


def test_the_header_names_the_conversation_and_the_model_that_answers(
    qtbot, window: MainWindow, scripted_model: Path
) -> None:
    header = window.chats_page.header
    assert "No model loaded" in header.model.full_text()
    load(qtbot, window, scripted_model)
    assert header.model.full_text() == f"{window.session.plan.model.display_name} answers"
    send(qtbot, window, "a question about lighthouses")
    assert header.title.text() == "a question about lighthouses"
    assert not window.chats_page.notice.isVisible()  # it has a chat template


def test_a_base_model_is_named_in_the_chat(qtbot, window: MainWindow, tmp_path: Path) -> None:
    base = write_tiny_text_model(
        tmp_path / "tiny-base.gguf", TinyTextSpec(chat_template=None, name="Tiny Base")
    )
    load(qtbot, window, base)
    notice = window.chats_page.notice
    assert notice.isVisible()
    assert "base model" in notice.text() and "ramble" in notice.text()
    window.unload_model()
    qtbot.waitUntil(lambda: not notice.isVisible(), timeout=WAIT)


def test_esc_stops_the_reply_wherever_the_focus_is(qtbot, window: MainWindow, looping_model: Path) -> None:
    load(qtbot, window, looping_model)
    set_max_tokens(window, 4000)
    send(qtbot, window, "go on forever", wait=False)
    qtbot.waitUntil(lambda: window.stop_action.isEnabled(), timeout=WAIT)
    window.conversation_list.search.setFocus()
    qtbot.keyClick(window.conversation_list.search, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: window.chat.streaming == 0, timeout=WAIT)
    assert not window.stop_action.isEnabled()


def test_details_shows_the_loaded_model(qtbot, window: MainWindow, scripted_model: Path, tiny_model) -> None:
    load(qtbot, window, scripted_model)
    window.library.add_paths([tiny_model])
    qtbot.waitUntil(lambda: not window.library.busy, timeout=WAIT)
    window.library_panel.select_path(tiny_model)
    window.show_page(Page.CHATS)
    window.badge.details_button.click()
    assert window.current_page() is Page.MODELS
    assert window.library_panel.selected_path() == scripted_model


def test_a_restart_reopens_the_chats(
    qtbot, app_paths: AppPaths, hardware: HardwareSnapshot, scripted_model: Path
) -> None:
    first = open_window(qtbot, app_paths, hardware)
    load(qtbot, first, scripted_model)
    send(qtbot, first, "hello")
    first.close()
    second = open_window(qtbot, app_paths, hardware)
    try:
        assert second.current_page() is Page.CHATS
        assert second.chat.current_id is not None
    finally:
        second.close()


def test_the_list_keeps_its_width_when_a_long_title_is_deleted(
    qtbot, window: MainWindow, scripted_model: Path
) -> None:
    window.resize(1280, 800)
    load(qtbot, window, scripted_model)
    send(qtbot, window, "a conversation with a very long title that goes on and on about many things")
    width = window.conversation_list.width()
    window.conversation_list.request_delete(window.chat.current_id)
    assert window.conversation_list.undo_bar.isVisible()
    qtbot.wait(50)
    assert window.conversation_list.width() == width
