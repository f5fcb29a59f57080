"""A chat queued behind another: the line under its reply says why it waits (the model
serves one conversation at a time) and offers more parallel conversations; once it runs,
its stats line says how long it waited for a slot apart from its time to first token."""

from __future__ import annotations

import time
from pathlib import Path

from app.chat import MessageAction, MessageState, format_seconds
from app.widgets.nav_rail import Page
from app.window.main_window import MainWindow
from engine.chat import Role
from tests.helpers import WAIT, click_footer, last, load, send, set_max_tokens

WHY = "Waiting: the model serves 1 conversation at a time (parallel = 1) and another chat is replying"


def slow_down(window: MainWindow, seconds: float) -> None:
    """Every decode takes a while, so a reply lasts long enough to queue another behind it."""
    executor = window.session.ready_model._executor
    original = executor._decode

    def slow(batch):
        time.sleep(seconds)
        return original(batch)

    executor._decode = slow


def test_a_queued_chat_says_why_and_offers_more_parallel_conversations(
    qtbot, window: MainWindow, looping_model: Path
) -> None:
    load(qtbot, window, looping_model, parallel=1)
    slow_down(window, 0.03)
    view = window.message_view
    window.new_chat()
    first = window.chat.current_id
    set_max_tokens(window, 2000)
    send(qtbot, window, "go on", wait=False)
    qtbot.waitUntil(lambda: last(window, Role.ASSISTANT).state is MessageState.STREAMING, timeout=WAIT)

    window.new_chat()
    second = window.chat.current_id
    set_max_tokens(window, 4)
    send(qtbot, window, "and you?", wait=False)
    reply = last(window, Role.ASSISTANT).id
    qtbot.waitUntil(lambda: view.status_text(reply) == WHY, timeout=WAIT)
    assert MessageAction.MORE_PARALLEL in view.available_actions(reply)
    assert window.conversation_list.busy_text(second) == "waiting for a slot"
    # Shown again as it was after a look at the other chat (it used to say "waiting for the model…").
    window.chat.select(first)
    window.chat.select(second)
    assert view.status_text(reply) == WHY

    click_footer(qtbot, view, reply, MessageAction.MORE_PARALLEL.value)
    assert window.current_page() is Page.MODELS
    panel = window.model_panel
    assert window.library_panel.selected_path() == looping_model
    assert panel.parallel_spin.value() == 2
    assert panel.plan() is not None and panel.plan().request.parallel == 2 and panel.plan().fits
    assert panel.load_button.text() == "Reload with these settings"
    assert "Parallel conversations set to 2" in window.status_label.text()
    assert window.session.plan.request.parallel == 1, "nothing reloads until the user says so"

    # The first chat stopped, the second runs: its wait is told apart from its first token.
    window.show_page(Page.CHATS)
    queued_for = time.monotonic()
    qtbot.waitUntil(lambda: time.monotonic() - queued_for > 2.0, timeout=WAIT)
    window.chat.select(first)
    window.stop_generating()
    window.chat.select(second)
    qtbot.waitUntil(lambda: window.chat.streaming == 0, timeout=WAIT)
    done = view.message(reply)
    assert done is not None and done.state is MessageState.DONE and done.stats is not None
    assert done.stats.queued > 2.0
    assert done.stats.ttft < done.stats.queued - 1.0, "the wait is not time to first token"
    assert view.stats_text(reply).startswith(f"waited {format_seconds(done.stats.queued)} for a slot · ")
    assert MessageAction.MORE_PARALLEL not in view.available_actions(reply)


def test_a_reply_admitted_at_once_gives_no_reason_to_wait(
    qtbot, window: MainWindow, scripted_model: Path
) -> None:
    load(qtbot, window, scripted_model, parallel=1)
    window.new_chat()
    send(qtbot, window, "hello", wait=False)
    reply = last(window, Role.ASSISTANT).id
    seen: list[str] = []
    while window.chat.streaming:
        seen.append(window.message_view.status_text(reply))
        qtbot.wait(5)
    # Queued and admitted in the same instant: no reason, and no "1 ahead" that is not there.
    assert seen and all(s in ("", "waiting for the model…") or s.startswith("reading ") for s in seen)
    stats = window.message_view.message(reply).stats
    assert stats is not None and not window.message_view.stats_text(reply).startswith("waited")
