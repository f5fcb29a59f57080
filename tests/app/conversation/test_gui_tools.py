"""The window's tool loop (issue 29), end to end: a scripted tiny model that calls the real
``mcp-server-time`` (PyPI) for Tokyo's time, the approval bar driven with the mouse — Allow
once, Always for this tool, Deny — and Esc; the rounds saved with the reply, shown as blocks,
left out of what Copy gives, and sent back to the model in the next turn."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import psutil
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from app.chat import MessageAction
from app.conversation.reply_in_flight import ReplyStage
from app.platform.paths import AppPaths
from app.store.history import MessageState
from app.window.chat_tools import NO_TOOL_TEMPLATE
from engine import CallStatus, Role, ToolLoopLimits, rounds_cap_line, rounds_from_json
from engine.devtools.tiny_models import TinyTextSpec, write_tiny_text_model
from tests.helpers import WAIT, load, open_window, send
from tests.mcp_servers import server_processes

# "Checking." then a Hermes call of get_current_time for Tokyo, cut where a model's tokens would.
PIECES = (
    "Checking.",
    '{"name":\u2581"get_current_time",\u2581',
    '"arguments":\u2581{"timezone":\u2581"Asia/Tokyo"}}',
)
CONTROL = ("<tool_call>", "</tool_call>")
SCRIPT = (PIECES[0], "<tool_call>", *PIECES[1:], "</tool_call>", "<|im_end|>")


@pytest.fixture(scope="module")
def calling_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Asks for Tokyo's time whatever it is told (and again after the result: a repeat)."""
    path = tmp_path_factory.mktemp("caller") / "caller.gguf"
    spec = TinyTextSpec(script=SCRIPT, control_tokens=("<tool_call>", "</tool_call>"), extra_tokens=PIECES)
    return write_tiny_text_model(path, spec)


@pytest.fixture()
def tool_window(qtbot, app_paths: AppPaths, hardware, calling_model: Path):
    """A window whose mcp.json has the time server, the calling model loaded, two rounds at most."""
    config = {"mcpServers": {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]}}}
    app_paths.mcp_config.write_text(json.dumps(config))
    window = open_window(qtbot, app_paths, hardware)
    turns = window.chat.replies.tool_turns
    turns.limits = replace(turns.limits, max_rounds=2)
    qtbot.waitUntil(lambda: any(t.name == "get_current_time" for t in turns.service.tools()), timeout=WAIT)
    load(qtbot, window, calling_model, parallel=1, ctx=8192)  # a tiny vocabulary: many tokens
    window.new_chat()
    yield window
    window.close()


def ask(qtbot, window) -> None:
    send(qtbot, window, "What time is it in Tokyo?", wait=False)
    qtbot.waitUntil(lambda: window.chats_page.approval.isVisible(), timeout=WAIT)


def stored_reply(window):
    return window.store.messages(window.chat.current_id)[-1]


def test_allow_once_runs_the_call_and_the_result_goes_back(qtbot, tool_window) -> None:
    window = tool_window
    bar = window.chats_page.approval
    ask(qtbot, window)
    assert "get_current_time" in bar.title.text() and "time" in bar.title.text()
    assert json.loads(bar.arguments.toPlainText()) == {"timezone": "Asia/Tokyo"}  # shown before it runs
    shown = window.message_view.messages()[-1]
    assert "<tool_call>" not in shown.text and "waiting for your allow" in shown.text
    qtbot.mouseClick(bar.allow, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.chat.streaming == 0, timeout=WAIT)
    assert not bar.isVisible()  # the repeat is refused without asking

    reply = stored_reply(window)
    assert reply.state is MessageState.COMPLETE
    first, second = rounds_from_json(reply.tool_rounds)
    (call,) = first.calls
    assert call.status is CallStatus.OK and call.server == "time"
    assert json.loads(call.result)["timezone"] == "Asia/Tokyo"
    assert second.calls[0].status is CallStatus.REFUSED  # the same call again
    assert first.text == "Checking."

    data = window.message_view.messages()[-1]
    assert "get_current_time" in data.text and "Asia/Tokyo" in data.text  # the blocks
    window.message_view.trigger_action(data.id, MessageAction.COPY)
    copied = QGuiApplication.clipboard().text()
    assert copied.startswith("Checking.") and "get_current_time" not in copied

    # The next turn sends the calls and their results back, as the model's own turns.
    history = window.chat.replies.history.messages(
        window.store.get_conversation(reply.conversation_id),
        window.store.messages(reply.conversation_id),
        False,
    )
    roles = [m.role for m in history]
    assert roles[:3] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert history[1].tool_calls[0].name == "get_current_time"
    assert history[2].tool_call_id == history[1].tool_calls[0].id


