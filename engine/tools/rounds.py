"""The tool loop's values and its pure steps (issue 29): a finished reply split into its text
and calls, what became of each call (``ToolCallRecord``), a round of calls (``ToolRound``) as
the messages that go back to the model, the caps, and the rounds as JSON for the store.
The window (app/conversation/tool_turns.py) and ``hearth chat --mcp`` run the same loop on these."""

from __future__ import annotations

import enum
import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine.base.defaults import (
    DEFAULT_MAX_TOOL_CALLS_PER_ROUND,
    DEFAULT_MAX_TOOL_ROUNDS,
    DEFAULT_TOOL_CALL_TIMEOUT_S,
    DEFAULT_TOOL_RESULT_MAX_CHARS,
    DEFAULT_TOOL_START_TIMEOUT_S,
)
from engine.chat.messages import MAX_TOOL_NAME, ChatMessage, Role, ToolCall
from engine.chat.tool_calls import ToolCallBegin, ToolCallFormat, ToolCallParser, collect_output, new_call_id
from engine.requests.request import ChatRequest

REPEATED = "Not run again: this call was already made with these arguments; use its result."
REPEAT_NOTE = "[Hearth: you have this result already. No more tools: answer the user now with it.]"


class CallStatus(enum.StrEnum):
    OK = "ok"  # the tool answered
    ERROR = "error"  # it answered with an error, failed, timed out, or its server is gone
    DENIED = "denied"  # the user said no
    REFUSED = "refused"  # not run: no such tool, arguments that do not fit, a repeat, over the cap
    INTERRUPTED = "interrupted"  # the user stopped the reply before it ran


@dataclass(frozen=True)
class ToolCallRecord:
    """One call and what became of it. ``result`` is exactly the text the model gets back
    (capped: ``truncated``, with ``full_chars`` what the tool returned)."""

    call: ToolCall
    status: CallStatus
    result: str = ""
    server: str = ""
    truncated: bool = False
    full_chars: int = 0
    seconds: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", CallStatus(self.status))


@dataclass(frozen=True)
class ToolRound:
    """The model's text before its calls, and the calls in the order it made them."""

    text: str
    calls: tuple[ToolCallRecord, ...]


@dataclass(frozen=True)
class ToolLoopLimits:
    max_rounds: int = DEFAULT_MAX_TOOL_ROUNDS
    max_calls_per_round: int = DEFAULT_MAX_TOOL_CALLS_PER_ROUND
    result_max_chars: int = DEFAULT_TOOL_RESULT_MAX_CHARS
    call_timeout_s: float = DEFAULT_TOOL_CALL_TIMEOUT_S
    start_timeout_s: float = DEFAULT_TOOL_START_TIMEOUT_S

    def admit(
        self, calls: Sequence[ToolCall], earlier: Sequence[ToolRound] = ()
    ) -> tuple[ToolCall | ToolCallRecord, ...]:
        """``calls`` in order, each either to do or refused: past the per-round cap, or the
        same tool with the same arguments as a call this reply already made (small models
        loop on a call whose result they were given)."""
        seen = {_same(record.call) for round_ in earlier for record in round_.calls}
        out: list[ToolCall | ToolCallRecord] = []
        for index, call in enumerate(calls):
            if index >= self.max_calls_per_round:
                note = f"Not run: at most {self.max_calls_per_round} calls are run per turn."
                out.append(ToolCallRecord(call, CallStatus.REFUSED, note))
            elif _same(call) in seen:
                out.append(ToolCallRecord(call, CallStatus.REFUSED, REPEATED))
            else:
                seen.add(_same(call))
                out.append(call)
        return tuple(out)


def _same(call: ToolCall) -> tuple[str, str]:
    arguments = call.parsed_arguments()
    key = arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True)
    return call.name, key


def cap_result(text: str, max_chars: int) -> tuple[str, bool]:
    """``text`` as the model may get it: cut to ``max_chars`` with a line saying so and the full
    size (True when cut)."""
    if len(text) <= max_chars:
        return text, False
    note = f"\n[Cut by Hearth: the result was {len(text):,} characters; the first {max_chars:,} are shown.]"
    return text[:max_chars] + note, True


def split_reply(
    text: str, fmt: ToolCallFormat, tool_names: Collection[str] | None = None
) -> tuple[str, tuple[ToolCall, ...]]:
    """A finished reply's content and the calls it made (each given an id here)."""
    parser = ToolCallParser(fmt, tool_names=tool_names)
    events = parser.feed(text) + parser.finish()
    content, calls = collect_output(events)
    ids = [e.id for e in events if isinstance(e, ToolCallBegin)]
    return content, tuple(made_call(i, n, a) for i, (n, a) in zip(ids, calls, strict=True))


def made_call(call_id: str, name: str, arguments: str) -> ToolCall:
    """A call as a model wrote it, made a valid ``ToolCall`` (a name past OpenAI's 64
    characters is cut: no tool has it, so the call is refused by name, not a crash)."""
    return ToolCall(call_id or new_call_id(), (name or "?")[:MAX_TOOL_NAME], arguments or "{}")


