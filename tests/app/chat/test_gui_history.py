"""Message history a user can trust, through the window with tiny models (offscreen):
versions of regenerated replies and edited messages, who wrote each reply, delete with undo."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.platform.paths import AppPaths
from app.settings.preferences import Preferences
from app.state.session import SessionState
from app.window.main_window import MainWindow
from engine import ChatRequest
from engine.chat import Role
from engine.devtools.tiny_models import TinyTextSpec, write_tiny_text_model
from engine.machine.hardware import HardwareSnapshot
from tests.conftest import SCRIPT_TEXT
from tests.helpers import WAIT, click_footer, last, load, open_window, send, set_max_tokens


def record_requests(monkeypatch: pytest.MonkeyPatch, window: MainWindow) -> list[ChatRequest]:
    """Every request the window submits to the loaded model from now on (still submitted)."""
    model = window.session.ready_model
    requests: list[ChatRequest] = []
    submit = model.submit

    def recording(request: ChatRequest, *args, **kwargs):
        requests.append(request)
        return submit(request, *args, **kwargs)

    monkeypatch.setattr(model, "submit", recording)
    return requests


def texts(window: MainWindow) -> list[str]:
    return [m.text for m in window.message_view.messages()]


def regenerate(qtbot, window: MainWindow) -> str:
    """Click Regenerate under the last reply; the new version's text once written."""
    before = last(window, Role.ASSISTANT).id
    click_footer(qtbot, window.message_view, before, "Regenerate")
    qtbot.waitUntil(
        lambda: window.chat.streaming == 0 and last(window, Role.ASSISTANT).id != before, timeout=WAIT
    )
    return last(window, Role.ASSISTANT).text


def test_regenerated_replies_are_versions_and_the_one_shown_is_sent(
    qtbot, monkeypatch: pytest.MonkeyPatch, window: MainWindow, looping_model: Path
) -> None:
    load(qtbot, window, looping_model)
    view = window.message_view
    replies = []
    for max_tokens in (3, 5, 7):  # the looping model says more of its script each time
        set_max_tokens(window, max_tokens)
        if not replies:
            send(qtbot, window, "count")
            replies.append(last(window, Role.ASSISTANT).text)
        else:
            replies.append(regenerate(qtbot, window))
    assert len(set(replies)) == 3
    reply = last(window, Role.ASSISTANT)
    assert view.version_text(reply.id) == "3/3"
    assert texts(window) == ["count", replies[2]]

    click_footer(qtbot, view, reply.id, "‹")
    assert texts(window) == ["count", replies[1]]
    earlier = last(window, Role.ASSISTANT)
    assert view.version_text(earlier.id) == "2/3"
    click_footer(qtbot, view, earlier.id, "‹")
    assert texts(window) == ["count", replies[0]]
    first = last(window, Role.ASSISTANT)
    assert view.version_text(first.id) == "1/3"
    assert window.store.versions(first.id).count == 3  # nothing was lost

    # The next turn answers the conversation as shown: the first version.
    requests = record_requests(monkeypatch, window)
    send(qtbot, window, "and then?")
    assert [(m.role, m.text) for m in requests[-1].messages] == [
        (Role.USER, "count"),
        (Role.ASSISTANT, replies[0]),
        (Role.USER, "and then?"),
    ]
    assert texts(window)[:3] == ["count", replies[0], "and then?"]
    # Going to the third version and back brings back the turn that followed the first.
    click_footer(qtbot, view, first.id, "›")
    click_footer(qtbot, view, last(window, Role.ASSISTANT).id, "›")
    assert texts(window) == ["count", replies[2]]
    click_footer(qtbot, view, last(window, Role.ASSISTANT).id, "‹")
    click_footer(qtbot, view, last(window, Role.ASSISTANT).id, "‹")
    assert texts(window)[:3] == ["count", replies[0], "and then?"] and len(texts(window)) == 4