def test_deny_tells_the_model_and_always_trusts_the_tool(qtbot, tool_window) -> None:
    window = tool_window
    bar = window.chats_page.approval
    ask(qtbot, window)
    qtbot.mouseClick(bar.deny, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.chat.streaming == 0, timeout=WAIT)
    denied = rounds_from_json(stored_reply(window).tool_rounds)[0].calls[0]
    assert denied.status is CallStatus.DENIED and "denied" in denied.result

    ask(qtbot, window)  # asked again: a denial is for that call only
    qtbot.mouseClick(bar.always, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.chat.streaming == 0, timeout=WAIT)
    assert rounds_from_json(stored_reply(window).tool_rounds)[0].calls[0].status is CallStatus.OK

    send(qtbot, window, "And now?", wait=True)  # trusted: it runs without asking
    assert rounds_from_json(stored_reply(window).tool_rounds)[0].calls[0].status is CallStatus.OK


def test_esc_while_asking_keeps_the_reply_interrupted(qtbot, tool_window) -> None:
    window = tool_window
    ask(qtbot, window)
    qtbot.keyClick(window.chats_page.approval.allow, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: window.chat.streaming == 0, timeout=WAIT)
    reply = stored_reply(window)
    assert reply.state is MessageState.INTERRUPTED
    (round_,) = rounds_from_json(reply.tool_rounds)
    assert round_.calls[0].status is CallStatus.INTERRUPTED
    assert not window.chats_page.approval.isVisible()
    # The round's text is kept once, in its round: not again as the reply's own text.
    assert round_.text == "Checking." and reply.text == ""
    shown = window.message_view.messages()[-1]
    assert shown.text.count("Checking.") == 1 and shown.copy_text == "Checking."


def test_a_round_refused_whole_leaves_the_reply_writing_not_in_its_calls(qtbot, tool_window) -> None:
    """The repeat in round 2 is refused without asking, so that round ends at once and the
    next is submitted from inside it: the stage it was given must not be overwritten."""
    window = tool_window
    runner = window.chat.replies
    stages = []
    set_stage = runner._set_stage
    runner._set_stage = lambda stream, stage: (stages.append(stage), set_stage(stream, stage))
    said = []
    runner.status.connect(said.append)
    window.chat.replies.tool_turns.service.trust.trust("time/get_current_time")
    send(qtbot, window, "What time is it in Tokyo?", wait=True)
    rounds = rounds_from_json(stored_reply(window).tool_rounds)
    assert rounds[1].calls[0].status is CallStatus.REFUSED
    assert rounds_cap_line(2) in said  # the user is told the cap, as the model is
    assert ReplyStage.TOOLS in stages and stages[-1] is not ReplyStage.TOOLS
    after_tools = [b for a, b in pairwise(stages) if a is ReplyStage.TOOLS]
    assert after_tools and all(stage is ReplyStage.WAITING for stage in after_tools)
    assert all(
        (a, b) != (ReplyStage.WAITING, ReplyStage.TOOLS) for a, b in pairwise(stages)
    )


def test_tools_off_in_a_chat_offers_none(qtbot, tool_window) -> None:
    window = tool_window
    button = window.chats_page.header.tools
    assert button.is_on()
    button.set_use(False)
    send(qtbot, window, "What time is it in Tokyo?", wait=True)
    reply = stored_reply(window)
    assert reply.tool_rounds == "" and "<tool_call>" in reply.text  # no tools: its text as it is
    assert ToolLoopLimits().max_rounds >= 2


def test_regenerate_makes_a_new_version_with_its_own_rounds(qtbot, tool_window) -> None:
    window = tool_window
    window.chat.replies.tool_turns.service.trust.trust("time/get_current_time")
    send(qtbot, window, "What time is it in Tokyo?", wait=True)
    first = stored_reply(window)
    window.message_view.trigger_action(window.message_view.messages()[-1].id, MessageAction.REGENERATE)
    qtbot.waitUntil(lambda: window.chat.streaming == 0 and stored_reply(window).id != first.id, timeout=WAIT)
    again = stored_reply(window)
    assert again.version_count == 2 and again.state is MessageState.COMPLETE
    (call,) = rounds_from_json(again.tool_rounds)[0].calls
    assert (
        call.status is CallStatus.OK
        and call.call.id != rounds_from_json(first.tool_rounds)[0].calls[0].call.id
    )


