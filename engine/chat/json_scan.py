"""Scanning a tool call's JSON as it streams, one character at a time.

``ValueScanner`` says where one JSON value ends (its text may arrive cut anywhere);
``CallScanner`` reads a ``{"name": ..., "arguments": {...}}`` object, reporting the name as
soon as it is complete and the arguments as fragments while they are written. Used by
``ToolCallParser`` (``engine/chat/tool_calls.py``). Pure: no llama.cpp, no Qt.
"""

from __future__ import annotations

import enum
import json
import string
from collections.abc import Callable

from engine.chat.near_json import loads_near_json


class Scan(enum.Enum):
    MORE = "more"  # consumed, the value goes on
    END_WITH = "end with"  # consumed, and it was the value's last character
    END_BEFORE = "end before"  # not consumed: the value ended before it (numbers, literals)
    ERROR = "error"


WS = " \t\r\n"  # JSON's whitespace
_NAME_KEYS = ("name",)
_ARGS_KEYS = ("arguments", "parameters")
_PYTHON_LITERALS = {"True": "true", "False": "false", "None": "null"}
_SCALAR_CHARS = frozenset(string.ascii_letters + string.digits + ".+-")


class ValueScanner:
    """Where one JSON value ends, fed a character at a time (its syntax is not checked).
    Strings in single quotes count as strings too where a key or value may start (``'`` is
    never outside a string in JSON, near-JSON has them: ``engine/chat/near_json.py``, and
    an apostrophe in words, as in ``[I don't]``, is not one)."""

    __slots__ = ("_depth", "_escape", "_in_string", "_last", "_quote", "kind")

    def __init__(self) -> None:
        self.kind = ""  # "container", "string", "scalar"; "" before the first character
        self._last = ""  # in a container: its last character outside strings and space
        self._depth = 0
        self._in_string = False
        self._quote = '"'
        self._escape = False

    @property
    def in_string(self) -> bool:
        return self._in_string

    def push(self, c: str) -> Scan:
        if not self.kind:
            if c in "{[":
                self.kind, self._depth, self._last = "container", 1, c
                return Scan.MORE
            if c in "\"'":
                self.kind, self._in_string, self._quote = "string", True, c
                return Scan.MORE
            if c in _SCALAR_CHARS:
                self.kind = "scalar"
                return Scan.MORE
            return Scan.ERROR
        if self._in_string:
            if self._escape:
                self._escape = False
            elif c == "\\":
                self._escape = True
            elif c == self._quote:
                self._in_string, self._last = False, c
                if self.kind == "string":
                    return Scan.END_WITH
            return Scan.MORE
        if self.kind == "scalar":
            if c in _SCALAR_CHARS:
                return Scan.MORE
            return Scan.END_BEFORE if c in WS or c in ",}]" else Scan.ERROR
        last, self._last = self._last, c if c not in WS else self._last
        if c == '"' or (c == "'" and last in "{[,:"):
            self._in_string, self._quote = True, c
        elif c in "{[":
            self._depth += 1
        elif c in "}]":
            self._depth -= 1
            if self._depth == 0:
                return Scan.END_WITH
        return Scan.MORE


class CallState(enum.Enum):
    START = "start"
    KEY_OR_END = "key or end"
    KEY = "key"
    COLON = "colon"
    VALUE_START = "value start"
    VALUE = "value"
    AFTER_VALUE = "after value"
    DONE = "done"
    REJECTED = "rejected"  # not a call after all (no name, a name not offered, broken JSON)


