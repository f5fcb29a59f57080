"""Tool calls read out of a model's output as it streams, in the format its template taught it.

``ToolCallParser(fmt).feed(text)`` returns events: ``ContentDelta`` (text for the user),
``ToolCallBegin`` (a call's index, id and function name, once) and ``ToolCallArgs`` (a
fragment of that call's arguments). A call's fragments, joined, are the arguments the model
wrote, as a JSON object's text (near-JSON rewritten as JSON); a fragment is never taken
back. Text that may be the start of a call is held back until it resolves, so a call's
syntax never shows up as content, and the events do not depend on how the output was
cut into deltas (only how finely they are split). Pure: imports neither llama.cpp nor Qt.

Formats (``ToolCallFormat``):

- ``HERMES`` (Qwen 2.5/3, Hermes, the fallback prompt of ``tool_prompt``):
  ``<tool_call>\\n{"name": "f", "arguments": {...}}\\n</tool_call>``, one block per call,
  after any text (a missing ``</tool_call>`` is forgiven); and, as llama.cpp's Hermes parser
  allows, a reply that starts with the call's JSON bare or fenced in ``` (small Qwen coders
  write that), read as ``GENERIC``, and further calls after it (bare, after ``,``/``;``/a
  line break, or fenced again).
- ``LLAMA3_JSON`` (Llama 3.1-3.3): the reply is ``{"name": "f", "parameters": {...}}``
  (``"arguments"`` accepted too), maybe after ``<|python_tag|>``, calls separated by ``;``
  or whitespace. A reply that does not start with ``{`` is content.
- ``MISTRAL``: ``[TOOL_CALLS] [{"name": "f", "arguments": {...}}, ...]``, or the newer
  ``[TOOL_CALLS]f[ARGS]{...}``.
- ``GENERIC``: a reply that is one JSON value (fenced in ``` or not) holding calls: an
  object with ``name`` and ``arguments``/``parameters``, OpenAI's ``{"function": {...}}``
  shape, ``{"tool_calls": [...]}`` or a list of calls. Arguments arrive in one fragment.
- ``NONE``: everything is content.

For the bare-JSON formats (``LLAMA3_JSON``, ``GENERIC``) pass ``tool_names``: a JSON reply
naming no offered tool is then content, not a call.

Near-JSON (``engine/chat/near_json.py``: doubled braces ``{{...}}`` copied from a template,
single quotes, Python's ``True``/``False``/``None``, bare keys, trailing commas) is read
where a call is read whole: a reply-start call, a ``<tool_call>`` block that is not JSON
(held until its closing tag, then read at once), arguments that are not an object literal.
Arguments that start as JSON (``{"`` or ``{}``) stream as written, a trailing comma dropped
and Python's literals written as JSON's; ``{'``, ``{{`` or another start is read whole.

The steps of each format are ``engine/chat/tool_call_formats.py``; reading a call from a
whole JSON value, ``engine/chat/tool_call_values.py``.
"""

from __future__ import annotations

import enum
import secrets
import string
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from engine.chat.json_scan import CallScanner, CallState, ValueScanner
from engine.chat.tool_call_formats import HERMES_OPEN, FormatSteps, Phase, held_prefix


class ToolCallFormat(enum.StrEnum):
    HERMES = "hermes"
    LLAMA3_JSON = "llama3_json"
    MISTRAL = "mistral"
    GENERIC = "generic"
    NONE = "none"


@dataclass(frozen=True)
class ContentDelta:
    text: str


@dataclass(frozen=True)
class ToolCallBegin:
    index: int
    id: str
    name: str


@dataclass(frozen=True)
class ToolCallArgs:
    index: int
    fragment: str


OutputEvent = ContentDelta | ToolCallBegin | ToolCallArgs

_ALNUM = string.ascii_letters + string.digits


def new_call_id() -> str:
    """``call_`` and 24 random letters and digits, as OpenAI's ids look."""
    return "call_" + "".join(secrets.choice(_ALNUM) for _ in range(24))


