"""Tools through MCP servers: what a model may call, run with the user in control (docs/TOOLS.md).

Importing the package costs nothing: the ``mcp`` SDK loads only when a server starts.

The modules, bottom up:

- ``config``: ``mcp.json`` (``mcpServers``, the shape Claude Desktop, LM Studio and Cursor
  read) into ``ServerConfig`` values and back; secrets masked wherever they are shown.
- ``rounds``: the loop's values and pure steps: a reply split into text and calls, each
  call's ``ToolCallRecord``, the ``ToolRound`` messages that go back to the model, the caps.
- ``server``: ``ToolServer``, one MCP server (a child process or a Streamable HTTP session)
  driven by the official SDK on a thread of its own; its ``ServerStatus`` and stderr.
- ``toolbox``: ``Toolbox``, every configured server, the tools they offer, a call checked
  against its schema and run.
"""

from engine.base.lazy import lazy_exports

_EXPORTS = {
    "McpConfigError": "config",
    "SECRET_MASK": "config",
    "ServerConfig": "config",
    "Transport": "config",
    "mcp_config_text": "config",
    "parse_mcp_config": "config",
    "read_mcp_config": "config",
    "write_mcp_config": "config",
    "CallStatus": "rounds",
    "ToolCallRecord": "rounds",
    "ToolLoopLimits": "rounds",
    "ToolRound": "rounds",
    "cap_result": "rounds",
    "continuation": "rounds",
    "made_call": "rounds",
    "rounds_cap_line": "rounds",
    "rounds_cap_note": "rounds",
    "tool_message_text": "rounds",
    "round_messages": "rounds",
    "rounds_from_json": "rounds",
    "rounds_json": "rounds",
    "split_reply": "rounds",
    "ServerState": "server",
    "ServerStatus": "server",
    "ToolError": "server",
    "ToolServer": "server",
    "ToolSpec": "server",
    "Toolbox": "toolbox",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