def test_editing_a_message_makes_a_branch_the_switcher_brings_back(
    qtbot, window: MainWindow, scripted_model: Path
) -> None:
    load(qtbot, window, scripted_model)
    send(qtbot, window, "first question")
    send(qtbot, window, "second question")
    before = texts(window)
    view = window.message_view
    first_user = view.messages()[0]
    click_footer(qtbot, view, first_user.id, "Edit")
    assert window.composer.is_editing()
    window.composer.set_text("a better first question")
    qtbot.keyClick(window.composer.input, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.chat.streaming == 0 and len(view.messages()) == 2, timeout=WAIT)
    assert texts(window) == ["a better first question", SCRIPT_TEXT]
    edited = view.messages()[0]
    assert view.version_text(edited.id) == "2/2"
    assert [m.text for m in window.store.messages(window.chat.current_id)] == texts(window)

    click_footer(qtbot, view, edited.id, "‹")
    assert texts(window) == before  # the earlier question, its answer and what followed
    assert view.version_text(view.messages()[0].id) == "1/2"
    click_footer(qtbot, view, view.messages()[0].id, "›")
    assert texts(window) == ["a better first question", SCRIPT_TEXT]


def test_a_reply_keeps_the_name_of_the_model_that_wrote_it(
    qtbot,
    app_paths: AppPaths,
    hardware: HardwareSnapshot,
    tiny_model: Path,
    tmp_path: Path,
) -> None:
    other = write_tiny_text_model(tmp_path / "other.gguf", TinyTextSpec(name="Other Llama", seed=3))
    window = open_window(qtbot, app_paths, hardware)
    view = window.message_view
    load(qtbot, window, tiny_model)
    set_max_tokens(window, 4)
    send(qtbot, window, "who are you?")
    first = last(window, Role.ASSISTANT)
    assert view.author(first.id) == "Tiny Llama · F32"

    load(qtbot, window, other)
    assert view.author(first.id) == "Tiny Llama · F32"  # not whoever is loaded now
    send(qtbot, window, "and you?")
    second = last(window, Role.ASSISTANT)
    assert view.author(second.id) == "Other Llama · F32"
    assert view.author(first.id) == "Tiny Llama · F32"
    stored = window.store.get_message(second.id)
    assert stored.model is not None and stored.model.file == str(other)
    assert stored.sampling["max_tokens"] == 4
    path, sampling = view.message(second.id).author_details.splitlines()  # the header's tooltip
    assert path == str(other) and sampling.startswith("temperature ") and sampling.endswith("up to 4 tokens")
    Preferences(window.store).set_load_last_model(False)
    window.close()

    again = open_window(qtbot, app_paths, hardware)  # no model loaded
    try:
        shown = again.message_view
        assert [shown.author(m.id) for m in shown.messages()] == [
            "You",
            "Tiny Llama · F32",
            "You",
            "Other Llama · F32",
        ]
        assert again.session.state is SessionState.EMPTY
        click_footer(qtbot, shown, second.id, "Regenerate")  # loads the model that wrote the chat
        assert "written when Other Llama is loaded" in again.status_label.text()
        qtbot.waitUntil(
            lambda: again.store.versions(second.id).count == 2 and again.chat.streaming == 0, timeout=WAIT
        )
        assert again.session.plan.model.path == other
    finally:
        again.close()


def test_switching_versions_or_deleting_waits_for_the_reply(
    qtbot, window: MainWindow, looping_model: Path
) -> None:
    load(qtbot, window, looping_model)
    set_max_tokens(window, 3)
    send(qtbot, window, "count")
    regenerate(qtbot, window)
    reply = last(window, Role.ASSISTANT)
    set_max_tokens(window, 100_000)
    send(qtbot, window, "go on forever", wait=False)
    qtbot.waitUntil(lambda: len(last(window, Role.ASSISTANT).text) > 3, timeout=WAIT)
    view = window.message_view
    shown = texts(window)[:3]
    click_footer(qtbot, view, reply.id, "‹")  # shown, but not usable now
    assert texts(window)[:3] == shown
    window.chat.switch_version(reply.id, -1)
    assert "before switching versions" in window.status_label.text()
    window.chat.delete_message(reply.id)
    assert "before deleting" in window.status_label.text()
    assert texts(window)[:3] == shown and window.store.versions(reply.id).count == 2
    qtbot.keyClick(window.composer.input, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: window.chat.streaming == 0, timeout=WAIT)
    click_footer(qtbot, view, reply.id, "‹")
    assert view.version_text(view.messages()[1].id) == "1/2"


