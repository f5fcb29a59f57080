"""The steps of ``ToolCallParser`` for each format: HERMES, LLAMA3_JSON, MISTRAL, GENERIC.

``FormatSteps`` is a base of ``ToolCallParser`` (``engine/chat/tool_calls.py``) and works on
its state: the text not yet read (``_buffer``), what may be a call and is held back
(``_held``), the ``Phase`` it is in, the scanners of the call or value being read. It emits
through the parser's ``_content``, ``_begin`` and ``_args`` and starts a call object with
``_start_call``; what a format's phases mean is said at each step.
"""

from __future__ import annotations

import enum

from engine.chat.json_scan import WS, CallScanner, Scan, ValueScanner
from engine.chat.messages import MAX_TOOL_NAME
from engine.chat.near_json import MAX_CHARS
from engine.chat.tool_call_values import FENCE, cut_call, generic_calls, unfenced


class Phase(enum.Enum):
    """Where the parser is in the output."""

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


HERMES_OPEN, HERMES_CLOSE = "<tool_call>", "</tool_call>"
PYTHON_TAG = "<|python_tag|>"
MISTRAL_OPEN, MISTRAL_ARGS = "[TOOL_CALLS]", "[ARGS]"


def held_prefix(text: str, tag: str) -> int:
    """How many characters at the end of ``text`` may be the start of ``tag``."""
    for k in range(min(len(text), len(tag) - 1), 0, -1):
        if tag.startswith(text[-k:]):
            return k
    return 0


