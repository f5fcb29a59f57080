"""``hearth chat MODEL PROMPT --mcp mcp.json --allow-tools`` (issue 29): the reply with the
tools of an ``mcp.json``, the same loop the window runs (engine/tools/rounds.py) without its
approval bar. A terminal has no one to ask, so the calls run only with ``--allow-tools``; each
call is one line on stderr, the answer alone on stdout."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine import EngineError

NOT_ALLOWED = "--mcp runs tools without asking: add --allow-tools to let it."
NO_TEMPLATE_TOOLS = (
    "hearth: this model's chat template has no tools; Hearth describes them in a system prompt"
)


class ToolsNotAllowed(EngineError):
    """``--mcp`` without ``--allow-tools``."""


def add_tool_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mcp", type=Path, default=None, metavar="MCP_JSON", help="offer the tools of these MCP servers"
    )
    p.add_argument(
        "--allow-tools", action="store_true", help="run the model's tool calls without asking (needs --mcp)"
    )


def check_tool_options(args: argparse.Namespace) -> None:
    """Before anything loads: the refusal is one line, and nothing is started."""
    if args.mcp is not None and not args.allow_tools:
        raise ToolsNotAllowed(NOT_ALLOWED)
    if args.allow_tools and args.mcp is None:
        raise ToolsNotAllowed("--allow-tools needs --mcp MCP_JSON: the servers whose tools may run.")
    if args.mcp is not None and not args.mcp.is_file():
        raise ToolsNotAllowed(f"{args.mcp} does not exist.")


def open_toolbox(path: Path) -> Any:
    """The file's enabled servers, started; one stderr line for each that failed."""
    from engine import ServerState, Toolbox, read_mcp_config

    toolbox = Toolbox(read_mcp_config(path))
    for status in toolbox.start_all():
        if status.state is ServerState.FAILED:
            print(f"hearth: tool server {status.name!r} failed: {status.error}", file=sys.stderr)
    return toolbox


def chat_with_tools(model: Any, request: Any, toolbox: Any, quiet: bool) -> tuple[Any, tuple[Any, ...]]:
    """Rounds until the model answers without calls (or the round cap, said to it): each
    round streamed to stdout with its calls held back, the calls checked and run in order.
    Returns the last completion (its text the answer alone) and the rounds."""
    from engine import StopReason, ToolCallRecord, ToolRound, continuation, rounds_cap_line, split_reply

    traits = model.chat_traits
    if not traits.renders_tools:
        print(NO_TEMPLATE_TOOLS, file=sys.stderr)
    offered = toolbox.openai_tools()
    names = [tool["function"]["name"] for tool in offered]
    current = replace(request, tools=offered)
    rounds: list[Any] = []
    while True:
        completion = _stream_round(model, current, names, quiet)
        text, calls = split_reply(completion.text, traits.tool_format, names)
        if not calls or not current.tools or completion.stop_reason is StopReason.CANCELLED:
            return replace(completion, text=text), tuple(rounds)
        records = []
        for item in toolbox.limits.admit(calls, rounds):
            record = item if isinstance(item, ToolCallRecord) else toolbox.run(item)
            records.append(record)
            print(call_line(record), file=sys.stderr)
        rounds.append(ToolRound(text, tuple(records)))
        current = continuation(request, rounds, offered, toolbox.limits.max_rounds)
        if len(rounds) == toolbox.limits.max_rounds:
            print(rounds_cap_line(len(rounds)), file=sys.stderr)


def _stream_round(model: Any, request: Any, names: list[str], quiet: bool) -> Any:
    """One round streamed: its text as it comes, its calls (and past the cap, calls the model
    still writes) kept off stdout."""
    from engine import Completed, ContentDelta, TextDelta, ToolCallParser

    parser = ToolCallParser(model.chat_traits.tool_format, tool_names=names)
    handle = model.submit(request)
    wrote = False
    try:
        for event in handle.events():
            if isinstance(event, TextDelta) and not quiet:
                shown = "".join(e.text for e in parser.feed(event.text) if isinstance(e, ContentDelta))
                sys.stdout.write(shown)
                sys.stdout.flush()
                wrote = wrote or bool(shown.strip())
            elif isinstance(event, Completed) and not quiet:
                tail = "".join(e.text for e in parser.finish() if isinstance(e, ContentDelta))
                sys.stdout.write(tail + ("\n" if wrote or tail.strip() else ""))
    except KeyboardInterrupt:
        handle.cancel()
    return handle.wait()


def call_line(record: Any) -> str:
    """One stderr line per call: what ran, where, how it went."""
    arguments = " ".join(record.call.arguments.split())
    if len(arguments) > 120:
        arguments = arguments[:117] + "..."
    where = f" on {record.server}" if record.server else ""
    took = f" {record.seconds:.2f} s" if record.seconds else ""
    cut = f", cut to {len(record.result):,} of {record.full_chars:,} chars" if record.truncated else ""
    first = record.result.strip().splitlines()[0][:160] if record.result.strip() else ""
    said = f": {first}" if record.status.value != "ok" and first else ""
    return f"[tool {record.call.name}{where} {arguments} → {record.status.value}{took}{cut}{said}]"