def test_deleting_a_message_offers_undo(
    qtbot, monkeypatch: pytest.MonkeyPatch, window: MainWindow, scripted_model: Path
) -> None:
    load(qtbot, window, scripted_model)
    send(qtbot, window, "q1")
    send(qtbot, window, "q2")
    view = window.message_view
    bar = view.undo_bar
    q1 = view.messages()[0]
    click_footer(qtbot, view, q1.id, "Delete")
    assert texts(window) == ["q2", SCRIPT_TEXT]  # the turn went, what followed stays
    assert bar.isVisibleTo(view) and bar.label.text() == "Deleted your message and its reply"
    qtbot.mouseClick(bar.button, Qt.MouseButton.LeftButton)
    assert texts(window) == ["q1", SCRIPT_TEXT, "q2", SCRIPT_TEXT]
    assert not bar.isVisibleTo(view)

    click_footer(qtbot, view, last(window, Role.ASSISTANT).id, "Delete")
    assert texts(window) == ["q1", SCRIPT_TEXT, "q2"] and bar.label.text() == "Deleted the reply"
    # Sending moves the conversation on: the delete is final, and the prompt leaves it out.
    requests = record_requests(monkeypatch, window)
    send(qtbot, window, "q3")
    assert not bar.isVisibleTo(view)
    assert [m.text for m in requests[-1].messages] == ["q1", SCRIPT_TEXT, "q2", "q3"]
    assert [m.text for m in window.store.messages(window.chat.current_id)] == texts(window)

    # A version goes with what followed it, and the one before it is shown.
    q3_reply = last(window, Role.ASSISTANT)
    second = regenerate(qtbot, window)
    send(qtbot, window, "q4")
    click_footer(qtbot, view, view.messages()[-3].id, "Delete")
    assert bar.label.text() == "Deleted this version and the 2 messages after it"
    assert texts(window) == ["q1", SCRIPT_TEXT, "q2", "q3", q3_reply.text]
    qtbot.mouseClick(bar.button, Qt.MouseButton.LeftButton)
    assert texts(window) == ["q1", SCRIPT_TEXT, "q2", "q3", second, "q4", SCRIPT_TEXT]

    # Leaving the conversation ends the offer too.
    click_footer(qtbot, view, view.messages()[0].id, "Delete")
    assert bar.label.text() == "Deleted your message and its reply"
    window.new_chat_action.trigger()
    assert not bar.isVisibleTo(view)


def test_deleting_a_conversation_offers_undo_in_the_window(
    qtbot, app_paths: AppPaths, hardware: HardwareSnapshot, scripted_model: Path
) -> None:
    window = open_window(qtbot, app_paths, hardware)
    load(qtbot, window, scripted_model)
    send(qtbot, window, "about lighthouses")
    keep = window.chat.current_id
    window.new_chat_action.trigger()
    send(qtbot, window, "about bread")
    gone = window.chat.current_id
    conversations = window.conversation_list
    conversations.list.setFocus()
    qtbot.keyClick(conversations.list, Qt.Key.Key_Delete)  # the current one: "about bread"
    assert gone not in [c.id for c in window.store.list_conversations()]
    assert len(window.message_view) == 0 and conversations.undo_bar.isVisibleTo(conversations)
    qtbot.mouseClick(conversations.undo_button, Qt.MouseButton.LeftButton)
    assert window.chat.current_id == gone
    assert texts(window) == ["about bread", SCRIPT_TEXT]
    assert gone in [c.id for c in window.store.list_conversations()]

    conversations.undo_bar.timer.setInterval(50)
    conversations.request_delete(gone)
    qtbot.waitUntil(lambda: not conversations.undo_bar.isVisibleTo(conversations), timeout=WAIT)
    window.close()
    again = open_window(qtbot, app_paths, hardware)
    try:
        assert again.conversation_list.visible_ids() == [keep]  # the delete held
        assert again.chat.current_id == keep
    finally:
        again.close()
