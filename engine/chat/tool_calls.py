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
"""

from __future__ import annotations

import enum
import json
import secrets
import string
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from engine.chat.json_scan import WS, CallScanner, CallState, Scan, ValueScanner, arguments_text
from engine.chat.messages import MAX_TOOL_NAME
from engine.chat.near_json import MAX_CHARS, loads_cut_near_json, loads_near_json


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




def _held_prefix(text: str, tag: str) -> int:
    for k in range(min(len(text), len(tag) - 1), 0, -1):
        if tag.startswith(text[-k:]):
            return k
    return 0


# --------------------------------------------------------------------------- formats


class _P(enum.Enum):
    START = "start"  # HERMES: the reply's start, where a bare or fenced JSON call may come
    TEXT = "text"  # content, watching for a call's start
    CALL = "call"  # inside a call object
    CLOSE = "close"  # after a call object: its closing tag, if the format has one
    SKIP = "skip"  # a broken call: dropped up to its closing tag
    LENIENT = "lenient"  # HERMES: a block that is not JSON, read whole at its closing tag
    BETWEEN = "between"  # between calls of a list
    NAME = "name"  # MISTRAL's [TOOL_CALLS]name[ARGS]
    ARGS = "args"  # MISTRAL's arguments after [ARGS]
    JSON = "json"  # GENERIC: the whole reply's JSON value
    CONTENT = "content"  # the rest is content, nothing more to look for


_HERMES_OPEN, _HERMES_CLOSE = "<tool_call>", "</tool_call>"
_PYTHON_TAG = "<|python_tag|>"
_MISTRAL_OPEN, _MISTRAL_ARGS = "[TOOL_CALLS]", "[ARGS]"
_FENCE = "```"


class ToolCallParser:
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
            _P.CONTENT
            if fmt is ToolCallFormat.NONE
            else _P.START
            if fmt is ToolCallFormat.HERMES
            else _P.TEXT
        )
        # After a reply-start JSON value (GENERIC's, or HERMES's bare/fenced call): what follows.
        self._rest_phase = _P.TEXT if fmt is ToolCallFormat.HERMES else _P.CONTENT
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
        if self._phase is _P.CALL and scanner is not None:
            scanner.finish(self._args)
            if not scanner.begun:
                self._content(self._held + rest)
        elif self._phase is _P.ARGS:
            if self._scanner is not None and not self._scanner.args_fragments:
                self._args("{}")
        elif self._phase is _P.LENIENT:
            self._held += rest
            self._resolve_lenient("")
        elif self._phase is _P.JSON and self._value is not None:
            self._finish_json(rest)
        elif self._phase is not _P.SKIP:
            self._content(self._held + rest)
        self._held = ""
        self._scanner = None
        self._phase = _P.CONTENT
        if self._space and not self._calls:
            self._events.append(ContentDelta(self._space))
        self._space = ""
        return self._take()

    def _step(self) -> bool:
        """Advance on the buffer; False when more text is needed."""
        phase = self._phase
        if phase is _P.CONTENT:
            self._content(self._buffer)
            self._buffer = ""
            return False
        if phase is _P.CALL:
            return self._step_call()
        fmt = self.format
        if phase is _P.START or self._json_mode:
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
        hold = _held_prefix(self._buffer, tag)
        self._content(self._buffer[: len(self._buffer) - hold])
        self._buffer = self._buffer[len(self._buffer) - hold :]
        return False

    def _start_call(self, held: str, strict: bool) -> None:
        names = self.tool_names if strict else None
        self._scanner = CallScanner(lambda name: names is None or name in names)
        self._held = held
        self._phase = _P.CALL

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
            _HERMES_OPEN
        ):  # not JSON: maybe near-JSON, read when the block is whole
            self._held = held
            self._phase = _P.LENIENT
            return True
        if scanner.state is CallState.REJECTED:  # not a call: its text is content
            self._phase = (
                _P.CONTENT if fmt in (ToolCallFormat.LLAMA3_JSON, ToolCallFormat.GENERIC) else _P.TEXT
            )
            self._in_list = False
            self._content(held)
            return True
        self._strip_lead = True
        if fmt is ToolCallFormat.HERMES:
            self._phase = _P.SKIP if scanner.broken else _P.CLOSE
        elif fmt is ToolCallFormat.MISTRAL:
            self._phase = _P.BETWEEN if self._in_list and not scanner.broken else _P.TEXT
            self._in_list = self._in_list and not scanner.broken
        else:  # LLAMA3_JSON
            self._phase = _P.CONTENT if scanner.broken else _P.BETWEEN
        return True

    # HERMES ------------------------------------------------------------------------------

    def _step_hermes(self, phase: _P) -> bool:
        if phase is _P.LENIENT:
            return self._step_lenient()
        if phase is _P.TEXT:
            if self._find_tag(_HERMES_OPEN):
                self._start_call(_HERMES_OPEN, strict=False)
                return True
            return False
        if phase is _P.CLOSE:
            stripped = self._buffer.lstrip(WS)
            if not stripped or (_HERMES_CLOSE.startswith(stripped) and stripped != _HERMES_CLOSE):
                self._buffer = stripped
                return False
            if stripped.startswith(_HERMES_CLOSE):
                stripped = stripped[len(_HERMES_CLOSE) :]
            self._buffer = stripped  # (no closing tag: carry on with the text)
            self._phase = _P.TEXT
            return True
        # SKIP: a broken call's text up to its closing tag is dropped.
        index = self._buffer.find(_HERMES_CLOSE)
        if index >= 0:
            self._buffer = self._buffer[index + len(_HERMES_CLOSE) :]
            self._phase = _P.TEXT
            return True
        hold = _held_prefix(self._buffer, _HERMES_CLOSE)
        self._buffer = self._buffer[len(self._buffer) - hold :]
        return False

    def _step_lenient(self) -> bool:
        """A ``<tool_call>`` block held whole, then read as near-JSON (``near_json``); its
        closing tag missing, the next block's opening ends it."""
        ends = [i for i in (self._buffer.find(_HERMES_CLOSE), self._buffer.find(_HERMES_OPEN)) if i >= 0]
        index = min(ends, default=-1)
        if index < 0:
            hold = max(_held_prefix(self._buffer, _HERMES_CLOSE), _held_prefix(self._buffer, _HERMES_OPEN))
            self._held += self._buffer[: len(self._buffer) - hold]
            self._buffer = self._buffer[len(self._buffer) - hold :]
            if len(self._held) > MAX_CHARS:  # too long to be a call: content
                self._content(self._held)
                self._held = ""
                self._phase = _P.TEXT
            return False
        self._held += self._buffer[:index]
        close = _HERMES_CLOSE if self._buffer.startswith(_HERMES_CLOSE, index) else ""
        self._buffer = self._buffer[index + len(close) :]
        self._resolve_lenient(close)
        return True

    def _resolve_lenient(self, close: str) -> None:
        block, self._held = self._held, ""
        calls = _generic_calls(_unfenced(block[len(_HERMES_OPEN) :]), None)
        self._phase = _P.TEXT
        if not calls:
            self._content(block + close)
            return
        for name, arguments in calls:
            self._begin(name)
            self._args(arguments)
        self._strip_lead = True

    # LLAMA3_JSON -----------------------------------------------------------------------

    def _step_llama3(self, phase: _P) -> bool:
        stripped = self._buffer.lstrip(WS)
        if not stripped:
            return False  # whitespace: held until it is known what follows
        space = self._buffer[: len(self._buffer) - len(stripped)]
        if phase is _P.TEXT:  # the start of the reply
            if stripped.startswith(_PYTHON_TAG):
                self._held += space + _PYTHON_TAG
                self._buffer = stripped[len(_PYTHON_TAG) :]
                return True
            if _PYTHON_TAG.startswith(stripped):
                return False
            if stripped[0] == "{":
                self._buffer = stripped
                self._start_call(self._held + space, strict=True)
                return True
            self._buffer, self._held = self._held + self._buffer, ""
            self._phase = _P.CONTENT
            return True
        # BETWEEN calls: ";" or whitespace, then another call or the end.
        self._buffer = stripped
        if stripped[0] == ";":
            self._buffer = stripped[1:]
        elif stripped[0] == "{":
            self._start_call("", strict=True)
        else:
            self._phase = _P.CONTENT
        return True

    # MISTRAL ---------------------------------------------------------------------------

    def _step_mistral(self, phase: _P) -> bool:
        if phase is _P.TEXT:
            if self._find_tag(_MISTRAL_OPEN):
                self._phase = _P.BETWEEN
                self._after_marker = True
                self._in_list = False
                return True
            return False
        if phase is _P.NAME:
            return self._step_mistral_name()
        if phase is _P.ARGS:
            return self._step_mistral_args()
        # BETWEEN: after [TOOL_CALLS], or between the calls of its list.
        stripped = self._buffer.lstrip(WS)
        if not stripped:
            return False
        self._buffer = stripped
        c = stripped[0]
        if self._after_marker:
            self._after_marker = False
            if c == "[":
                self._in_list = True
                self._buffer = stripped[1:]
            elif c == "{":
                self._start_call("", strict=False)
            else:
                self._phase = _P.NAME
            return True
        if self._in_list and c == ",":
            self._buffer = stripped[1:]
            return True
        if self._in_list and c == "{":
            self._start_call("", strict=False)
            return True
        if self._in_list and c == "]":
            self._buffer = stripped[1:]
        self._in_list = False
        self._phase = _P.TEXT
        return True

    def _step_mistral_name(self) -> bool:
        """``[TOOL_CALLS]name[ARGS]``: a function name, then its arguments."""
        buffer = self._buffer
        end = 0
        while end < len(buffer) and (buffer[end].isalnum() or buffer[end] in "_-."):
            end += 1
        if end == len(buffer) and end <= _MAX_NAME:
            return False
        tail = buffer[end:]
        if 0 < end <= _MAX_NAME and tail.startswith(_MISTRAL_ARGS):
            self._begin(buffer[:end])
            self._buffer = tail[len(_MISTRAL_ARGS) :]
            self._scanner = CallScanner(lambda _name: True)
            self._value = None
            self._phase = _P.ARGS
            return True
        if 0 < end <= _MAX_NAME and _MISTRAL_ARGS.startswith(tail):
            return False
        self._content(_MISTRAL_OPEN)  # not a call after all
        self._phase = _P.TEXT
        return True

    def _step_mistral_args(self) -> bool:
        scanner = self._scanner
        assert scanner is not None
        if self._value is None:
            stripped = self._buffer.lstrip(WS)
            if not stripped:
                return False
            self._buffer = stripped
            self._value = ValueScanner()
        taken = 0
        done = False
        for c in self._buffer:
            result = self._value.push(c)
            if result in (Scan.ERROR, Scan.END_BEFORE):
                done = True
                break
            taken += 1
            if result is Scan.END_WITH:
                done = True
                break
        if taken:
            self._args(self._buffer[:taken])
            scanner.args_fragments += 1
        self._buffer = self._buffer[taken:]
        if not done:
            return False
        if not scanner.args_fragments:
            self._args("{}")
        self._value = None
        self._scanner = None
        self._phase = _P.TEXT
        self._strip_lead = True
        return True

    # GENERIC ---------------------------------------------------------------------------

    def _step_generic(self, phase: _P) -> bool:
        if phase in (_P.TEXT, _P.START):  # the start of the reply
            stripped = self._buffer.lstrip(WS)
            if not stripped:
                return False
            space = self._buffer[: len(self._buffer) - len(stripped)]
            if not self._fenced and _FENCE.startswith(stripped[:3]) and len(stripped) < 3:
                return False
            if not self._fenced and stripped.startswith(_FENCE):
                line_end = stripped.find("\n")
                if line_end < 0:
                    return False
                if stripped[len(_FENCE) : line_end].strip().lower() in ("", "json"):
                    self._fenced = True
                    self._json_mode = True
                    self._held += space + stripped[: line_end + 1]
                    self._buffer = stripped[line_end + 1 :]
                    return True
            elif stripped[0] in "{[":
                self._held += space
                self._buffer = stripped
                self._value = ValueScanner()
                self._phase = _P.JSON
                self._json_mode = True
                return True
            self._buffer, self._held = self._held + self._buffer, ""
            self._leave_json()
            return True
        if phase is _P.JSON:
            return self._step_generic_json()
        # CLOSE: after the JSON, a fenced reply's closing fence is not content.
        stripped = self._buffer.lstrip(WS)
        if self._fenced:
            if not stripped or (_FENCE.startswith(stripped) and stripped != _FENCE):
                return False
            if stripped.startswith(_FENCE):
                self._buffer = stripped[len(_FENCE) :]
                self._fenced = self._json_mode = False
                self._phase = _P.START  # another call may follow, fenced or bare
                return True
        else:  # another bare call may follow, after "," or ";" or a line break
            rest = stripped[1:].lstrip(WS) if stripped[:1] in (",", ";") else stripped
            if not rest:
                return False
            if rest[0] == "{":
                separator = self._buffer[: len(self._buffer) - len(rest)]
                self._held, self._json_skip = separator, len(separator)
                self._buffer = rest
                self._value = ValueScanner()
                self._phase = _P.JSON
                return True
        self._leave_json()
        return True

    def _leave_json(self) -> None:
        self._json_skip = 0
        self._json_mode = False
        self._fenced = False
        self._value = None
        self._phase = self._rest_phase

    def _step_generic_json(self) -> bool:
        assert self._value is not None
        taken = 0
        ended = False
        for c in self._buffer:
            result = self._value.push(c)
            if result is Scan.ERROR:
                break
            taken += 1
            if result is Scan.END_WITH:
                ended = True
                break
        self._held += self._buffer[:taken]
        self._buffer = self._buffer[taken:]
        if not ended and not self._buffer:
            return False
        calls = _generic_calls(self._json_text(), self.tool_names) if ended else None
        if not calls:
            self._buffer, self._held = self._held + self._buffer, ""
            self._leave_json()
            return True
        self._held = ""
        for name, arguments in calls:
            self._begin(name)
            self._args(arguments)
        self._strip_lead = True
        self._phase = _P.CLOSE
        return True

    def _finish_json(self, rest: str) -> None:
        """The output ended inside the reply-start JSON value: near-JSON with a brace short
        (``{{...}``, as Qwen2.5-Coder writes after a tool result), a closing tag after it, or
        a call cut off by the token limit after its arguments (Qwen2.5-Coder goes on with a
        made-up ``"response"``)."""
        self._held += rest
        text = self._json_text().rstrip(WS)
        for tail in (_HERMES_CLOSE, _FENCE):
            if text.endswith(tail):
                text = text[: -len(tail)].rstrip(WS)
        calls = _generic_calls(text, self.tool_names) or _cut_call(text, self.tool_names)
        if not calls:
            self._content(self._held)
            return
        for name, arguments in calls:
            self._begin(name)
            self._args(arguments)

    def _json_text(self) -> str:
        text = self._held[self._json_skip :].lstrip(WS)
        if self._fenced:
            text = text[text.find("\n") + 1 :]
        return text


