"""One reply's tool loop as it goes (issue 29): the tools it was offered, the rounds of calls
done, the round it is in — the model's text streaming with its calls held back from the view,
then each call asked about, run, recorded — and what of it the store and the model get."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine import (
    CallStatus,
    ContentDelta,
    ToolCall,
    ToolCallArgs,
    ToolCallBegin,
    ToolCallFormat,
    ToolCallParser,
    ToolCallRecord,
    ToolRound,
    made_call,
)

STOPPED = "Stopped before it ran."
STOPPED_RUNNING = "Stopped while it ran: its result was not waited for."


class CallStage(enum.Enum):
    """Where the round's next call is."""

    ASKING = "asking"  # the approval bar waits for the user
    RUNNING = "running"  # on the server


@dataclass(eq=False)
class ToolProgress:
    """``offered``: the OpenAI tool specs the request carries ("" names: none offered any more,
    the round cap reached); ``rounds``: those finished (a continued reply's earlier ones first)."""

    offered: tuple[dict[str, Any], ...]
    fmt: ToolCallFormat
    rounds: list[ToolRound] = field(default_factory=list)
    content: str = ""  # the round's text so far, its calls taken out
    pending: list[ToolCall | ToolCallRecord] = field(default_factory=list)  # this round's, in order
    records: list[ToolCallRecord] = field(default_factory=list)  # this round's, done
    stage: CallStage | None = None
    # The names first offered: past the round cap, calls the model still writes are held back
    # from its text (and not run) rather than shown as markup.
    known: tuple[str, ...] = ()
    _parser: ToolCallParser | None = None
    _calls: list[list[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.known = self.known or self.names
        self.new_round()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(spec["function"]["name"] for spec in self.offered)

    def new_round(self) -> None:
        """The model writes again: its text starts empty, parsed for calls from the start."""
        self.content = ""
        self.pending, self.records, self.stage = [], [], None
        self._calls = []
        self._parser = ToolCallParser(self.fmt, tool_names=self.known) if self.known else None

    @property
    def answer(self) -> str:
        """The reply's own text: none while the round's calls are pending, whose text
        is saved with the round (so a reply cut off there does not hold it twice)."""
        return "" if self.pending else self.content

    def feed(self, text: str) -> str:
        """The reply's answer text as it streams: what of it is content (shown and saved)."""
        if self._parser is None:
            self.content += text
            return text
        return self._take(self._parser.feed(text))

    def finish(self) -> tuple[str, tuple[ToolCall, ...]]:
        """The round written: its last content, and the calls it made (none past the cap)."""
        tail = self._take(self._parser.finish()) if self._parser is not None else ""
        calls = tuple(made_call(call_id, name, args) for call_id, name, args in self._calls)
        return tail, calls if self.offered else ()

    def _take(self, events: Sequence[object]) -> str:
        shown = ""
        for event in events:
            if isinstance(event, ContentDelta):
                shown += event.text
            elif isinstance(event, ToolCallBegin):
                self._calls.append([event.id, event.name, ""])
            elif isinstance(event, ToolCallArgs):
                self._calls[event.index][2] += event.fragment
        self.content += shown
        return shown

    # -- the calls of a round ---------------------------------------------------------------

    def next_call(self) -> ToolCall | None:
        """The first call of the round not yet done (records admitted as refused are taken)."""
        while len(self.records) < len(self.pending):
            item = self.pending[len(self.records)]
            if isinstance(item, ToolCallRecord):
                self.records.append(item)
                continue
            return item
        return None

    def record(self, record: ToolCallRecord) -> None:
        self.records.append(record)
        self.stage = None

    def close_round(self) -> None:
        self.rounds.append(ToolRound(self.content, tuple(self.records)))
        self.new_round()

    def all_rounds(self, stopped: bool = False) -> tuple[ToolRound, ...]:
        """The rounds so far, the one in progress included with its calls not done marked
        interrupted (``stopped``: the user stopped the reply; else as saved mid-round, where
        an app killed now reopens them as interrupted)."""
        if not self.pending:
            return tuple(self.rounds)
        done = list(self.records)
        for index, item in enumerate(self.pending[len(done):]):
            call = item.call if isinstance(item, ToolCallRecord) else item
            why = STOPPED_RUNNING if index == 0 and self.stage is CallStage.RUNNING else STOPPED
            done.append(ToolCallRecord(call, CallStatus.INTERRUPTED, why if stopped else ""))
        return (*self.rounds, ToolRound(self.content, tuple(done)))