def round_messages(rounds: Sequence[ToolRound], note: str = "") -> tuple[ChatMessage, ...]:
    """What the model is sent of ``rounds``: its own turn with its calls, then one tool
    message per call; ``note`` is added to the last result (the round cap, said)."""
    messages: list[ChatMessage] = []
    for round_ in rounds:
        if not round_.calls:
            continue
        calls = tuple(record.call for record in round_.calls)
        messages.append(ChatMessage(Role.ASSISTANT, round_.text, tool_calls=calls))
        for record in round_.calls:
            text = tool_message_text(record)
            messages.append(ChatMessage(Role.TOOL, text, tool_call_id=record.call.id, name=record.call.name))
    if note and messages and messages[-1].role is Role.TOOL:
        last = messages[-1]
        messages[-1] = replace(last, text=f"{last.text}\n\n{note}")
    return tuple(messages)


def tool_message_text(record: ToolCallRecord) -> str:
    """A call's result as the model reads it: what the tool said, or why there is nothing."""
    if record.status is CallStatus.OK:
        return record.result
    if record.status is CallStatus.ERROR:
        return f"Error: {record.result}" if record.result else "Error: the tool failed."
    if record.status is CallStatus.INTERRUPTED:
        return record.result or "The user stopped this call before it ran."
    if record.status is CallStatus.DENIED:
        return record.result or "The user denied this call. Answer without it."
    return record.result or "Not run."


def rounds_cap_note(max_rounds: int) -> str:
    return (
        f"[Hearth: the limit of {max_rounds} rounds of tool calls is reached. "
        "No more tools can be called: answer now with what you have.]"
    )


def rounds_cap_line(max_rounds: int) -> str:
    """What the user is told when a reply reaches the cap (the model is told ``rounds_cap_note``)."""
    return (
        f"This reply reached the limit of {max_rounds} rounds of tool calls: "
        "the model was asked to answer without tools."
    )


def continuation(
    request: ChatRequest,
    rounds: Sequence[ToolRound],
    tools: Sequence[dict[str, Any]],
    max_rounds: int | None = None,
) -> ChatRequest:
    """The request that asks the model again after ``rounds``: its messages and the rounds',
    ``tools`` offered again; with ``max_rounds`` reached, none, and the model is told why.
    Rounds that only repeated earlier calls are left out and the model told to answer: small
    models (Qwen2.5 1.5B, greedy) call again on a result they were given, then fall silent
    when told "not run again", but answer when the result is the last thing they read. The
    tools stay offered (the prompt's cached prefix with them) unless it repeats twice."""
    capped = max_rounds is not None and len(rounds) >= max_rounds
    note = rounds_cap_note(max_rounds) if capped and max_rounds is not None else ""
    shown = list(rounds)
    repeats = 0
    while shown and _only_repeats(shown[-1]):
        shown.pop()
        repeats += 1
    if repeats:
        note = note or REPEAT_NOTE
        capped = capped or repeats > 1
    messages = (*request.messages, *round_messages(shown, note))
    return replace(request, messages=messages, tools=() if capped else tuple(tools), assistant_prefix="")


def _only_repeats(round_: ToolRound) -> bool:
    return bool(round_.calls) and all(
        record.status is CallStatus.REFUSED and record.result == REPEATED for record in round_.calls
    )


# -- the store's JSON ------------------------------------------------------------------------


def rounds_json(rounds: Sequence[ToolRound]) -> str:
    """``rounds`` as one JSON object (the store keeps it with the reply)."""
    return json.dumps(
        {
            "rounds": [
                {
                    "text": r.text,
                    "calls": [
                        {
                            "id": c.call.id,
                            "name": c.call.name,
                            "arguments": c.call.arguments,
                            "status": c.status.value,
                            "result": c.result,
                            "server": c.server,
                            "truncated": c.truncated,
                            "full_chars": c.full_chars,
                            "seconds": round(c.seconds, 3),
                        }
                        for c in r.calls
                    ],
                }
                for r in rounds
            ]
        },
        ensure_ascii=False,
    )


def rounds_from_json(text: str) -> tuple[ToolRound, ...]:
    """What ``rounds_json`` wrote ("" or anything unreadable: no rounds, never an error: a
    damaged row must not stop a conversation from opening)."""
    try:
        value = json.loads(text) if text else {}
        return tuple(
            ToolRound(
                str(r.get("text", "")),
                tuple(
                    ToolCallRecord(
                        ToolCall(str(c["id"]), str(c["name"]), str(c.get("arguments", "{}"))),
                        CallStatus(c.get("status", "error")),
                        str(c.get("result", "")),
                        str(c.get("server", "")),
                        bool(c.get("truncated", False)),
                        int(c.get("full_chars", 0)),
                        float(c.get("seconds", 0.0)),
                    )
                    for c in r.get("calls", ())
                ),
            )
            for r in value.get("rounds", ())
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        return ()