def test_editing_the_question_branches_past_the_rounds_and_the_new_reply_has_its_own(
    qtbot, tool_window
) -> None:
    window = tool_window
    window.chat.replies.tool_turns.service.trust.trust("time/get_current_time")
    send(qtbot, window, "What time is it in Tokyo?", wait=True)
    first = stored_reply(window)
    user = next(m for m in window.message_view.messages() if m.role is Role.USER)
    window.message_view.trigger_action(user.id, MessageAction.EDIT)
    window.composer.set_text("What time is it in Tokyo now?")
    qtbot.keyClick(window.composer.input, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.chat.streaming == 0 and stored_reply(window).id != first.id, timeout=WAIT)
    path = window.store.messages(window.chat.current_id)
    assert [m.text for m in path[:1]] == ["What time is it in Tokyo now?"] and len(path) == 2
    again = path[-1]
    assert again.state is MessageState.COMPLETE
    ran = rounds_from_json(again.tool_rounds)[0].calls[0]
    assert ran.status is CallStatus.OK
    assert ran.call.id != rounds_from_json(first.tool_rounds)[0].calls[0].call.id
    kept = window.store.get_message(first.id)  # the first branch keeps its own rounds
    assert rounds_from_json(kept.tool_rounds)[0].calls[0].status is CallStatus.OK


def test_the_tools_menu_says_the_template_has_no_tools(qtbot, tool_window) -> None:
    # The tiny model's template is plain ChatML: its tools go in Hearth's system prompt.
    button = tool_window.chats_page.header.tools
    assert button.note() == NO_TOOL_TEMPLATE
    assert "⚠" in button.text() and NO_TOOL_TEMPLATE in button.toolTip()  # seen without opening it


def test_closing_the_window_stops_every_server(qtbot, tool_window) -> None:
    servers = server_processes()  # the window's one server: mcp-server-time
    assert servers
    tool_window.close()
    _gone, alive = psutil.wait_procs(servers, timeout=5)
    assert alive == []


# Two calls in one turn: Tokyo, then UTC (a scripted model's tokens are all distinct: the
# second call is spelled with other pieces, space-led).
UTC_PIECES = (
    "\u2581<tool_call>",
    '{"name":\u2581"get_current_time",\u2581\u2581',
    '"arguments":\u2581{"timezone":\u2581"UTC"}}',
    "\u2581</tool_call>",
)
TWO = ("Both.", "<tool_call>", *PIECES[1:], "</tool_call>", *UTC_PIECES, "<|im_end|>")


def test_parallel_calls_in_one_turn_are_asked_and_run_in_order(qtbot, app_paths, hardware, tmp_path) -> None:
    extra = (*PIECES, "Both.", *UTC_PIECES)
    spec = TinyTextSpec(script=TWO, control_tokens=("<tool_call>", "</tool_call>"), extra_tokens=extra)
    model = write_tiny_text_model(tmp_path / "two.gguf", spec)
    config = {"mcpServers": {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]}}}
    app_paths.mcp_config.write_text(json.dumps(config))
    window = open_window(qtbot, app_paths, hardware)
    turns = window.chat.replies.tool_turns
    turns.limits = replace(turns.limits, max_rounds=2)
    qtbot.waitUntil(lambda: bool(turns.service.tools()), timeout=WAIT)
    load(qtbot, window, model, parallel=1, ctx=8192)
    window.new_chat()
    ask(qtbot, window)
    bar = window.chats_page.approval
    asked = []
    while window.chat.streaming:
        if bar.isVisible() and bar.pending() not in [a[0] for a in asked]:
            asked.append((bar.pending(), json.loads(bar.arguments.toPlainText())))
            qtbot.mouseClick(bar.allow, Qt.MouseButton.LeftButton)
        qtbot.wait(20)
    assert [arguments for _key, arguments in asked] == [{"timezone": "Asia/Tokyo"}, {"timezone": "UTC"}]
    first = rounds_from_json(stored_reply(window).tool_rounds)[0]
    assert [json.loads(c.result)["timezone"] for c in first.calls] == ["Asia/Tokyo", "UTC"]
    assert all(c.status is CallStatus.OK for c in first.calls)
    window.close()


