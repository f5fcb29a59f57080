"""The model picker atop the chat, and the chat that loads its own model: the picker lists
the library's models with the verdict of their remembered settings and the remote
servers' models; choosing one loads it with those settings, its phases shown under the
picker; a chat whose model is not loaded offers Load in one click; Send and Continue load
it and go on when it is ready; the last model loads at start when the preference is on."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.chat import MessageAction, MessageState
from app.chat.model_picker import CHOICE_ROLE, PICKER_SHORTCUT
from app.conversation.refusals import NO_MODEL
from app.platform.paths import AppPaths
from app.settings.key_vault import KeyVault
from app.settings.load_settings import request_from_dict, settings_key
from app.settings.preferences import Preferences
from app.state.remote import ListingState
from app.state.session import SessionState
from app.store.history import MessageState as Stored
from app.widgets.nav_rail import Page
from app.window.main_window import MainWindow
from app.wording.presenters import fit_summary
from engine import LoadRequest, format_bytes, inspect_model, plan_load
from engine.chat import Role
from engine.devtools.tiny_models import TinyTextSpec, write_tiny_text_model
from engine.machine.hardware import HardwareSnapshot
from tests.conftest import SCRIPT_TEXT
from tests.helpers import WAIT, MemoryKeyring, add_and_select, last, load, open_window, send

REMEMBERED = {
    "context_per_conversation": 768,
    "parallel": 3,
    "gpu_layers": None,
    "kv_type": "f16",
    "projector": None,
    "speculation": "off",
}


def open_picker(qtbot, window: MainWindow) -> None:
    qtbot.keyClick(window, Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(window.picker_popup.isVisible)


def choose(qtbot, window: MainWindow, name: str) -> None:
    """Pick ``name`` with the keyboard: its row made current, then Enter."""
    popup = window.picker_popup
    popup.list.setCurrentItem(popup.row_of(name))
    qtbot.keyClick(popup.list, Qt.Key.Key_Return)


def test_the_shortcut_is_free_and_shown(window: MainWindow) -> None:
    shortcuts = [a.shortcut().toString() for a in window.actions() if not a.shortcut().isEmpty()]
    assert shortcuts.count(PICKER_SHORTCUT) == 1, shortcuts
    assert PICKER_SHORTCUT in window.chats_page.header.model.toolTip()


def test_the_picker_lists_library_models_with_the_verdict_of_their_remembered_settings(
    qtbot, window: MainWindow, tiny_model: Path, scripted_model: Path
) -> None:
    window.store.set_setting(settings_key(tiny_model), REMEMBERED)
    add_and_select(qtbot, window, tiny_model, scripted_model)
    qtbot.waitUntil(lambda: window.library.counts().models == 2, timeout=WAIT)
    window.show_page(Page.MODELS)
    open_picker(qtbot, window)
    assert window.current_page() is Page.CHATS
    rows = window.picker_popup.choices()
    hardware = window.planning_hardware()
    remembered = plan_load(inspect_model(tiny_model), hardware, request_from_dict(REMEMBERED, lambda p: None))
    default = plan_load(inspect_model(tiny_model), hardware, LoadRequest())
    tiny = next(c for c in rows if c.path == tiny_model)
    assert tiny.verdict is remembered.verdict
    assert tiny.detail == f"{fit_summary(remembered)} · {format_bytes(remembered.total_bytes)}"
    assert remembered.total_bytes != default.total_bytes  # the remembered settings, not the defaults
    assert any(c.path == scripted_model for c in rows)
    texts = [window.picker_popup.list.item(r).text() for r in range(window.picker_popup.list.count())]
    assert texts[0] == "On this computer" and any(tiny.detail in t for t in texts)
    # A few models are all in view at once, under the filter: nothing to scroll.
    popup_list = window.picker_popup.list
    qtbot.waitUntil(lambda: popup_list.verticalScrollBar().maximum() == 0, timeout=WAIT)
    last_row = popup_list.visualItemRect(popup_list.item(popup_list.count() - 1))
    assert last_row.bottom() <= popup_list.viewport().height()
    qtbot.keyClick(window.picker_popup.list, Qt.Key.Key_Escape)
    assert not window.picker_popup.isVisible() and window.session.state is SessionState.EMPTY


def test_choosing_loads_with_the_remembered_settings_and_shows_the_phases_inline(
    qtbot, window: MainWindow, tiny_model: Path
) -> None:
    window.store.set_setting(settings_key(tiny_model), REMEMBERED)
    add_and_select(qtbot, window, tiny_model)
    seen: list[str] = []
    line = window.chats_page.header.load_line
    window.session.phase_started.connect(lambda _phase: seen.append(line.label.text()))
    open_picker(qtbot, window)
    choose(qtbot, window, "Tiny Llama")
    assert not window.picker_popup.isVisible()
    qtbot.waitUntil(lambda: window.session.state is SessionState.READY, timeout=WAIT)
    plan = window.session.plan
    assert (plan.request.context_per_conversation, plan.request.parallel) == (768, 3)
    assert len(seen) == len(plan.phases) and all(t.startswith("Loading Tiny Llama: ") for t in seen)
    assert not line.isVisible()  # gone once it is ready
    assert window.chats_page.header.model.full_text() == "Tiny Llama answers"
    assert Preferences(window.store).last_model() == str(tiny_model)
    open_picker(qtbot, window)
    current = [c for c in window.picker_popup.choices() if c.current]
    assert [c.path for c in current] == [tiny_model]
    assert "answering" in window.picker_popup.list.currentItem().text()


def test_typing_filters_the_picker_and_enter_loads_the_one_left(
    qtbot, window: MainWindow, tmp_path: Path, tiny_model: Path
) -> None:
    other = write_tiny_text_model(tmp_path / "other.gguf", TinyTextSpec(name="Other Llama", seed=3))
    add_and_select(qtbot, window, tiny_model, other)
    qtbot.waitUntil(lambda: window.library.counts().models == 2, timeout=WAIT)
    open_picker(qtbot, window)
    popup = window.picker_popup
    assert popup.filter.hasFocus()
    qtbot.keyClicks(popup.filter, "OTHER")
    shown = [popup.list.item(r) for r in range(popup.list.count()) if not popup.list.item(r).isHidden()]
    assert [i.text().split("\n")[0] for i in shown] == ["On this computer", "Other Llama"]
    assert popup.list.currentItem() is shown[1]
    qtbot.keyClick(popup.filter, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.session.state is SessionState.READY, timeout=WAIT)
    assert window.session.plan.model.path == other


def test_the_arrows_walk_the_picker_from_the_filter(
    qtbot, window: MainWindow, tmp_path: Path, tiny_model: Path
) -> None:
    other = write_tiny_text_model(tmp_path / "other.gguf", TinyTextSpec(name="Other Llama", seed=3))
    add_and_select(qtbot, window, tiny_model, other)
    qtbot.waitUntil(lambda: window.library.counts().models == 2, timeout=WAIT)
    open_picker(qtbot, window)
    popup = window.picker_popup
    first = popup.list.currentItem().data(CHOICE_ROLE)
    qtbot.keyClick(popup.filter, Qt.Key.Key_Down)
    second = popup.list.currentItem().data(CHOICE_ROLE)
    assert {first.name, second.name} == {"Tiny Llama", "Other Llama"}
    qtbot.keyClick(popup.filter, Qt.Key.Key_Up)
    assert popup.list.currentItem().data(CHOICE_ROLE) == first
    qtbot.keyClick(popup.filter, Qt.Key.Key_Up)  # the section's title is not a choice
    assert popup.list.currentItem().data(CHOICE_ROLE) == first


def test_a_failed_load_is_said_under_the_picker(
    qtbot, window: MainWindow, tmp_path: Path, tiny_model: Path
) -> None:
    broken = tmp_path / "soon-broken.gguf"
    broken.write_bytes(tiny_model.read_bytes())
    add_and_select(qtbot, window, broken)
    open_picker(qtbot, window)
    broken.write_bytes(b"GGUF but not really")
    choose(qtbot, window, "Tiny Llama")
    qtbot.waitUntil(lambda: window.session.state is SessionState.FAILED, timeout=WAIT)
    line = window.chats_page.header.load_line
    assert line.isVisible() and line.label.text() == window.session.error.message


def test_a_chat_whose_model_is_not_loaded_offers_to_load_it(
    qtbot, window: MainWindow, scripted_model: Path, tiny_model: Path
) -> None:
    load(qtbot, window, scripted_model)
    send(qtbot, window, "hello")
    conversation = window.chat.current_id
    assert not window.chats_page.notice.isVisible()  # its own model answers
    window.unload_model()
    notice = window.chats_page.notice
    assert notice.isVisible() and notice.button.text() == "Load Tiny Llama"
    assert "not loaded" in notice.text()
    # Another model answering: the notice says who, and still offers the chat's own.
    add_and_select(qtbot, window, tiny_model)
    qtbot.mouseClick(window.model_panel.load_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.session.state is SessionState.READY, timeout=WAIT)
    window.chat.select(conversation)
    assert notice.isVisible() and notice.button.text() == "Load Tiny Llama"
    qtbot.mouseClick(notice.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: window.session.state is SessionState.READY
        and window.session.plan.model.path == scripted_model,
        timeout=WAIT,
    )
    assert window.session.plan.request.parallel == 4  # as it was loaded before (helpers.load)
    assert not notice.isVisible()


def test_send_loads_the_chats_model_and_then_sends(qtbot, window: MainWindow, scripted_model: Path) -> None:
    load(qtbot, window, scripted_model)
    send(qtbot, window, "first")
    conversation = window.chat.current_id
    window.unload_model()
    window.composer.set_text("second")
    qtbot.keyClick(window.composer.input, Qt.Key.Key_Return)
    assert window.session.state is SessionState.LOADING
    assert window.composer.text() == ""  # sent: shown now, answered once loaded
    assert last(window, Role.USER).text == "second"
    assert "sent when Tiny Llama is loaded" in window.status_label.text()
    qtbot.waitUntil(
        lambda: window.chat.streaming == 0 and len(window.store.messages(conversation)) == 4, timeout=WAIT
    )
    stored = window.store.messages(conversation)
    assert [m.text for m in stored] == ["first", SCRIPT_TEXT, "second", SCRIPT_TEXT]
    assert stored[-1].state is Stored.COMPLETE
    assert last(window, Role.ASSISTANT).state is MessageState.DONE


def test_send_while_loading_waits_for_the_model_instead_of_refusing(
    qtbot, window: MainWindow, scripted_model: Path
) -> None:
    add_and_select(qtbot, window, scripted_model)
    window.new_chat_action.trigger()
    assert "choose a model" in window.message_view._placeholder
    open_picker(qtbot, window)
    choose(qtbot, window, "Tiny Llama")
    assert window.session.state is SessionState.LOADING
    assert "Loading Tiny Llama" in window.message_view._placeholder
    send(qtbot, window, "are you there yet?", wait=False)
    assert NO_MODEL not in window.status_label.text()
    qtbot.waitUntil(
        lambda: window.chat.streaming == 0 and len(window.store.messages(window.chat.current_id)) == 2,
        timeout=WAIT,
    )
    assert window.store.messages(window.chat.current_id)[-1].text == SCRIPT_TEXT
    assert "Start a conversation with Tiny Llama" in window.message_view._placeholder


def test_a_failed_load_gives_the_waiting_message_back(
    qtbot, window: MainWindow, tmp_path: Path, tiny_model: Path
) -> None:
    broken = tmp_path / "soon-broken.gguf"
    broken.write_bytes(tiny_model.read_bytes())
    add_and_select(qtbot, window, broken)
    window.new_chat_action.trigger()
    broken.write_bytes(b"GGUF but not really")
    open_picker(qtbot, window)
    choose(qtbot, window, "Tiny Llama")
    send(qtbot, window, "will it load?", wait=False)
    qtbot.waitUntil(lambda: window.session.state is SessionState.FAILED, timeout=WAIT)
    assert window.composer.text() == "will it load?"
    assert window.store.messages(window.chat.current_id) == []


def test_continue_loads_the_model_and_goes_on(qtbot, window: MainWindow, scripted_model: Path) -> None:
    load(qtbot, window, scripted_model)
    send(qtbot, window, "hello")
    conversation = window.chat.current_id
    reply = window.store.messages(conversation)[-1]
    window.store.finish_reply(reply.id, reply.text[:2], Stored.INTERRUPTED)  # as after a crash
    window.unload_model()
    window.chat.select(conversation)
    window.message_view.trigger_action(reply.id, MessageAction.CONTINUE)
    assert window.session.state is SessionState.LOADING
    qtbot.waitUntil(
        lambda: window.chat.streaming == 0
        and window.store.messages(conversation)[-1].state is Stored.COMPLETE,
        timeout=WAIT,
    )
    assert window.store.messages(conversation)[-1].text.startswith(reply.text[:2])


def test_regenerate_loads_the_model_too(qtbot, window: MainWindow, scripted_model: Path) -> None:
    load(qtbot, window, scripted_model)
    send(qtbot, window, "hello")
    conversation = window.chat.current_id
    first = last(window, Role.ASSISTANT)
    window.unload_model()
    window.message_view.trigger_action(first.id, MessageAction.REGENERATE)
    assert window.session.state is SessionState.LOADING
    assert "written when Tiny Llama is loaded" in window.status_label.text()
    qtbot.waitUntil(
        lambda: window.chat.streaming == 0 and last(window, Role.ASSISTANT).id != first.id, timeout=WAIT
    )
    stored = window.store.messages(conversation)
    assert window.store.versions(stored[-1].id).ids == (first.id, stored[-1].id)
    assert stored[-1].state is Stored.COMPLETE


def test_send_without_any_model_to_load_still_says_how_to_choose(qtbot, window: MainWindow) -> None:
    window.new_chat_action.trigger()
    window.composer.set_text("is anyone there?")
    qtbot.keyClick(window.composer.input, Qt.Key.Key_Return)
    assert window.composer.text() == "is anyone there?"
    assert window.status_label.text() == NO_MODEL and PICKER_SHORTCUT in NO_MODEL


@pytest.mark.parametrize("load_last", [True, False])
def test_the_last_model_loads_at_start_when_the_preference_is_on(
    qtbot, app_paths: AppPaths, hardware: HardwareSnapshot, scripted_model: Path, load_last: bool
) -> None:
    first = open_window(qtbot, app_paths, hardware)
    load(qtbot, first, scripted_model, parallel=2, ctx=512)
    Preferences(first.store).set_load_last_model(load_last)
    first.show_page(Page.MODELS)  # where the next start opens
    first.close()
    second = open_window(qtbot, app_paths, hardware)
    try:
        if load_last:
            qtbot.waitUntil(lambda: second.session.state is SessionState.READY, timeout=WAIT)
            plan = second.session.plan
            assert plan.model.path == scripted_model
            assert (plan.request.context_per_conversation, plan.request.parallel) == (512, 2)
            assert second.current_page() is Page.MODELS  # the load at start pulls no one away
        else:
            qtbot.wait(300)
            assert second.session.state is SessionState.EMPTY
            assert "No model loaded" in second.chats_page.header.model.full_text()
    finally:
        second.close()


def test_the_picker_lists_remote_models_and_uses_one(
    qtbot, app_paths: AppPaths, hardware: HardwareSnapshot, scripted_server, tiny_model: Path
) -> None:
    window = open_window(qtbot, app_paths, hardware, keys=KeyVault(MemoryKeyring()))
    try:
        add_and_select(qtbot, window, tiny_model)
        window.remote_servers.add(scripted_server.base_url, name="Closet box")
        qtbot.waitUntil(
            lambda: all(x.state is ListingState.ONLINE for x in window.remote_servers.listings()),
            timeout=WAIT,
        )
        open_picker(qtbot, window)
        remote = [c for c in window.picker_popup.choices() if c.is_remote]
        assert remote and all(c.detail == f"via 127.0.0.1:{scripted_server.port}" for c in remote)
        texts = [window.picker_popup.list.item(r).text() for r in range(window.picker_popup.list.count())]
        assert "Remote servers" in texts
        choose(qtbot, window, remote[0].name)
        assert window.session.remote is not None and window.session.remote.info == remote[0].remote
        send(qtbot, window, "hello over there")
        assert window.store.messages(window.chat.current_id)[-1].text == SCRIPT_TEXT
    finally:
        window.close()


def test_the_toolbars_model_name_opens_the_picker_too(
    qtbot, window: MainWindow, tiny_model: Path
) -> None:
    add_and_select(qtbot, window, tiny_model)
    window.show_page(Page.MODELS)
    label = window.badge.label
    assert "Ctrl+M" in label.toolTip()
    qtbot.mouseClick(label, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(window.picker_popup.isVisible, timeout=WAIT)
    assert window.current_page() is Page.CHATS
    assert any(c.path == tiny_model for c in window.picker_popup.choices())
    qtbot.keyClick(window.picker_popup.list, Qt.Key.Key_Escape)
    load(qtbot, window, tiny_model)
    assert "Ctrl+M" in label.toolTip()  # still said once a model is loaded
