"""A tool call read from a whole JSON value: the shapes models write calls in, near-JSON allowed.

Where the parser has a call's whole text (a reply that is one JSON value, a ``<tool_call>``
block that is not JSON, a call the token limit cut off), these read it: an object with
``name`` and ``arguments``/``parameters``, OpenAI's ``{"function": {...}}`` shape,
``{"tool_calls": [...]}``, ``{"tool_call": {...}}`` or a list of calls. Each call comes back
as ``(name, arguments)``, the arguments as a JSON object's text.
"""

from __future__ import annotations

import json
from typing import Any

from engine.chat.json_scan import WS, arguments_text
from engine.chat.near_json import loads_cut_near_json, loads_near_json

FENCE = "```"


def unfenced(text: str) -> str:
    """A block's text without the ``` fence (```json) a model may have put around it."""
    text = text.strip(WS)
    if text.startswith(FENCE):
        line_end = text.find("\n")
        if line_end >= 0 and text[len(FENCE) : line_end].strip().lower() in ("", "json"):
            text = text[line_end + 1 :].rstrip(WS)
            if text.endswith(FENCE):
                text = text[: -len(FENCE)]
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


def generic_calls(raw: str, tool_names: frozenset[str] | None) -> list[tuple[str, str]] | None:
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


def cut_call(text: str, tool_names: frozenset[str] | None) -> list[tuple[str, str]] | None:
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