class CallScanner:
    """One call object ``{"name": ..., "arguments": {...}, ...}``, streamed: the name is
    announced as soon as it is read, argument text as it arrives."""

    def __init__(self, accept_name: Callable[[str], bool]) -> None:
        self.accept_name = accept_name
        self.state = CallState.START
        self.name: str | None = None
        self.begun = False
        self.broken = False  # it ended at a syntax error after its name
        self.args_fragments = 0  # argument fragments emitted
        self._key: list[str] = []
        self._key_escape = False
        self._current = ""  # the key whose value is being read
        self._value: ValueScanner | None = None
        self._raw: list[str] = []  # the current value's text, when it is not streamed
        # "" not seen; "open": its "{" read, not yet known how it goes on; "stream": passed
        # on as read (JSON); "buffer": read whole (not an object, or near-JSON); "done"
        self._args_mode = ""
        self._buffered_args: str | None = None  # arguments read before the name
        self._pending: list[str] = []  # argument text read in this feed, not yet emitted
        self._comma: list[str] = []  # a comma in streamed arguments and the space after it
        self._word: list[str] = []  # letters outside strings in streamed arguments

    @property
    def finished(self) -> bool:
        return self.state in (CallState.DONE, CallState.REJECTED)

    def feed(self, text: str, begin: Callable[[str], None], args: Callable[[str], None]) -> int:
        """Consume ``text`` up to the end of the object; how many characters were taken."""
        i = 0
        n = len(text)
        while i < n and not self.finished:
            c = text[i]
            state = self.state
            if state is CallState.VALUE:
                assert self._value is not None
                result = self._value.push(c)
                if result is Scan.ERROR:
                    self._break()
                    continue
                if result is not Scan.END_BEFORE:
                    i += 1
                    self._take_value_char(c)
                if result is not Scan.MORE:
                    self._value_done(begin, args)
            elif state is CallState.KEY:
                i += 1
                if self._key_escape:
                    self._key_escape = False
                    self._key.append(c)
                elif c == "\\":
                    self._key_escape = True
                    self._key.append(c)
                elif c == '"':
                    try:
                        self._current = json.loads('"' + "".join(self._key) + '"')
                    except ValueError:
                        self._current = ""
                    self.state = CallState.COLON
                else:
                    self._key.append(c)
            elif c in WS:
                i += 1
            elif state is CallState.START:
                if c == "{":
                    self.state = CallState.KEY_OR_END
                    i += 1
                else:
                    self.state = CallState.REJECTED
            elif state is CallState.KEY_OR_END and c == '"':
                self.state, self._key, self._key_escape = CallState.KEY, [], False
                i += 1
            elif state in (CallState.KEY_OR_END, CallState.AFTER_VALUE) and c == "}":
                i += 1
                self._close(begin, args)
            elif state is CallState.AFTER_VALUE and c == ",":
                self.state = CallState.KEY_OR_END
                i += 1
            elif state is CallState.COLON and c == ":":
                self.state = CallState.VALUE_START
                i += 1
            elif state is CallState.VALUE_START:
                self._value = ValueScanner()
                self._raw = []
                if self._current in _ARGS_KEYS and not self._args_mode:
                    self._args_mode = "open" if c == "{" and self.begun else "buffer"
                self.state = CallState.VALUE
            else:
                self._break()
        self._flush(args)
        return i

    def _take_value_char(self, c: str) -> None:
        mode = self._args_mode if self._current in _ARGS_KEYS else ""
        if mode == "open":  # "{" read: streamed if JSON follows, read whole if near-JSON does
            self._raw.append(c)
            if len(self._raw) > 1 and c not in WS:
                if c in '"}':
                    self._args_mode = "stream"
                    self._pending, self._raw = self._raw, []
                else:
                    self._args_mode = "buffer"
        elif mode == "stream":
            assert self._value is not None
            if c.isalpha() and not self._value.in_string:  # a word: true, or Python's True
                self._word.append(c)
                return
            if self._word:
                word = "".join(self._word)
                self._pending.append(_PYTHON_LITERALS.get(word, word))
                self._word = []
            if self._comma:  # a comma held: dropped if a closing bracket follows (trailing)
                if c in WS:
                    self._comma.append(c)
                    return
                self._pending += self._comma[1:] if c in "}]" else self._comma
                self._comma = []
            if c == "," and not self._value.in_string:
                self._comma = [c]
            else:
                self._pending.append(c)
        else:
            self._raw.append(c)

    def _value_done(self, begin: Callable[[str], None], args: Callable[[str], None]) -> None:
        self.state = CallState.AFTER_VALUE
        key = self._current
        if key in _NAME_KEYS and self.name is None:
            try:
                name = loads_near_json("".join(self._raw))
            except ValueError:
                name = None
            if not isinstance(name, str) or not name or not self.accept_name(name):
                self.state = CallState.REJECTED
                return
            self.name = name
            self.begun = True
            begin(name)
            if self._buffered_args is not None:
                self._emit_args(self._buffered_args, args)
        elif key in _ARGS_KEYS and self._args_mode == "buffer":
            text = arguments_text("".join(self._raw))
            if self.begun:
                self._emit_args(text, args)
            else:
                self._buffered_args = text
            self._args_mode = "done"
        elif key in _ARGS_KEYS and self._args_mode == "stream":
            self._args_mode = "done"

    def _emit_args(self, text: str, args: Callable[[str], None]) -> None:
        if text:
            args(text)
            self.args_fragments += 1

    def _flush(self, args: Callable[[str], None]) -> None:
        if self._pending:
            self._emit_args("".join(self._pending), args)
            self._pending = []

    def _close(self, begin: Callable[[str], None], args: Callable[[str], None]) -> None:
        if not self.begun:
            self.state = CallState.REJECTED
            return
        self._flush(args)
        if not self.args_fragments:
            self._emit_args("{}", args)
        self.state = CallState.DONE

    def _break(self) -> None:
        # Before its name a broken object is not a call; after, the call ends where it broke.
        if self.begun and not self.args_fragments and self._args_mode not in ("stream", "done"):
            self._pending = ["{}"]  # (emitted by the feed's flush)
        self.broken = self.begun
        self.state = CallState.DONE if self.begun else CallState.REJECTED

    def finish(self, args: Callable[[str], None]) -> None:
        """The output ended inside the object: a begun call keeps what it has."""
        if self.begun:
            self._flush(args)
            if not self.args_fragments and self._args_mode != "stream":
                self._emit_args(self._buffered_args or "{}", args)
        self.state = CallState.DONE if self.begun else CallState.REJECTED


def arguments_text(raw: str) -> str:
    """Arguments read whole, as JSON text: an object (near-JSON written as JSON), or a
    string holding an object's text (some models write that) unwrapped; anything else
    that is not an object is ``{}``."""
    try:
        value = loads_near_json(raw)
    except ValueError:
        return "{}"
    if isinstance(value, str):
        try:
            inner = json.loads(value)
        except ValueError:
            try:
                inner = loads_near_json(value)
            except ValueError:
                return "{}"
            return json.dumps(inner, ensure_ascii=False) if isinstance(inner, dict) else "{}"
        return value if isinstance(inner, dict) else "{}"
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else "{}"
