"""JSON as small models write it after copying it from a chat template: read into values.

``loads_near_json(text)`` accepts strict JSON and these near-JSON forms, nothing else:

- doubled braces, as in templates that show the call as ``{{"name": ..., "arguments": ...}}``
  (Qwen 2.5's): an object whose only content is an object, ``{{...}}``, is that object
  (and ``{{...}`` with one closing brace missing is too);
- strings in single quotes (Python's ``'...'``, with ``\\'`` and JSON's escapes);
- Python's ``True``, ``False`` and ``None``;
- keys written as bare identifiers (``{name: "f"}``);
- a trailing comma before ``}`` or ``]``.

A parser written here, not ``eval`` or ``ast``: nothing in the text is ever run. Bounded:
near-JSON over ``MAX_CHARS`` or nesting deeper than ``MAX_DEPTH`` is refused (strict JSON
of any size is read as ``json`` reads it). Pure.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_CHARS = 32_768
MAX_DEPTH = 32

_WS = " \t\r\n"
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LITERALS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}
_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def loads_near_json(text: str) -> Any:
    """The value ``text`` holds (surrounding whitespace allowed); ``ValueError`` if none."""
    try:
        return json.loads(text)  # the usual case, and the fastest
    except ValueError:
        pass
    if len(text) > MAX_CHARS:
        raise ValueError("too long")
    reader = _Reader(text)
    value = reader.value(0)
    reader.space()
    if reader.i != len(text):
        raise ValueError(f"unexpected {text[reader.i]!r} at {reader.i}")
    return value


def loads_cut_near_json(text: str) -> tuple[Any, frozenset[int]]:
    """Near-JSON that may have been cut off (a reply that ran out of tokens): the value with
    its open containers closed, a member cut in its key or value left out, and the ids
    of the containers that were still open. ``ValueError`` if it is not near-JSON so far."""
    if len(text) > MAX_CHARS:
        raise ValueError("too long")
    reader = _Reader(text, cut=True)
    try:
        value = reader.value(0)
    except _Cut as cut:
        return cut.value, frozenset(reader.open)
    reader.space()
    if reader.i != len(text):
        raise ValueError(f"unexpected {text[reader.i]!r} at {reader.i}")
    return value, frozenset()


class _Cut(Exception):
    """The text ended inside a value; ``value``: what of it was read (a container), or None."""

    def __init__(self, value: Any = None) -> None:
        super().__init__("cut off")
        self.value = value


class _Reader:
    def __init__(self, text: str, cut: bool = False) -> None:
        self.text = text
        self.i = 0
        self.cut = cut  # the end of the text may come anywhere: raise _Cut there
        self.open: list[int] = []  # (cut) the ids of the containers the end came inside

    def ended(self, partial: Any = None) -> None:
        """At the end of the text, where more was due: cut off (in cut mode)."""
        if self.cut and self.i >= len(self.text):
            if partial is not None:
                self.open.append(id(partial))
            raise _Cut(partial)

    def space(self) -> None:
        while self.i < len(self.text) and self.text[self.i] in _WS:
            self.i += 1

    def peek(self) -> str:
        self.space()
        return self.text[self.i] if self.i < len(self.text) else ""

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise ValueError("nested too deeply")
        c = self.peek()
        if c == "{":
            self.i += 1
            return self.object(depth)
        if c == "[":
            self.i += 1
            return self.array(depth)
        if c in "\"'":
            return self.string()
        self.ended()
        if match := _NUMBER.match(self.text, self.i):
            self.i = match.end()
            self.ended()  # a number at the very end may have had more digits
            return json.loads(match.group())
        if (match := _IDENT.match(self.text, self.i)) and match.group() in _LITERALS:
            self.i = match.end()
            return _LITERALS[match.group()]
        if self.cut and any(word.startswith(self.text[self.i :]) for word in _LITERALS):
            self.i = len(self.text)
            self.ended()
        raise ValueError(f"no value at {self.i}")

    def object(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise ValueError("nested too deeply")
        if self.peek() == "{":  # {{...}}: the template's escaped braces, copied
            self.i += 1
            inner = self.object(depth + 1)
            if self.peek() == "}":
                self.i += 1
            return inner
        result: dict[str, Any] = {}
        while True:
            c = self.peek()
            self.ended(result)
            if c == "}":
                self.i += 1
                return result
            try:
                key = self.key()
                if self.peek() != ":":
                    self.ended()
                    raise ValueError(f"no ':' at {self.i}")
                self.i += 1
                result[key] = self.value(depth + 1)
            except _Cut as cut:
                if cut.value is not None:  # a container cut off: kept, as far as it went
                    result[key] = cut.value
                self.ended(result)
                raise
            c = self.peek()
            self.ended(result)
            if c == ",":
                self.i += 1
            elif c != "}":
                raise ValueError(f"no ',' or '}}' at {self.i}")

    def array(self, depth: int) -> list[Any]:
        result: list[Any] = []
        while True:
            c = self.peek()
            self.ended(result)
            if c == "]":
                self.i += 1
                return result
            try:
                result.append(self.value(depth + 1))
            except _Cut as cut:
                if cut.value is not None:
                    result.append(cut.value)
                self.ended(result)
                raise
            c = self.peek()
            self.ended(result)
            if c == ",":
                self.i += 1
            elif c != "]":
                raise ValueError(f"no ',' or ']' at {self.i}")

    def key(self) -> str:
        c = self.peek()
        if c in "\"'":
            return self.string()
        if match := _IDENT.match(self.text, self.i):
            self.i = match.end()
            return match.group()
        self.ended()
        raise ValueError(f"no key at {self.i}")

    def string(self) -> str:
        text = self.text
        quote = text[self.i]
        self.i += 1
        out: list[str] = []
        while self.i < len(text):
            c = text[self.i]
            self.i += 1
            if c == quote:
                return "".join(out)
            if c != "\\":
                out.append(c)
                continue
            if self.i >= len(text):
                break
            e = text[self.i]
            self.i += 1
            if e == "u" and _HEX4.fullmatch(text, self.i, self.i + 4):
                out.append(chr(int(text[self.i : self.i + 4], 16)))
                self.i += 4
                if (  # a surrogate pair, joined
                    "\ud800" <= out[-1] < "\udc00"
                    and text[self.i : self.i + 2] == "\\u"
                    and _HEX4.fullmatch(text, self.i + 2, self.i + 6)
                ):
                    low = int(text[self.i + 2 : self.i + 6], 16)
                    if 0xDC00 <= low < 0xE000:
                        out[-1] = chr(0x10000 + ((ord(out[-1]) - 0xD800) << 10) + low - 0xDC00)
                        self.i += 6
            elif e in _ESCAPES:
                out.append(_ESCAPES[e])
            else:
                raise ValueError(f"bad escape at {self.i - 1}")
        self.ended()
        raise ValueError("unterminated string")
