"""An MCP server that misbehaves on request, for the tests of engine/tools/server.py.

``python fault_server.py MODE``: ``ok`` is a real MCP server (the official SDK) whose tools
crash, hang or answer 10 MB when called; ``exit`` dies at start with a line on stderr;
``garbage`` answers every line with text that is not JSON; ``notrpc`` with JSON that is not
JSON-RPC; ``http PORT`` serves the ``ok`` tools over Streamable HTTP on loopback and demands
the header ``Authorization: Bearer secret``."""

from __future__ import annotations

import os
import sys
import time


def _server():
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("faults")

    @server.tool(description="Says the text back.")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(description="Exits the server in the middle of the call.")
    def crash() -> str:
        print("crashing on purpose", file=sys.stderr, flush=True)
        os._exit(7)

    @server.tool(description="Never answers.")
    def hang() -> str:
        time.sleep(3600)
        return "late"

    @server.tool(description="Answers with megabytes of text.")
    def big(megabytes: int = 10) -> str:
        return "x" * (megabytes * 1024 * 1024)

    @server.tool(description="Adds two integers.")
    def add(a: int, b: int) -> int:
        return a + b

    return server


def _answer_every_line(reply: str) -> None:
    for _line in sys.stdin:
        sys.stdout.write(reply + "\n")
        sys.stdout.flush()


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
    if mode == "ok":
        _server().run()
    elif mode == "exit":
        print("fatal: this server has no configuration", file=sys.stderr, flush=True)
        sys.exit(2)
    elif mode == "garbage":
        _answer_every_line("this is not json at all")
    elif mode == "notrpc":
        _answer_every_line('{"hello": "world"}')
    elif mode == "http":
        _serve_http(int(sys.argv[2]))
    else:
        sys.exit(f"unknown mode {mode!r}")


def _serve_http(port: int) -> None:
    import uvicorn
    from starlette.responses import PlainTextResponse

    app = _server().streamable_http_app()

    async def guarded(scope, receive, send):
        headers = dict(scope.get("headers") or ())
        if scope["type"] == "http" and headers.get(b"authorization") != b"Bearer secret":
            await PlainTextResponse("unauthorized", status_code=401)(scope, receive, send)
            return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()
