"""Every configured MCP server and the tools they offer, as one thing the tool loop asks
(issue 29): which tools the model sees (names unique across servers), whether a call the
model made may run (a known tool, arguments an object that fits its schema), and running it
with the call timeout and the result cap. Blocking and thread-safe; the window drives it from
worker threads (app/services/tools.py), ``hearth chat --mcp`` directly."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from engine.chat.messages import ToolCall
from engine.tools.config import ServerConfig
from engine.tools.rounds import CallStatus, ToolCallRecord, ToolLoopLimits, cap_result
from engine.tools.server import ServerState, ServerStatus, ToolError, ToolServer, ToolSpec

_CLASH_SEPARATOR = "__"


class Toolbox:
    def __init__(
        self,
        configs: Sequence[ServerConfig],
        *,
        on_status: Callable[[ServerStatus], None] | None = None,
        limits: ToolLoopLimits | None = None,
    ) -> None:
        self.limits = limits or ToolLoopLimits()
        self._on_status = on_status
        self._lock = threading.RLock()
        self._configs: dict[str, ServerConfig] = {}
        self._servers: dict[str, ToolServer] = {}
        self.replace_configs(configs)

    def configs(self) -> tuple[ServerConfig, ...]:
        with self._lock:
            return tuple(self._configs.values())

    def replace_configs(self, configs: Sequence[ServerConfig], stop: bool = True) -> tuple[ToolServer, ...]:
        """New configs: servers removed or changed are taken out (a changed one is a new
        server, started later by ``start``); unchanged running ones keep running. The ones
        taken out are stopped here, or with ``stop=False`` returned for the caller to stop
        (off its own thread: stopping waits for the child)."""
        with self._lock:
            fresh = {config.name: config for config in configs}
            gone = [name for name, old in self._configs.items() if fresh.get(name) != old]
            self._configs = fresh
            stale = tuple(self._servers.pop(name) for name in gone if name in self._servers)
            for name, config in fresh.items():
                if name not in self._servers:
                    self._servers[name] = ToolServer(config, on_status=self._on_status)
        if stop:
            for server in stale:
                server.stop()
        return stale

    def start_all(self) -> tuple[ServerStatus, ...]:
        """Starts every enabled server at once and waits until each is ready or failed."""
        names = [config.name for config in self.configs() if config.enabled]
        if names:
            with ThreadPoolExecutor(max_workers=min(8, len(names)), thread_name_prefix="mcp-start") as pool:
                list(pool.map(self.start, names))
        return self.statuses()

    def start(self, name: str) -> ServerStatus:
        return self._server(name).start(self.limits.start_timeout_s)

    def stop(self, name: str) -> None:
        self._server(name).stop()

    def restart(self, name: str) -> ServerStatus:
        server = self._server(name)
        server.stop()
        return server.start(self.limits.start_timeout_s)

    def stop_all(self) -> None:
        """Stops every server at once (each within the SDK's grace: stdin closed, SIGTERM,
        SIGKILL), so quitting waits for the slowest, not the sum."""
        with self._lock:
            servers = list(self._servers.values())
        if servers:
            with ThreadPoolExecutor(max_workers=min(8, len(servers)), thread_name_prefix="mcp-stop") as pool:
                list(pool.map(lambda server: server.stop(), servers))

    def statuses(self) -> tuple[ServerStatus, ...]:
        with self._lock:
            servers = list(self._servers.values())
        return tuple(server.status() for server in servers)

    def status(self, name: str) -> ServerStatus:
        return self._server(name).status()

    def tools(self, off: Collection[str] = ()) -> tuple[ToolSpec, ...]:
        """The tools of ready servers, less those switched ``off`` (by ``server/tool`` key or
        server name), each named as the model sees it: a name two servers share becomes
        ``server__tool``."""
        with self._lock:
            servers = list(self._servers.values())
        offered: list[ToolSpec] = []
        for server in servers:
            status = server.status()
            if status.state is not ServerState.READY or status.name in off:
                continue
            offered += [tool for tool in status.tools if f"{tool.server}/{tool.name}" not in off]
        counts: dict[str, int] = {}
        for tool in offered:
            counts[tool.name] = counts.get(tool.name, 0) + 1
        return tuple(
            tool if counts[tool.name] == 1 else _renamed(tool, f"{tool.server}{_CLASH_SEPARATOR}{tool.name}")
            for tool in offered
        )

    def openai_tools(self, off: Collection[str] = ()) -> tuple[dict, ...]:
        return tuple(tool.openai_tool() for tool in self.tools(off))

    def check(self, call: ToolCall, off: Collection[str] = ()) -> ToolSpec | ToolCallRecord:
        """The tool a call names, or a REFUSED record saying in one line why it cannot run."""
        tool = next((tool for tool in self.tools(off) if tool.name == call.name), None)
        if tool is None:
            return _refused(call, f"There is no tool named {call.name!r}.")
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            return _refused(call, f"The arguments for {call.name} are not valid JSON.", tool)
        if not isinstance(arguments, dict):
            return _refused(call, f"The arguments for {call.name} must be a JSON object.", tool)
        problem = _schema_problem(arguments, tool.input_schema)
        if problem:
            return _refused(call, f"The arguments for {call.name} do not fit its schema: {problem}", tool)
        return tool

    def run(self, call: ToolCall, spec: ToolSpec | None = None) -> ToolCallRecord:
        """Checks (unless ``spec`` is given) and runs one call; never raises."""
        checked = spec if spec is not None else self.check(call)
        if isinstance(checked, ToolCallRecord):
            return checked
        arguments = json.loads(call.arguments or "{}")
        try:
            outcome = self._server(checked.server).call(
                checked.server_name, arguments, self.limits.call_timeout_s
            )
        except ToolError as error:
            return ToolCallRecord(call, CallStatus.ERROR, error.message, checked.server)
        text, truncated = cap_result(outcome.text, self.limits.result_max_chars)
        return ToolCallRecord(
            call,
            CallStatus.ERROR if outcome.is_error else CallStatus.OK,
            text,
            checked.server,
            truncated=truncated,
            full_chars=len(outcome.text),
            seconds=outcome.seconds,
        )

    def _server(self, name: str) -> ToolServer:
        with self._lock:
            server = self._servers.get(name)
        if server is None:
            raise ToolError(f"There is no tool server named {name!r}.")
        return server


def _renamed(tool: ToolSpec, name: str) -> ToolSpec:
    return replace(tool, name=name, remote_name=tool.remote_name or tool.name)


def _refused(call: ToolCall, why: str, tool: ToolSpec | None = None) -> ToolCallRecord:
    return ToolCallRecord(call, CallStatus.REFUSED, why, tool.server if tool else "")


def _schema_problem(arguments: dict, schema: dict) -> str:
    import jsonschema

    try:
        validator = jsonschema.validators.validator_for(schema)(schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    except jsonschema.exceptions.SchemaError:
        return ""  # a server's broken schema is its problem; the server itself still checks
    if error is None:
        return ""
    where = "/".join(str(part) for part in error.absolute_path)
    return f"{where + ': ' if where else ''}{error.message}"[:300]
