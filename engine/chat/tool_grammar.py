"""Grammars that force a tool call (``tool_choice`` "required" or a named function): the
format's own call syntax, with arguments that match each function's JSON schema.

The calls' JSON is one JSON schema (``anyOf`` the offered functions, each an object whose
``name`` is that function's and whose arguments follow its ``parameters``) converted by
llama.cpp's converter; the format's syntax around it is added here, as rules whose names
start with ``hearth-``. Pure Python apart from the converter (``engine.sampling.grammar``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.base.errors import InvalidChatRequest
from engine.chat.tool_calls import ToolCallFormat
from engine.sampling.grammar import Grammar, convert_json_schema, precheck_json_schema

ToolChoice = str | Mapping[str, Any]


def chosen_function(choice: ToolChoice) -> str | None:
    """The function a ``tool_choice`` names (``"name"`` or OpenAI's ``{"type": "function",
    "function": {"name": ...}}``); None for "required"; ``ValueError`` for anything else."""
    if isinstance(choice, Mapping):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        if choice.get("type", "function") != "function" or not isinstance(name, str) or not name:
            raise InvalidChatRequest(
                'A named tool_choice must be {"type": "function", "function": {"name": ...}}.'
            )
        return name
    if choice == "required":
        return None
    if isinstance(choice, str) and choice not in ("auto", "none"):
        return choice
    raise InvalidChatRequest(f"tool_choice {choice!r} does not force a call.")


_NEWLINE = r'"\n"'
_SEMICOLON = '";" " "?'
_COMMA = '"," " "?'


def _literal(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def tool_choice_grammar(
    fmt: ToolCallFormat,
    tools: Sequence[Mapping[str, Any]],
    choice: ToolChoice,
    parallel: bool = True,
) -> Grammar | None:
    """A grammar forcing ``fmt``'s tool-call syntax for ``choice``; None for "auto" and
    "none" (nothing to force). ``parallel``: one or more calls, else exactly one.
    A function the tools do not offer, or parameters that cannot be converted, raise
    ``InvalidChatRequest`` naming them."""
    if choice in ("auto", "none"):
        return None
    fmt = ToolCallFormat(fmt)
    if fmt is ToolCallFormat.NONE:
        raise InvalidChatRequest("This model has no tool-call format to force.")
    wanted = chosen_function(choice)
    functions: list[tuple[str, Any]] = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise InvalidChatRequest("Each tool needs a function with a name.")
        name = function["name"]
        if wanted is None or name == wanted:
            parameters = function.get("parameters") or {"type": "object"}
            try:
                precheck_json_schema(parameters)
            except InvalidChatRequest as exc:
                raise InvalidChatRequest(f"Tool {name!r}: {exc.message}") from None
            functions.append((name, parameters))
    if not functions:
        raise InvalidChatRequest(
            f"tool_choice names {wanted!r}, which is not among the tools." if wanted else "No tools to call."
        )
    args_key = "parameters" if fmt is ToolCallFormat.LLAMA3_JSON else "arguments"
    calls = [
        {
            "type": "object",
            "properties": {"name": {"const": name}, args_key: parameters},
            "required": ["name", args_key],
            "additionalProperties": False,
        }
        for name, parameters in functions
    ]
    call_schema: dict[str, Any] = calls[0] if len(calls) == 1 else {"anyOf": calls}
    if fmt is ToolCallFormat.GENERIC and parallel:
        call_schema = {
            "type": "object",
            "properties": {"tool_calls": {"type": "array", "items": call_schema, "minItems": 1}},
            "required": ["tool_calls"],
            "additionalProperties": False,
        }
    gbnf = convert_json_schema(call_schema, prop_order=("name", args_key, "tool_calls"))

    def calls(item: str, separator: str) -> str:
        return f"{item} ( {separator} {item} )*" if parallel else item

    if fmt is ToolCallFormat.HERMES:
        open_tag, close_tag = _literal("<tool_call>"), _literal("</tool_call>")
        wrapper = (
            f"hearth-tool-calls ::= {calls('hearth-tool-block', _NEWLINE)}\n"
            f"hearth-tool-block ::= {open_tag} {_NEWLINE} root {_NEWLINE} {close_tag}"
        )
    elif fmt is ToolCallFormat.LLAMA3_JSON:
        wrapper = f"hearth-tool-calls ::= {calls('root', _SEMICOLON)}"
    elif fmt is ToolCallFormat.MISTRAL:
        wrapper = f'hearth-tool-calls ::= {_literal("[TOOL_CALLS]")} " "? "[" {calls("root", _COMMA)} "]"'
    else:
        wrapper = "hearth-tool-calls ::= root"
    grammar = Grammar(f"{gbnf}\n{wrapper}\n", root="hearth-tool-calls")
    grammar.validate()
    return grammar