class ToolCallParser(FormatSteps):
    """Incremental: ``feed`` each delta of the output, ``finish`` at its end."""

    def __init__(
        self,
        fmt: ToolCallFormat,
        *,
        tool_names: Collection[str] | None = None,
        make_id: Callable[[], str] = new_call_id,
    ) -> None:
        self.format = ToolCallFormat(fmt)
        self.tool_names = frozenset(tool_names) if tool_names is not None else None
        self._make_id = make_id
        self._buffer = ""
        self._events: list[OutputEvent] = []
        self._calls = 0
        self._space = ""  # whitespace at the end of the content, held until more content follows
        self._strip_lead = False  # content right after a call starts at its first non-space
        self._scanner: CallScanner | None = None
        self._held = ""  # what may be a call, given back as content if it is not one
        self._value: ValueScanner | None = None  # MISTRAL's [ARGS] value, GENERIC's reply
        self._fenced = False  # GENERIC: the reply opened a ``` fence
        self._in_list = False  # MISTRAL: inside [TOOL_CALLS] [...]
        self._after_marker = False  # MISTRAL: right after [TOOL_CALLS]
        fmt = self.format
        self._phase = (
            Phase.CONTENT
            if fmt is ToolCallFormat.NONE
            else Phase.START
            if fmt is ToolCallFormat.HERMES
            else Phase.TEXT
        )
        # After a reply-start JSON value (GENERIC's, or HERMES's bare/fenced call): what follows.
        self._rest_phase = Phase.TEXT if fmt is ToolCallFormat.HERMES else Phase.CONTENT
        self._json_mode = False  # in the reply-start JSON value or its closing fence
        self._json_skip = 0  # the held separator before a further bare call ("," or ";")

    @property
    def calls(self) -> int:
        """How many tool calls have begun."""
        return self._calls

    # -- events -----------------------------------------------------------------------

    def _content(self, text: str) -> None:
        if not text:
            return
        if self._strip_lead:
            text = text.lstrip()
            if not text:
                return
            self._strip_lead = False
        body = text.rstrip()
        if body:
            self._events.append(ContentDelta(self._space + body))
            self._space = text[len(body) :]
        else:
            self._space += text

    def _begin(self, name: str) -> None:
        self._space = ""  # whitespace before a call is not content
        self._events.append(ToolCallBegin(self._calls, self._make_id(), name))
        self._calls += 1

    def _args(self, fragment: str) -> None:
        self._events.append(ToolCallArgs(self._calls - 1, fragment))

    def _take(self) -> list[OutputEvent]:
        events, self._events = self._events, []
        merged: list[OutputEvent] = []
        for event in events:
            last = merged[-1] if merged else None
            if isinstance(event, ContentDelta) and isinstance(last, ContentDelta):
                merged[-1] = ContentDelta(last.text + event.text)
            elif (
                isinstance(event, ToolCallArgs)
                and isinstance(last, ToolCallArgs)
                and last.index == event.index
            ):
                merged[-1] = ToolCallArgs(event.index, last.fragment + event.fragment)
            else:
                merged.append(event)
        return merged

    # -- feeding ------------------------------------------------------------------------

    def feed(self, text: str) -> list[OutputEvent]:
        self._buffer += text
        while self._buffer and self._step():
            pass
        return self._take()

    def finish(self) -> list[OutputEvent]:
        """The end of the output: held text is content, an unfinished call keeps what it has."""
        while self._buffer and self._step():
            pass
        rest, self._buffer = self._buffer, ""
        scanner = self._scanner
        if self._phase is Phase.CALL and scanner is not None:
            scanner.finish(self._args)
            if not scanner.begun:
                self._content(self._held + rest)
        elif self._phase is Phase.ARGS:
            if self._scanner is not None and not self._scanner.args_fragments:
                self._args("{}")
        elif self._phase is Phase.LENIENT:
            self._held += rest
            self._resolve_lenient("")
        elif self._phase is Phase.JSON and self._value is not None:
            self._finish_json(rest)
        elif self._phase is not Phase.SKIP:
            self._content(self._held + rest)
        self._held = ""
        self._scanner = None
        self._phase = Phase.CONTENT
        if self._space and not self._calls:
            self._events.append(ContentDelta(self._space))
        self._space = ""
        return self._take()

    def _step(self) -> bool:
        """Advance on the buffer; False when more text is needed."""
        phase = self._phase
        if phase is Phase.CONTENT:
            self._content(self._buffer)
            self._buffer = ""
            return False
        if phase is Phase.CALL:
            return self._step_call()
        fmt = self.format
        if phase is Phase.START or self._json_mode:
            return self._step_generic(phase)
        if fmt is ToolCallFormat.HERMES:
            return self._step_hermes(phase)
        if fmt is ToolCallFormat.LLAMA3_JSON:
            return self._step_llama3(phase)
        if fmt is ToolCallFormat.MISTRAL:
            return self._step_mistral(phase)
        return self._step_generic(phase)

    def _find_tag(self, tag: str) -> bool:
        """Content up to ``tag``; True (tag consumed) when it is there, else the text that
        cannot start it goes out as content and the rest is held."""
        index = self._buffer.find(tag)
        if index >= 0:
            self._content(self._buffer[:index])
            self._buffer = self._buffer[index + len(tag) :]
            return True
        hold = held_prefix(self._buffer, tag)
        self._content(self._buffer[: len(self._buffer) - hold])
        self._buffer = self._buffer[len(self._buffer) - hold :]
        return False

    def _start_call(self, held: str, strict: bool) -> None:
        names = self.tool_names if strict else None
        self._scanner = CallScanner(lambda name: names is None or name in names)
        self._held = held
        self._phase = Phase.CALL

    def _step_call(self) -> bool:
        scanner = self._scanner
        assert scanner is not None
        taken = scanner.feed(self._buffer, self._begin, self._args)
        self._held += self._buffer[:taken]
        self._buffer = self._buffer[taken:]
        if not scanner.finished:
            return False
        held, self._held = self._held, ""
        self._scanner = None
        fmt = self.format
        if scanner.state is CallState.REJECTED and fmt is ToolCallFormat.HERMES and held.startswith(
            HERMES_OPEN
        ):  # not JSON: maybe near-JSON, read when the block is whole
            self._held = held
            self._phase = Phase.LENIENT
            return True
        if scanner.state is CallState.REJECTED:  # not a call: its text is content
            self._phase = (
                Phase.CONTENT if fmt in (ToolCallFormat.LLAMA3_JSON, ToolCallFormat.GENERIC) else Phase.TEXT
            )
            self._in_list = False
            self._content(held)
            return True
        self._strip_lead = True
        if fmt is ToolCallFormat.HERMES:
            self._phase = Phase.SKIP if scanner.broken else Phase.CLOSE
        elif fmt is ToolCallFormat.MISTRAL:
            self._phase = Phase.BETWEEN if self._in_list and not scanner.broken else Phase.TEXT
            self._in_list = self._in_list and not scanner.broken
        else:  # LLAMA3_JSON
            self._phase = Phase.CONTENT if scanner.broken else Phase.BETWEEN
        return True


def parse_tool_calls(
    text: str, fmt: ToolCallFormat, tool_names: Collection[str] | None = None
) -> tuple[str, list[tuple[str, str]]]:
    """A whole output at once: its content and its calls as ``(name, arguments)``."""
    parser = ToolCallParser(fmt, tool_names=tool_names, make_id=lambda: "")
    events = parser.feed(text) + parser.finish()
    return collect_output(events)


def collect_output(events: Sequence[OutputEvent]) -> tuple[str, list[tuple[str, str]]]:
    """A parser's events put together: the content, and each call as ``(name, arguments)``."""
    content = "".join(e.text for e in events if isinstance(e, ContentDelta))
    calls: list[list[str]] = []
    for event in events:
        if isinstance(event, ToolCallBegin):
            calls.append([event.name, ""])
        elif isinstance(event, ToolCallArgs):
            calls[event.index][1] += event.fragment
    return content, [(name, arguments) for name, arguments in calls]
