"""The whole app, driven through its real widgets with tiny models (offscreen)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image
from PySide6.QtCore import Qt

from app.chat import MessageAction, MessageState
from app.chat.viewport_layout import STREAM_TEXT_INTERVAL_S
from app.platform.paths import AppPaths
from app.state.session import SessionState
from app.store.history import MessageState as Stored
from app.widgets.nav_rail import Page
from app.window.main_window import MainWindow
from engine.chat import Role
from engine.machine.hardware import HardwareSnapshot
from tests.conftest import SCRIPT_TEXT
from tests.helpers import WAIT, add_and_select, last, load, open_window, send, set_max_tokens


def png(color: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), color).save(buffer, format="PNG")
    return buffer.getvalue()


def test_load_shows_each_phase_with_its_duration(qtbot, window: MainWindow, tiny_model: Path) -> None:
    load(qtbot, window, tiny_model)
    plan = window.session.plan
    progress = window.model_panel.load_progress
    qtbot.waitUntil(lambda: progress.finished_phases() == list(plan.phases), timeout=WAIT)
    assert "Tiny Llama" in window.badge.label.text()
    assert window.badge.unload_button.isVisible()
    assert window.current_page() is Page.CHATS


def test_a_failed_load_shows_why_and_the_app_stays_usable(
    qtbot, window: MainWindow, tmp_path: Path, tiny_model: Path
) -> None:
    broken = tmp_path / "soon-broken.gguf"
    broken.write_bytes(tiny_model.read_bytes())
    add_and_select(qtbot, window, broken)
    broken.write_bytes(b"GGUF but not really")
    qtbot.mouseClick(window.model_panel.load_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.session.state is SessionState.FAILED, timeout=WAIT)
    assert window.model_panel.load_status.text()
    assert window.model_panel.load_button.isEnabled() or window.model_panel.plan() is None
    load(qtbot, window, tiny_model)  # and another load works


def test_message_streams_and_persists(
    qtbot, monkeypatch: pytest.MonkeyPatch, window: MainWindow, scripted_model: Path
) -> None:
    load(qtbot, window, scripted_model)
    model = window.session.ready_model
    submitted = []
    submit = model.submit
    monkeypatch.setattr(
        model, "submit", lambda request, *a, **k: (submitted.append(request), submit(request, *a, **k))[1]
    )
    send(qtbot, window, "hello")
    # Text comes ten times a second: the view shows it no more often on two cores.
    assert [r.text_interval_s for r in submitted] == [STREAM_TEXT_INTERVAL_S] == [0.1]
    reply = last(window, Role.ASSISTANT)
    assert reply.text == SCRIPT_TEXT
    assert reply.state is MessageState.DONE
    assert "tok/s" in window.message_view.stats_text(reply.id)
    stored = window.store.messages(window.chat.current_id)
    assert [(m.role, m.state) for m in stored] == [
        (Role.USER, Stored.COMPLETE),
        (Role.ASSISTANT, Stored.COMPLETE),
    ]
    assert stored[1].text == SCRIPT_TEXT
    assert stored[1].tokens  # kept for the next turn's cache reuse
    title = window.store.get_conversation(window.chat.current_id).title
    assert title == "hello"


def test_escape_stops_the_reply(qtbot, window: MainWindow, looping_model: Path) -> None:
    load(qtbot, window, looping_model)
    set_max_tokens(window, 100_000)
    send(qtbot, window, "go on forever", wait=False)
    qtbot.waitUntil(lambda: len(last(window, Role.ASSISTANT).text) > 10, timeout=WAIT)
    qtbot.keyClick(window.composer.input, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: window.chat.streaming == 0, timeout=WAIT)
    reply = last(window, Role.ASSISTANT)
    assert reply.state is MessageState.CANCELLED
    stored = window.store.messages(window.chat.current_id)[-1]
    assert stored.state is Stored.CANCELLED and stored.text == reply.text


def test_regenerate_shows_a_new_version_of_the_last_reply(
    qtbot, window: MainWindow, scripted_model: Path
) -> None:
    load(qtbot, window, scripted_model)
    send(qtbot, window, "hello")
    first = last(window, Role.ASSISTANT)
    window.message_view.trigger_action(first.id, MessageAction.REGENERATE)
    qtbot.waitUntil(
        lambda: window.chat.streaming == 0 and last(window, Role.ASSISTANT).id != first.id, timeout=WAIT
    )
    stored = window.store.messages(window.chat.current_id)
    assert len(stored) == 2 and stored[1].text == SCRIPT_TEXT
    assert window.store.versions(stored[1].id).ids == (first.id, stored[1].id)  # the first is kept


def test_edit_a_message_and_resend_from_there(qtbot, window: MainWindow, scripted_model: Path) -> None:
    load(qtbot, window, scripted_model)
    send(qtbot, window, "first question")
    send(qtbot, window, "second question")
    first_user = next(m for m in window.message_view.messages() if m.role is Role.USER)
    window.message_view.trigger_action(first_user.id, MessageAction.EDIT)
    assert window.composer.is_editing()
    window.composer.set_text("a better first question")
    qtbot.keyClick(window.composer.input, Qt.Key.Key_Return)
    qtbot.waitUntil(
        lambda: window.chat.streaming == 0 and len(window.message_view.messages()) == 2, timeout=WAIT
    )
    stored = window.store.messages(window.chat.current_id)
    assert [m.text for m in stored] == ["a better first question", SCRIPT_TEXT]


def test_attach_an_image_when_the_model_has_a_projector(
    qtbot, window: MainWindow, tiny_model: Path, tiny_projector: Path
) -> None:
    load(qtbot, window, tiny_model, tiny_projector)
    assert window.session.ready_model.has_vision
    assert window.composer.attachments_enabled()
    window.composer.attach_images([("red.png", png((200, 20, 20)))])
    send(qtbot, window, "what is this?")
    user = last(window, Role.USER)
    assert len(user.images) == 1
    reply = window.store.messages(window.chat.current_id)[-1]
    assert reply.state is Stored.COMPLETE and reply.stats["completion_tokens"] > 0
    assert len(window.store.messages(window.chat.current_id)[0].images) == 1


def test_attach_is_disabled_with_a_reason_without_projector(
    qtbot, window: MainWindow, tiny_model: Path
) -> None:
    load(qtbot, window, tiny_model)
    assert not window.composer.attachments_enabled()
    assert "reads text only" in window.composer.attach_button.toolTip()
    assert "vision file (mmproj)" in window.composer.attach_button.toolTip()


def test_two_conversations_generate_at_once(qtbot, window: MainWindow, looping_model: Path) -> None:
    load(qtbot, window, looping_model)
    set_max_tokens(window, 300)
    send(qtbot, window, "first chat", wait=False)
    first = window.chat.current_id
    window.new_chat_action.trigger()
    assert window.chat.current_id != first
    send(qtbot, window, "second chat", wait=False)
    qtbot.waitUntil(lambda: window.chat.streaming == 2 or window.chat.streaming == 0, timeout=WAIT)
    assert window.chat.streaming == 2, "both conversations generate together"
    qtbot.waitUntil(lambda: window.chat.streaming == 0, timeout=WAIT)
    for conversation in (first, window.chat.current_id):
        replies = [m for m in window.store.messages(conversation) if m.role is Role.ASSISTANT]
        assert replies[-1].state is Stored.COMPLETE and replies[-1].text


def test_restart_finds_everything_again(
    qtbot, app_paths: AppPaths, hardware: HardwareSnapshot, scripted_model: Path
) -> None:
    first = open_window(qtbot, app_paths, hardware)
    load(qtbot, first, scripted_model)
    send(qtbot, first, "remember me")
    conversation = first.chat.current_id
    first.close()
    second = open_window(qtbot, app_paths, hardware)
    try:
        assert second.chat.current_id == conversation
        texts = [m.text for m in second.message_view.messages()]
        assert texts == ["remember me", SCRIPT_TEXT]
        assert second.library.counts().models == 1
        # The load settings are remembered per model.
        second.library_panel.select_path(scripted_model)
        assert second.model_panel.ctx_spin.value() == 1024
        assert second.model_panel.parallel_spin.value() == 4
    finally:
        second.close()


def test_delete_with_undo_and_search(qtbot, window: MainWindow, scripted_model: Path) -> None:
    load(qtbot, window, scripted_model)
    send(qtbot, window, "about lighthouses")
    keep = window.chat.current_id
    window.new_chat_action.trigger()
    send(qtbot, window, "about bread")
    gone = window.chat.current_id
    window.conversation_list.request_delete(gone)
    assert gone not in [c.id for c in window.store.list_conversations()]
    window.conversation_list.undo_delete()
    assert gone in [c.id for c in window.store.list_conversations()]
    window.chat.search("lighthouse")
    assert window.conversation_list.visible_ids() == [keep]


def test_keyboard_shortcuts(qtbot, window: MainWindow) -> None:
    before = len(window.store.list_conversations())
    qtbot.keyClick(window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert len(window.store.list_conversations()) == before + 1
    qtbot.keyClick(window, Qt.Key.Key_K, Qt.KeyboardModifier.ControlModifier)
    assert window.current_page() is Page.CHATS
    assert window.conversation_list.search.hasFocus()


def test_sending_without_a_model_gives_the_text_back(qtbot, window: MainWindow) -> None:
    window.new_chat_action.trigger()
    window.composer.set_text("is anyone there?")
    qtbot.keyClick(window.composer.input, Qt.Key.Key_Return)
    assert window.composer.text() == "is anyone there?"
    assert "Load a model" in window.status_label.text()


def test_dashboard_dock_follows_the_loaded_model(qtbot, window: MainWindow, looping_model: Path) -> None:
    window.dashboard_action.trigger()
    assert window.dashboard_dock.isVisible() and window.dashboard is not None
    assert window.dashboard.model is None
    load(qtbot, window, looping_model)
    assert window.dashboard.model is window.session.ready_model
    window.dashboard.set_interval(50)
    set_max_tokens(window, 200)  # long enough to sample while it decodes, short on a busy machine
    send(qtbot, window, "keep the dashboard busy", wait=False)
    qtbot.waitUntil(lambda: window.chat.streaming == 0, timeout=WAIT)
    qtbot.waitUntil(lambda: window.dashboard.history.totals.completed_requests >= 1, timeout=WAIT)
    window.dashboard_action.trigger()
    assert not window.dashboard_dock.isVisible()