class FormatSteps:
    """One step of each format's reading, as methods of ``ToolCallParser``; each returns
    False when more text is needed."""

    # The parser's state these steps use (``ToolCallParser.__init__`` sets it).
    tool_names: frozenset[str] | None
    _buffer: str
    _held: str
    _phase: Phase
    _scanner: CallScanner | None
    _value: ValueScanner | None
    _fenced: bool
    _in_list: bool
    _after_marker: bool
    _strip_lead: bool
    _rest_phase: Phase
    _json_mode: bool
    _json_skip: int

    # HERMES ------------------------------------------------------------------------------

    def _step_hermes(self, phase: Phase) -> bool:
        if phase is Phase.LENIENT:
            return self._step_lenient()
        if phase is Phase.TEXT:
            if self._find_tag(HERMES_OPEN):
                self._start_call(HERMES_OPEN, strict=False)
                return True
            return False
        if phase is Phase.CLOSE:
            stripped = self._buffer.lstrip(WS)
            if not stripped or (HERMES_CLOSE.startswith(stripped) and stripped != HERMES_CLOSE):
                self._buffer = stripped
                return False
            if stripped.startswith(HERMES_CLOSE):
                stripped = stripped[len(HERMES_CLOSE) :]
            self._buffer = stripped  # (no closing tag: carry on with the text)
            self._phase = Phase.TEXT
            return True
        # SKIP: a broken call's text up to its closing tag is dropped.
        index = self._buffer.find(HERMES_CLOSE)
        if index >= 0:
            self._buffer = self._buffer[index + len(HERMES_CLOSE) :]
            self._phase = Phase.TEXT
            return True
        hold = held_prefix(self._buffer, HERMES_CLOSE)
        self._buffer = self._buffer[len(self._buffer) - hold :]
        return False

    def _step_lenient(self) -> bool:
        """A ``<tool_call>`` block held whole, then read as near-JSON (``near_json``); its
        closing tag missing, the next block's opening ends it."""
        ends = [i for i in (self._buffer.find(HERMES_CLOSE), self._buffer.find(HERMES_OPEN)) if i >= 0]
        index = min(ends, default=-1)
        if index < 0:
            hold = max(held_prefix(self._buffer, HERMES_CLOSE), held_prefix(self._buffer, HERMES_OPEN))
            self._held += self._buffer[: len(self._buffer) - hold]
            self._buffer = self._buffer[len(self._buffer) - hold :]
            if len(self._held) > MAX_CHARS:  # too long to be a call: content
                self._content(self._held)
                self._held = ""
                self._phase = Phase.TEXT
            return False
        self._held += self._buffer[:index]
        close = HERMES_CLOSE if self._buffer.startswith(HERMES_CLOSE, index) else ""
        self._buffer = self._buffer[index + len(close) :]
        self._resolve_lenient(close)
        return True

    def _resolve_lenient(self, close: str) -> None:
        block, self._held = self._held, ""
        calls = generic_calls(unfenced(block[len(HERMES_OPEN) :]), None)
        self._phase = Phase.TEXT
        if not calls:
            self._content(block + close)
            return
        for name, arguments in calls:
            self._begin(name)
            self._args(arguments)
        self._strip_lead = True

    # LLAMA3_JSON -----------------------------------------------------------------------

    def _step_llama3(self, phase: Phase) -> bool:
        stripped = self._buffer.lstrip(WS)
        if not stripped:
            return False  # whitespace: held until it is known what follows
        space = self._buffer[: len(self._buffer) - len(stripped)]
        if phase is Phase.TEXT:  # the start of the reply
            if stripped.startswith(PYTHON_TAG):
                self._held += space + PYTHON_TAG
                self._buffer = stripped[len(PYTHON_TAG) :]
                return True
            if PYTHON_TAG.startswith(stripped):
                return False
            if stripped[0] == "{":
                self._buffer = stripped
                self._start_call(self._held + space, strict=True)
                return True
            self._buffer, self._held = self._held + self._buffer, ""
            self._phase = Phase.CONTENT
            return True
        # BETWEEN calls: ";" or whitespace, then another call or the end.
        self._buffer = stripped
        if stripped[0] == ";":
            self._buffer = stripped[1:]
        elif stripped[0] == "{":
            self._start_call("", strict=True)
        else:
            self._phase = Phase.CONTENT
        return True

    # MISTRAL ---------------------------------------------------------------------------

    def _step_mistral(self, phase: Phase) -> bool:
        if phase is Phase.TEXT:
            if self._find_tag(MISTRAL_OPEN):
                self._phase = Phase.BETWEEN
                self._after_marker = True
                self._in_list = False
                return True
            return False
        if phase is Phase.NAME:
            return self._step_mistral_name()
        if phase is Phase.ARGS:
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
                self._phase = Phase.NAME
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
        self._phase = Phase.TEXT
        return True

    def _step_mistral_name(self) -> bool:
        """``[TOOL_CALLS]name[ARGS]``: a function name, then its arguments."""
        buffer = self._buffer
        end = 0
        while end < len(buffer) and (buffer[end].isalnum() or buffer[end] in "_-."):
            end += 1
        if end == len(buffer) and end <= MAX_TOOL_NAME:
            return False
        tail = buffer[end:]
        if 0 < end <= MAX_TOOL_NAME and tail.startswith(MISTRAL_ARGS):
            self._begin(buffer[:end])
            self._buffer = tail[len(MISTRAL_ARGS) :]
            self._scanner = CallScanner(lambda _name: True)
            self._value = None
            self._phase = Phase.ARGS
            return True
        if 0 < end <= MAX_TOOL_NAME and MISTRAL_ARGS.startswith(tail):
            return False
        self._content(MISTRAL_OPEN)  # not a call after all
        self._phase = Phase.TEXT
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
        self._phase = Phase.TEXT
        self._strip_lead = True
        return True

    # GENERIC ---------------------------------------------------------------------------

    def _step_generic(self, phase: Phase) -> bool:
        if phase in (Phase.TEXT, Phase.START):  # the start of the reply
            stripped = self._buffer.lstrip(WS)
            if not stripped:
                return False
            space = self._buffer[: len(self._buffer) - len(stripped)]
            if not self._fenced and FENCE.startswith(stripped[:3]) and len(stripped) < 3:
                return False
            if not self._fenced and stripped.startswith(FENCE):
                line_end = stripped.find("\n")
                if line_end < 0:
                    return False
                if stripped[len(FENCE) : line_end].strip().lower() in ("", "json"):
                    self._fenced = True
                    self._json_mode = True
                    self._held += space + stripped[: line_end + 1]
                    self._buffer = stripped[line_end + 1 :]
                    return True
            elif stripped[0] in "{[":
                self._held += space
                self._buffer = stripped
                self._value = ValueScanner()
                self._phase = Phase.JSON
                self._json_mode = True
                return True
            self._buffer, self._held = self._held + self._buffer, ""
            self._leave_json()
            return True
        if phase is Phase.JSON:
            return self._step_generic_json()
        # CLOSE: after the JSON, a fenced reply's closing fence is not content.
        stripped = self._buffer.lstrip(WS)
        if self._fenced:
            if not stripped or (FENCE.startswith(stripped) and stripped != FENCE):
                return False
            if stripped.startswith(FENCE):
                self._buffer = stripped[len(FENCE) :]
                self._fenced = self._json_mode = False
                self._phase = Phase.START  # another call may follow, fenced or bare
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
                self._phase = Phase.JSON
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
        calls = generic_calls(self._json_text(), self.tool_names) if ended else None
        if not calls:
            self._buffer, self._held = self._held + self._buffer, ""
            self._leave_json()
            return True
        self._held = ""
        for name, arguments in calls:
            self._begin(name)
            self._args(arguments)
        self._strip_lead = True
        self._phase = Phase.CLOSE
        return True

    def _finish_json(self, rest: str) -> None:
        """The output ended inside the reply-start JSON value: near-JSON with a brace short
        (``{{...}``, as Qwen2.5-Coder writes after a tool result), a closing tag after it, or
        a call cut off by the token limit after its arguments (Qwen2.5-Coder goes on with a
        made-up ``"response"``)."""
        self._held += rest
        text = self._json_text().rstrip(WS)
        for tail in (HERMES_CLOSE, FENCE):
            if text.endswith(tail):
                text = text[: -len(tail)].rstrip(WS)
        calls = generic_calls(text, self.tool_names) or cut_call(text, self.tool_names)
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
