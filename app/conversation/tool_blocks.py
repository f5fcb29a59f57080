"""A reply's tool calls as the message view shows them (issue 29): one block per call — the
tool, its arguments, and what became of it — between the texts the model wrote around them.
Copying a reply gives those texts, not the blocks."""

from __future__ import annotations

import json
from collections.abc import Sequence

from app.conversation.tool_progress import CallStage, ToolProgress
from engine import CallStatus, ToolCall, ToolCallRecord, ToolRound

SHOWN_RESULT_CHARS = 600  # of a result, in the view (the model got up to the tool cap)
SHOWN_RESULT_LINES = 12
ASKING = "waiting for your allow"
RUNNING = "running…"

STATUS_WORDS = {
    CallStatus.OK: "done",
    CallStatus.ERROR: "failed",
    CallStatus.DENIED: "denied by you",
    CallStatus.REFUSED: "not run",
    CallStatus.INTERRUPTED: "stopped",
}


def pretty_arguments(arguments: str) -> str:
    """The call's JSON indented, as written when it is not JSON."""
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except ValueError:
        return arguments


def _fence(text: str, language: str = "") -> str:
    ticks = "```"
    while ticks in text:  # a result holding a fence of its own must not end ours
        ticks += "`"
    return f"{ticks}{language}\n{text}\n{ticks}"


def _shown_result(record: ToolCallRecord) -> str:
    text = record.result
    lines = text.splitlines()
    cut = len(text) > SHOWN_RESULT_CHARS or len(lines) > SHOWN_RESULT_LINES
    if cut:
        text = "\n".join(lines[:SHOWN_RESULT_LINES])[:SHOWN_RESULT_CHARS].rstrip() + "\n…"
    return text


def call_block(call: ToolCall, record: ToolCallRecord | None = None, state: str = "") -> str:
    """One call in Markdown: ``record`` once it is done, else ``state`` (asking, running)."""
    where = f" · {record.server}" if record is not None and record.server else ""
    if record is None:
        status = state
    else:
        status = STATUS_WORDS[record.status]
        if record.status is CallStatus.OK and record.seconds:
            status += f" in {record.seconds:.1f} s"
        if record.truncated:
            status += f", cut to fit ({record.full_chars:,} characters)"
    parts = [f"**⚙ {call.name}**{where} — {status}", _fence(pretty_arguments(call.arguments), "json")]
    if record is not None and record.result and record.status is not CallStatus.INTERRUPTED:
        parts.append(_fence(_shown_result(record)))
    return "\n\n".join(parts)


def round_markdown(round_: ToolRound, waiting: Sequence[ToolCall] = (), state: str = "") -> str:
    """A round: the model's text, then its calls (those still ``waiting`` in ``state``)."""
    parts = [round_.text.strip()] if round_.text.strip() else []
    parts += [call_block(record.call, record) for record in round_.calls]
    parts += [call_block(call, state=state if i == 0 else ASKING) for i, call in enumerate(waiting)]
    return "\n\n".join(parts)


def shown_text(rounds: Sequence[ToolRound], answer: str) -> str:
    """What the view shows of a reply: its rounds, then the answer (still streaming, maybe)."""
    if not rounds:
        return answer
    blocks = "\n\n".join(round_markdown(r) for r in rounds)
    return f"{blocks}\n\n{answer}" if answer else f"{blocks}\n\n"


def copy_text(rounds: Sequence[ToolRound], answer: str) -> str:
    """What copying a reply gives: the texts the model wrote, without the tool blocks."""
    texts = [r.text.strip() for r in rounds if r.text.strip()]
    if answer.strip():
        texts.append(answer.strip())
    return "\n\n".join(texts)


def progress_text(progress: ToolProgress) -> str:
    """A reply in flight: its rounds done, then the round it is in — the text so far, and
    once it called, each call done, asked about or running."""
    done = shown_text(progress.rounds, "")
    if not progress.pending:
        return done + progress.content
    waiting = [item for item in progress.pending[len(progress.records) :] if isinstance(item, ToolCall)]
    state = RUNNING if progress.stage is CallStage.RUNNING else ASKING
    return done + round_markdown(ToolRound(progress.content, tuple(progress.records)), waiting, state)