# One turn, two calls to one server: the first kills it (fault_server's ``crash``), so the
# second finds the server gone.
FAULTS = Path(__file__).resolve().parents[2] / "engine" / "tools" / "fault_server.py"
CRASH_PIECES = ('{"name":\u2581"crash",\u2581', '"arguments":\u2581{}}')
ECHO_PIECES = ('{"name":\u2581"echo",\u2581', '"arguments":\u2581{"text":\u2581"hi"}}')
CRASH_THEN_ECHO = (
    "Trying.", "<tool_call>", *CRASH_PIECES, "</tool_call>",
    "\u2581<tool_call>", *ECHO_PIECES, "\u2581</tool_call>", "<|im_end|>",
)  # fmt: skip


def test_a_server_that_dies_mid_round_fails_its_other_calls_and_the_reply_ends(
    qtbot, app_paths, hardware, tmp_path
) -> None:
    extra = ("Trying.", *CRASH_PIECES, *ECHO_PIECES, "\u2581<tool_call>", "\u2581</tool_call>")
    spec = TinyTextSpec(script=CRASH_THEN_ECHO, control_tokens=CONTROL, extra_tokens=extra)
    model = write_tiny_text_model(tmp_path / "crasher.gguf", spec)
    config = {"mcpServers": {"faults": {"command": sys.executable, "args": [str(FAULTS), "ok"]}}}
    app_paths.mcp_config.write_text(json.dumps(config))
    window = open_window(qtbot, app_paths, hardware)
    turns = window.chat.replies.tool_turns
    turns.limits = replace(turns.limits, max_rounds=2)
    qtbot.waitUntil(lambda: bool(turns.service.tools()), timeout=WAIT)
    turns.service.trust.trust("faults/crash")
    turns.service.trust.trust("faults/echo")
    load(qtbot, window, model, parallel=1, ctx=8192)
    window.new_chat()
    send(qtbot, window, "Try it.", wait=True)
    reply = stored_reply(window)
    assert reply.state is MessageState.COMPLETE
    crashed, echoed = rounds_from_json(reply.tool_rounds)[0].calls
    assert crashed.status is CallStatus.ERROR and "stopped" in crashed.result
    assert echoed.status is CallStatus.REFUSED and "no longer available" in echoed.result
    assert window.chat.streaming == 0
    window.close()


HANG_PIECES = ('{"name":\u2581"hang",\u2581', '"arguments":\u2581{}}')


def test_esc_while_a_call_runs_stops_the_reply_and_says_so(qtbot, app_paths, hardware, tmp_path) -> None:
    script = ("Waiting.", "<tool_call>", *HANG_PIECES, "</tool_call>", "<|im_end|>")
    spec = TinyTextSpec(script=script, control_tokens=CONTROL, extra_tokens=("Waiting.", *HANG_PIECES))
    model = write_tiny_text_model(tmp_path / "hanger.gguf", spec)
    config = {"mcpServers": {"faults": {"command": sys.executable, "args": [str(FAULTS), "ok"]}}}
    app_paths.mcp_config.write_text(json.dumps(config))
    window = open_window(qtbot, app_paths, hardware)
    turns = window.chat.replies.tool_turns
    qtbot.waitUntil(lambda: bool(turns.service.tools()), timeout=WAIT)
    turns.service.trust.trust("faults/hang")
    load(qtbot, window, model, parallel=1, ctx=8192)
    window.new_chat()
    send(qtbot, window, "Wait.", wait=False)
    qtbot.waitUntil(lambda: "running…" in window.message_view.messages()[-1].text, timeout=WAIT)
    qtbot.keyClick(window.composer.input, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: window.chat.streaming == 0, timeout=WAIT)
    reply = stored_reply(window)
    assert reply.state is MessageState.INTERRUPTED and reply.text == ""
    (round_,) = rounds_from_json(reply.tool_rounds)
    (call,) = round_.calls
    assert call.status is CallStatus.INTERRUPTED and call.result.startswith("Stopped while it ran")
    assert round_.text == "Waiting."
    window.close()
