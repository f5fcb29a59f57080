"""``mcp.json``: the MCP servers Hearth may start, in the ``mcpServers`` shape Claude Desktop,
LM Studio and Cursor read, so a file from any of them imports as it is. Values, parsing and
an atomic write; secrets (env values, headers) are masked wherever a config is shown."""

from __future__ import annotations

import enum
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.base.errors import EngineError

SECRET_MASK = "••••••"
_STDIO_TYPES = frozenset({"stdio"})
_HTTP_TYPES = frozenset({"http", "streamable-http", "streamablehttp", "streamable_http"})


class Transport(enum.StrEnum):
    STDIO = "stdio"  # a child process speaking JSON-RPC on stdin/stdout
    HTTP = "http"  # a Streamable HTTP endpoint


class McpConfigError(EngineError):
    """An ``mcp.json`` Hearth cannot use; the message names the file, server and field."""


@dataclass(frozen=True)
class ServerConfig:
    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    enabled: bool = True

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise McpConfigError("A tool server needs a name.")
        if bool(self.command) == bool(self.url):
            raise McpConfigError(f"Tool server {self.name!r} needs either a command or a url, not both.")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise McpConfigError(f"Tool server {self.name!r}: the url must start with http:// or https://.")

    @property
    def transport(self) -> Transport:
        return Transport.HTTP if self.url else Transport.STDIO

    def shown_env(self) -> tuple[tuple[str, str], ...]:
        return tuple((key, SECRET_MASK) for key, _ in self.env)

    def shown_headers(self) -> tuple[tuple[str, str], ...]:
        return tuple((key, SECRET_MASK) for key, _ in self.headers)

    def summary(self) -> str:
        """One line for a list: the command line or the URL, never a secret."""
        if self.url:
            return self.url
        return " ".join([self.command, *self.args])


def parse_mcp_config(text: str, source: str = "mcp.json") -> tuple[ServerConfig, ...]:
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as error:
        raise McpConfigError(f"{source} is not valid JSON (line {error.lineno}: {error.msg}).") from None
    if not isinstance(data, dict):
        raise McpConfigError(f'{source} must hold a JSON object with "mcpServers".')
    servers = data.get("mcpServers", data.get("servers", {}))
    if not isinstance(servers, dict):
        raise McpConfigError(f'{source}: "mcpServers" must be an object of named servers.')
    return tuple(_server(name, entry, source) for name, entry in servers.items())


def _server(name: str, entry: Any, source: str) -> ServerConfig:
    where = f"{source}: server {name!r}"
    if not isinstance(entry, dict):
        raise McpConfigError(f"{where} must be an object.")
    kind = str(entry.get("type", entry.get("transport", ""))).lower()
    if kind and kind not in _STDIO_TYPES | _HTTP_TYPES:
        raise McpConfigError(f"{where}: type {kind!r} is not supported (use stdio or http).")
    command = _text(entry, "command", where)
    url = _text(entry, "url", where) or _text(entry, "serverUrl", where)
    if kind in _HTTP_TYPES and not url:
        raise McpConfigError(f'{where}: an http server needs a "url".')
    if kind in _STDIO_TYPES and not command:
        raise McpConfigError(f'{where}: a stdio server needs a "command".')
    if not command and not url:
        raise McpConfigError(f'{where} needs a "command" or a "url".')
    if kind in _HTTP_TYPES:
        command = ""
    elif kind in _STDIO_TYPES:
        url = ""
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(arg, str | int | float) for arg in args):
        raise McpConfigError(f'{where}: "args" must be a list of strings.')
    cwd = _text(entry, "cwd", where) or None
    disabled = entry.get("disabled", False)
    enabled = entry.get("enabled", True)
    if not isinstance(disabled, bool) or not isinstance(enabled, bool):
        raise McpConfigError(f'{where}: "disabled" must be true or false.')
    try:
        return ServerConfig(
            name=name,
            command=command,
            args=tuple(str(arg) for arg in args) if command else (),
            env=_pairs(entry, "env", where),
            cwd=cwd,
            url=url,
            headers=_pairs(entry, "headers", where),
            enabled=enabled and not disabled,
        )
    except McpConfigError as error:
        raise McpConfigError(f"{source}: {error.message}") from None


def _text(entry: dict, key: str, where: str) -> str:
    value = entry.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise McpConfigError(f'{where}: "{key}" must be a string.')
    return value.strip()


def _pairs(entry: dict, key: str, where: str) -> tuple[tuple[str, str], ...]:
    value = entry.get(key, {}) or {}
    if not isinstance(value, dict):
        raise McpConfigError(f'{where}: "{key}" must be an object of names to values.')
    for item in value.values():
        if not isinstance(item, str | int | float | bool):
            raise McpConfigError(f'{where}: every value in "{key}" must be a string.')
    return tuple((str(k), str(v)) for k, v in value.items())


def read_mcp_config(path: Path) -> tuple[ServerConfig, ...]:
    """The servers in ``path``; a file that does not exist yet means none."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ()
    except (OSError, UnicodeDecodeError) as error:
        raise McpConfigError(f"{path.name} cannot be read: {error}") from None
    return parse_mcp_config(text, path.name)


def mcp_config_text(servers: Sequence[ServerConfig]) -> str:
    out: dict[str, dict[str, Any]] = {}
    for server in servers:
        entry: dict[str, Any] = {}
        if server.url:
            entry["type"] = "http"
            entry["url"] = server.url
            if server.headers:
                entry["headers"] = dict(server.headers)
        else:
            entry["command"] = server.command
            entry["args"] = list(server.args)
        if server.env:
            entry["env"] = dict(server.env)
        if server.cwd:
            entry["cwd"] = server.cwd
        if not server.enabled:
            entry["disabled"] = True
        out[server.name] = entry
    return json.dumps({"mcpServers": out}, indent=2, ensure_ascii=False) + "\n"


def write_mcp_config(path: Path, servers: Sequence[ServerConfig]) -> None:
    """Whole or not at all: a crash mid-write leaves the old file. Owner-only, as it may
    hold API keys."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=".mcp-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(mcp_config_text(servers))
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
