"""The model's text as OpenAI's answer: reasoning split out (``reasoning_content``), tool
calls parsed into ``tool_calls`` deltas, the rest ``content``.

The engine's parsers do the reading (``ReasoningSplitter``, ``ToolCallParser``); this
turns their events into the pieces a stream sends, in order, and keeps what the whole
answer needs (the calls, the finish reason). A call's id, type and name go only in its
first piece, its argument fragments after it, never changed once sent: the shape the
openai SDK accumulates.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from app.api.mapping import OutputPlan
from engine import ContentDelta, ReasoningSplitter, StopReason, ToolCallBegin, ToolCallParser


class PieceKind(enum.Enum):
    REASONING = "reasoning"
    CONTENT = "content"
    CALL_BEGIN = "call begin"  # index, id, name
    CALL_ARGS = "call args"  # index, text: an argument fragment


@dataclass(frozen=True)
class Piece:
    kind: PieceKind
    text: str = ""
    index: int = 0
    call_id: str = ""
    name: str = ""


@dataclass
class Call:
    id: str
    name: str
    arguments: list[str] = field(default_factory=list)


class OutputShaper:
    """``feed`` each text delta, ``finish`` at the end; each returns the pieces to send."""

    def __init__(self, plan: OutputPlan) -> None:
        self._reasoning: ReasoningSplitter | None = (
            plan.traits.reasoning_splitter() if plan.traits.thinks else None
        )
        self._tools: ToolCallParser | None = None
        if plan.tool_names is not None:
            self._tools = ToolCallParser(plan.traits.tool_format, tool_names=plan.tool_names)
        self._parallel = plan.parallel_tool_calls
        self.calls: list[Call] = []
        self.content: list[str] = []
        self.reasoning: list[str] = []

    def feed(self, text: str) -> list[Piece]:
        if self._reasoning is None:
            return self._answer(text, finish=False)
        thought, answer = self._reasoning.feed(text)
        return self._thought(thought) + self._answer(answer, finish=False)

    def finish(self) -> list[Piece]:
        pieces: list[Piece] = []
        if self._reasoning is not None:
            thought, answer = self._reasoning.finish()
            pieces += self._thought(thought)
            pieces += self._answer(answer, finish=False)
        return pieces + self._answer("", finish=True)

    def finish_reason(self, reason: StopReason) -> str:
        if self.calls and reason in (StopReason.STOP_TOKEN, StopReason.STOP_STRING):
            return "tool_calls"
        return "length" if reason in (StopReason.LENGTH, StopReason.CONTEXT_FULL) else "stop"

    @property
    def plain(self) -> bool:
        """The answer is the model's text as written (nothing split out or parsed)."""
        return self._reasoning is None and self._tools is None

    def _thought(self, text: str) -> list[Piece]:
        if not text:
            return []
        self.reasoning.append(text)
        return [Piece(PieceKind.REASONING, text)]

    def _answer(self, text: str, finish: bool) -> list[Piece]:
        if self._tools is None:
            if text:
                self.content.append(text)
                return [Piece(PieceKind.CONTENT, text)]
            return []
        events = self._tools.finish() if finish else self._tools.feed(text) if text else []
        pieces = []
        for event in events:
            if isinstance(event, ContentDelta):
                if event.text:
                    self.content.append(event.text)
                    pieces.append(Piece(PieceKind.CONTENT, event.text))
            elif event.index > 0 and not self._parallel:
                continue  # parallel_tool_calls false: one call at most
            elif isinstance(event, ToolCallBegin):
                self.calls.append(Call(event.id, event.name))
                pieces.append(
                    Piece(PieceKind.CALL_BEGIN, index=event.index, call_id=event.id, name=event.name)
                )
            elif event.fragment:
                self.calls[event.index].arguments.append(event.fragment)
                pieces.append(Piece(PieceKind.CALL_ARGS, event.fragment, index=event.index))
        return pieces
