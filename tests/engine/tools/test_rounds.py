"""The tool loop's pure steps (issue 29): which calls of a round run (the per-round cap,
repeats refused), a result capped and said so, a finished reply split into text and calls,
the messages the model is sent back, when the tools are withdrawn, and the rounds as the
store keeps them."""

from __future__ import annotations

import json

from engine import (
    CallStatus,
    ChatMessage,
    ChatRequest,
    Role,
    ToolCall,
    ToolCallFormat,
    ToolCallRecord,
    ToolLoopLimits,
    ToolRound,
    cap_result,
    continuation,
    round_messages,
    rounds_from_json,
    rounds_json,
    split_reply,
)
from engine.tools.rounds import REPEAT_NOTE, REPEATED, rounds_cap_note

TIME = ToolCall("c1", "get_current_time", '{"timezone": "Asia/Tokyo"}')
TOOLS = ({"type": "function", "function": {"name": "get_current_time", "parameters": {"type": "object"}}},)
ASK = ChatRequest(messages=(ChatMessage(Role.USER, "What time is it in Tokyo?"),), tools=TOOLS)


def ok(call: ToolCall = TIME, result: str = '{"datetime": "06:28"}') -> ToolCallRecord:
    return ToolCallRecord(call, CallStatus.OK, result, "time")


def test_calls_past_the_cap_and_repeats_are_refused_in_order() -> None:
    limits = ToolLoopLimits(max_calls_per_round=2)
    other = ToolCall("c2", "get_current_time", '{"timezone": "UTC"}')
    same_spelled_otherwise = ToolCall("c3", "get_current_time", '{ "timezone":"Asia/Tokyo" }')
    third = ToolCall("c4", "get_current_time", '{"timezone": "Europe/Paris"}')
    admitted = limits.admit([other, same_spelled_otherwise, third], [ToolRound("", (ok(),))])
    assert admitted[0] is other
    assert isinstance(admitted[1], ToolCallRecord) and admitted[1].result == REPEATED
    assert isinstance(admitted[2], ToolCallRecord) and "at most 2 calls" in admitted[2].result
    twice_in_one_round = limits.admit([TIME, ToolCall("c5", TIME.name, TIME.arguments)])
    assert twice_in_one_round[0] is TIME and twice_in_one_round[1].status is CallStatus.REFUSED


def test_a_result_over_the_cap_is_cut_and_says_its_full_size() -> None:
    assert cap_result("short", 10) == ("short", False)
    cut, truncated = cap_result("x" * 50_000, 1000)
    assert truncated and cut.startswith("x" * 1000) and "50,000 characters" in cut and len(cut) < 1100


def test_a_finished_reply_splits_into_its_text_and_calls() -> None:
    call_json = '{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}'
    reply = f"Let me check.<tool_call>\n{call_json}\n</tool_call>"
    text, calls = split_reply(reply, ToolCallFormat.HERMES, ["get_current_time"])
    assert text == "Let me check."
    (call,) = calls
    assert call.name == "get_current_time" and json.loads(call.arguments) == {"timezone": "Asia/Tokyo"}
    assert call.id.startswith("call_")
    assert split_reply("No tools needed.", ToolCallFormat.HERMES, ["get_current_time"]) == (
        "No tools needed.",
        (),
    )


def test_each_outcome_reads_as_the_model_should_take_it() -> None:
    records = (
        ok(),
        ToolCallRecord(TIME, CallStatus.ERROR, "Invalid timezone"),
        ToolCallRecord(TIME, CallStatus.DENIED, ""),
        ToolCallRecord(TIME, CallStatus.INTERRUPTED, ""),
        ToolCallRecord(TIME, CallStatus.REFUSED, "There is no tool named 'x'."),
    )
    assistant, *results = round_messages([ToolRound("Checking.", records)])
    assert (
        assistant.role is Role.ASSISTANT and assistant.text == "Checking." and len(assistant.tool_calls) == 5
    )
    assert [m.role for m in results] == [Role.TOOL] * 5 and all(m.tool_call_id == "c1" for m in results)
    assert [m.text for m in results] == [
        '{"datetime": "06:28"}',
        "Error: Invalid timezone",
        "The user denied this call. Answer without it.",
        "The user stopped this call before it ran.",
        "There is no tool named 'x'.",
    ]


def test_the_model_is_asked_again_with_the_results_and_the_tools() -> None:
    again = continuation(ASK, [ToolRound("", (ok(),))], TOOLS, max_rounds=8)
    assert again.tools == TOOLS and [m.role for m in again.messages] == [Role.USER, Role.ASSISTANT, Role.TOOL]


def test_at_the_round_cap_the_tools_go_and_the_model_is_told() -> None:
    rounds = [ToolRound("", (ok(ToolCall(f"c{i}", TIME.name, f'{{"n": {i}}}')),)) for i in range(2)]
    last = continuation(ASK, rounds, TOOLS, max_rounds=2)
    assert last.tools == () and last.messages[-1].text.endswith(rounds_cap_note(2))


def test_a_round_of_repeats_is_left_out_and_the_model_told_to_answer() -> None:
    repeat = ToolRound(
        "", (ToolCallRecord(ToolCall("c9", TIME.name, TIME.arguments), CallStatus.REFUSED, REPEATED),)
    )
    once = continuation(ASK, [ToolRound("", (ok(),)), repeat], TOOLS, max_rounds=8)
    assert once.tools == TOOLS  # the prompt's cached prefix, tools and all, is kept
    assert len(once.messages) == 3 and once.messages[-1].text.endswith(REPEAT_NOTE)
    twice = continuation(ASK, [ToolRound("", (ok(),)), repeat, repeat], TOOLS, max_rounds=8)
    assert twice.tools == () and len(twice.messages) == 3


def test_rounds_survive_the_store_and_damage_reads_as_none() -> None:
    rounds = (
        ToolRound("Checking.", (ok(), ToolCallRecord(TIME, CallStatus.DENIED, "no", "time", seconds=0.1234))),
        ToolRound(
            "", (ToolCallRecord(TIME, CallStatus.OK, "x" * 10, "time", truncated=True, full_chars=99),)
        ),
    )
    back = rounds_from_json(rounds_json(rounds))
    assert (
        back[0].calls[1].seconds == 0.123 and back[1].calls[0].truncated and back[1].calls[0].full_chars == 99
    )
    assert [r.text for r in back] == ["Checking.", ""] and back[0].calls[0] == ok()
    assert rounds_from_json("") == () and rounds_from_json("{broken") == () and rounds_from_json("[1]") == ()
