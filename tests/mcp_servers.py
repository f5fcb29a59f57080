"""Real third-party MCP servers for the tests (issue 29): the npm packages `make test`
installs into .test-cache/mcp-npm (pinned below), run with node, and `mcp-server-time` from
PyPI in the venv. ``free_port`` and ``wait_for_port`` serve the HTTP ones on loopback."""

from __future__ import annotations

import shutil
import socket
import sys
import time
from pathlib import Path

from engine import ServerConfig

NPM_DIR = Path(__file__).resolve().parents[1] / ".test-cache" / "mcp-npm"
NPM_PACKAGES = {  # kept equal to the Makefile's MCP_NPM
    "filesystem": "@modelcontextprotocol/server-filesystem@2026.8.31",
    "everything": "@modelcontextprotocol/server-everything@2026.8.31",
}


def npm_server_script(kind: str) -> Path:
    package = NPM_PACKAGES[kind].rsplit("@", 1)[0]
    script = NPM_DIR / "node_modules" / package / "dist" / "index.js"
    if not script.is_file():
        raise RuntimeError(f"{package} is not installed: `make test` installs it into {NPM_DIR}")
    return script


def node() -> str:
    found = shutil.which("node")
    if found is None:
        raise RuntimeError("node is not on PATH: the npm MCP servers need Node.js 18 or later")
    return found


def filesystem_server(folder: Path, name: str = "files") -> ServerConfig:
    return ServerConfig(name, command=node(), args=(str(npm_server_script("filesystem")), str(folder)))


def everything_server(name: str = "everything") -> ServerConfig:
    return ServerConfig(name, command=node(), args=(str(npm_server_script("everything")), "stdio"))


def time_server(name: str = "time") -> ServerConfig:
    return ServerConfig(
        name, command=sys.executable, args=("-m", "mcp_server_time", "--local-timezone", "UTC")
    )


def server_processes(parent=None) -> list:
    """The MCP servers among ``parent``'s descendants (this process by default): only those,
    since the suite has other children coming and going (the packaging bundle's build)."""
    import psutil

    marks = ("mcp_server_time", "modelcontextprotocol", "fault_server.py", "mcp-server")
    found = []
    for child in (parent or psutil.Process()).children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE and any(m in " ".join(child.cmdline()) for m in marks):
                found.append(child)
        except psutil.Error:  # ended while being looked at
            continue
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout_s:g} s")
