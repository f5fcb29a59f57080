"""Tools for a model whose chat template cannot render them: the conversation rewritten
into plain turns every template renders (a system prompt that lists the tools and says how
to call them, calls written out as text, results as user turns), in the Hermes
``<tool_call>`` format that ``ToolCallParser(ToolCallFormat.HERMES)`` reads back.
Pure: imports neither llama.cpp nor Qt."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from engine.chat.formats import Turn
from engine.chat.messages import Role, ToolCall


def tools_system_prompt(tools: Sequence[Mapping[str, Any]]) -> str:
    """What a model without tool support in its template is told about ``tools``."""
    listed = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
    return (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        f"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{listed}\n"
        "</tools>\n\nFor each function call, return a json object with function name and arguments "
        "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


def call_text(call: ToolCall) -> str:
    """One call as the Hermes format writes it."""
    arguments = call.parsed_arguments()
    encoded = json.dumps(arguments, ensure_ascii=False) if not isinstance(arguments, str) else arguments
    name = json.dumps(call.name, ensure_ascii=False)
    return f'<tool_call>\n{{"name": {name}, "arguments": {encoded}}}\n</tool_call>'


def plain_tool_turns(turns: Sequence[Turn], tools: Sequence[Mapping[str, Any]]) -> list[Turn]:
    """``turns`` with tools, tool calls and tool results turned into plain text turns."""
    out: list[Turn] = []
    for turn in turns:
        if turn.tool_calls:
            calls = [call_text(c) for c in turn.tool_calls]
            text = "\n".join([turn.content, *calls] if turn.content else calls)
            out.append(Turn(Role.ASSISTANT, text))
        elif turn.role is Role.TOOL:
            response = f"<tool_response>\n{turn.content}\n</tool_response>"
            if out and out[-1].role is Role.USER and out[-1].content.endswith("</tool_response>"):
                out[-1] = replace(out[-1], content=f"{out[-1].content}\n{response}")
            else:
                out.append(Turn(Role.USER, response))
        else:
            out.append(replace(turn, tool_call_id="", name=""))
    if tools:
        prompt = tools_system_prompt(tools)
        if out and out[0].role is Role.SYSTEM:
            out[0] = replace(out[0], content=f"{out[0].content}\n\n{prompt}" if out[0].content else prompt)
        else:
            out.insert(0, Turn(Role.SYSTEM, prompt))
    return out