_MAX_NAME = MAX_TOOL_NAME  # a longer run of name characters is not a name


def _unfenced(text: str) -> str:
    """A block's text without the ``` fence (```json) a model may have put around it."""
    text = text.strip(WS)
    if text.startswith(_FENCE):
        line_end = text.find("\n")
        if line_end >= 0 and text[len(_FENCE) : line_end].strip().lower() in ("", "json"):
            text = text[line_end + 1 :].rstrip(WS)
            if text.endswith(_FENCE):
                text = text[: -len(_FENCE)]
    return text


def _call_of(item: Any, tool_names: frozenset[str] | None) -> tuple[str, str] | None:
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("function"), dict):
        item = item["function"]
    name = item.get("name")
    if not isinstance(name, str) or not name or (tool_names is not None and name not in tool_names):
        return None
    arguments = item.get("arguments", item.get("parameters", {}))
    if isinstance(arguments, str):  # an object's text, as OpenAI sends arguments
        text = arguments_text(json.dumps(arguments))
        if text == "{}" and arguments.strip() != "{}":
            return None
        return name, text
    if not isinstance(arguments, dict):
        return None
    return name, json.dumps(arguments, ensure_ascii=False)


def _generic_calls(raw: str, tool_names: frozenset[str] | None) -> list[tuple[str, str]] | None:
    try:
        value = loads_near_json(raw)
    except ValueError:
        return None
    if isinstance(value, dict) and isinstance(value.get("tool_calls"), list):
        items: list[Any] = value["tool_calls"]
    elif isinstance(value, dict) and isinstance(value.get("tool_call"), dict):
        items = [value["tool_call"]]
    elif isinstance(value, list):
        items = value
    else:
        items = [value]
    calls = [_call_of(item, tool_names) for item in items]
    if not calls or any(call is None for call in calls):
        return None
    return [call for call in calls if call is not None]


def _cut_call(text: str, tool_names: frozenset[str] | None) -> list[tuple[str, str]] | None:
    """One call object that the output's end cut off, if its name and arguments were whole."""
    try:
        value, still_open = loads_cut_near_json(text)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    arguments = value.get("arguments", value.get("parameters"))
    if not isinstance(arguments, dict) or id(arguments) in still_open:
        return None
    call = _call_of(value, tool_names)
    return [call] if call is not None else None


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
