"""One MCP server, driven by the official ``mcp`` SDK on a thread of its own (issue 29).

The SDK is asyncio (anyio) and its transports are context managers that must open and close
in one task, so each server gets a loop on a daemon thread and one task that holds the
connection open until ``stop``; calls are further tasks on that loop. Every method here is
blocking and thread-safe, and whatever a server does (exit at start, crash mid-call, hang,
print garbage, answer 10 MB) ends as a FAILED status or an error outcome with one line of
why: a tool server never takes Hearth down. A child's stderr goes to a file whose tail the
settings page shows."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from engine.base.defaults import DEFAULT_TOOL_CALL_TIMEOUT_S, DEFAULT_TOOL_START_TIMEOUT_S
from engine.base.errors import EngineError
from engine.tools.config import ServerConfig, Transport

STDERR_TAIL_BYTES = 8000
_STOP_GRACE_S = 6.0  # the SDK's own shutdown: stdin closed, 2 s, SIGTERM, 2 s, SIGKILL
_CONNECTION_CLOSED = -32000  # mcp_types.CONNECTION_CLOSED, named here so importing costs nothing


class ServerState(enum.StrEnum):
    STOPPED = "stopped"
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"


class _StartCancelled(Exception):
    """``stop`` was asked while the server was still starting."""


class ToolError(EngineError):
    """A tool server could not be used (not running, gone, or refused the request)."""


@dataclass(frozen=True)
class ToolSpec:
    server: str
    name: str
    description: str = ""
    input_schema: dict = field(default_factory=lambda: {"type": "object", "properties": {}})
    remote_name: str = ""  # the server's own name, when ``name`` was changed to be unique

    @property
    def server_name(self) -> str:
        return self.remote_name or self.name

    def openai_tool(self, name: str | None = None) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": name or self.name,
                "description": self.description,
                "parameters": self.input_schema,
            },
        }


@dataclass(frozen=True)
class ServerStatus:
    name: str
    state: ServerState
    tools: tuple[ToolSpec, ...] = ()
    error: str = ""
    stderr: str = ""


@dataclass(frozen=True)
class ToolOutcome:
    """What a call gave back: the text for the model, and whether the tool called it an error."""

    text: str
    is_error: bool = False
    seconds: float = 0.0


class ToolServer:
    def __init__(self, config: ServerConfig, on_status: Callable[[ServerStatus], None] | None = None) -> None:
        self.config = config
        self._on_status = on_status
        self._lock = threading.Lock()
        self._life = threading.Lock()  # one start or stop at a time (a toggle clicked twice)
        self._state = ServerState.STOPPED
        self._tools: tuple[ToolSpec, ...] = ()
        self._error = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._session: Any = None
        self._closing: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._ready: Future | None = None
        self._holder: Future | None = None
        self._held = False  # the session is open and the holder waits for stop
        self._protocol_error = ""
        self._http_error = ""
        # Lives as long as the server object: the child writes to it across restarts.
        self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")  # noqa: SIM115

    @property
    def name(self) -> str:
        return self.config.name

    def status(self) -> ServerStatus:
        with self._lock:
            return ServerStatus(self.name, self._state, self._tools, self._error, self.stderr_tail())

    def stderr_tail(self) -> str:
        with contextlib.suppress(OSError, ValueError):
            fd = self._stderr.fileno()
            size = os.fstat(fd).st_size
            start = max(0, size - STDERR_TAIL_BYTES)
            return os.pread(fd, size - start, start).decode("utf-8", "replace")
        return ""

    def start(self, timeout_s: float = DEFAULT_TOOL_START_TIMEOUT_S) -> ServerStatus:
        """Starts the server and lists its tools; returns READY or FAILED, never raises."""
        with self._life:
            return self._start(timeout_s)

    def _start(self, timeout_s: float) -> ServerStatus:
        with self._lock:
            if self._state in (ServerState.READY, ServerState.STARTING):
                return ServerStatus(self.name, self._state, self._tools, self._error)
            self._state, self._error, self._tools = ServerState.STARTING, "", ()
        self._announce()
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name=f"mcp-{self.name}", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        ready: Future = Future()
        self._ready = ready
        self._holder = asyncio.run_coroutine_threadsafe(self._hold(ready), loop)
        try:
            tools = ready.result(timeout=timeout_s)
        except _StartCancelled:  # ``stop`` while starting: no failure to report
            self._teardown()
            with self._lock:
                self._state = ServerState.STOPPED
        except FutureTimeout:
            why = f": {self._protocol_error}" if self._protocol_error else ""
            self._fail(f"did not start within {timeout_s:g} s{why}{self._last_words()}")
            self._teardown()
        except Exception as error:  # whatever the child did is reported, not raised
            why = self._http_error or _one_line(error)
            self._fail(f"{why}{self._last_words()}")
            self._teardown()
        else:
            with self._lock:
                self._state, self._tools = ServerState.READY, tools
            self._announce()
        return self.status()

    async def _hold(self, ready: Future) -> None:
        from mcp.client.session import ClientSession

        self._closing = asyncio.Event()
        self._task = asyncio.current_task()
        self._held, self._protocol_error, self._http_error = False, "", ""
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(
                    ClientSession(read, write, message_handler=self._on_message)
                )
                await session.initialize()
                listed = await session.list_tools()
                tools = tuple(
                    ToolSpec(self.name, tool.name, tool.description or "", _schema(tool.input_schema))
                    for tool in listed.tools
                )
                self._session = session
                self._held = True
                with contextlib.suppress(InvalidStateError):  # unless ``stop`` came first
                    ready.set_result(tools)
                await self._closing.wait()
        except BaseException as error:  # an ExceptionGroup from the SDK's task groups
            if not ready.done():
                with contextlib.suppress(InvalidStateError):
                    ready.set_exception(_leaf(error))
            elif not isinstance(error, asyncio.CancelledError | GeneratorExit):
                self._fail(f"stopped working: {_one_line(_leaf(error))}{self._last_words()}")
        finally:
            self._session, self._held = None, False

    async def _on_response(self, response: Any) -> None:
        # The SDK reports every refusal as "Server returned an error response"; the status
        # is what tells a missing key (401) from a wrong path (404).
        if response.status_code >= 400:
            self._http_error = (
                f"the server answered HTTP {response.status_code} {response.reason_phrase}".strip()
            )

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self._protocol_error = "it wrote something on stdout that is not MCP JSON-RPC"
            ready = self._ready
            if not self._held and ready is not None and not ready.done():
                with contextlib.suppress(InvalidStateError):
                    ready.set_exception(ToolError(self._protocol_error))

    def _transport(self) -> contextlib.AbstractAsyncContextManager:
        if self.config.transport is Transport.HTTP:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            client = create_mcp_http_client(headers=dict(self.config.headers) or None)
            client.event_hooks["response"].append(self._on_response)
            return streamable_http_client(self.config.url, http_client=client)
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=self.config.command,
            args=list(self.config.args),
            env=dict(self.config.env) or None,
            cwd=self.config.cwd,
        )
        return stdio_client(params, errlog=self._stderr)

    def call(self, name: str, arguments: dict, timeout_s: float = DEFAULT_TOOL_CALL_TIMEOUT_S) -> ToolOutcome:
        """Runs one tool; a tool's own error, a timeout or a dead server is an error outcome.
        Raises ``ToolError`` only when the server is not running at all."""
        loop, session = self._loop, self._session
        if loop is None or session is None or self._state is not ServerState.READY:
            raise ToolError(f"Tool server {self.name!r} is not running.")
        began = time.monotonic()
        late = f"The tool did not answer within {timeout_s:g} s."
        future = asyncio.run_coroutine_threadsafe(
            session.call_tool(name, arguments, read_timeout_seconds=timeout_s), loop
        )
        try:
            result = future.result(timeout=timeout_s + 1.0)
        except (FutureTimeout, TimeoutError):
            future.cancel()
            return ToolOutcome(late, True, time.monotonic() - began)
        except Exception as error:  # a crash or a protocol error, told in one line
            message = _one_line(_leaf(error))
            if "timed out" in message.lower():
                return ToolOutcome(late, True, time.monotonic() - began)
            if getattr(error, "code", None) == _CONNECTION_CLOSED or self._protocol_error:
                self._fail(f"stopped working: {message}{self._last_words()}")
                self._teardown()
                message = f"The tool server {self.name!r} stopped: {message}"
                return ToolOutcome(message, True, time.monotonic() - began)
            return ToolOutcome(f"The tool failed: {message}", True, time.monotonic() - began)
        return ToolOutcome(_result_text(result), bool(result.is_error), time.monotonic() - began)

    def stop(self) -> None:
        """Closes the session (the SDK stops the child: stdin closed, SIGTERM, SIGKILL). A
        start in progress is given up at once rather than waited for (quitting must not
        wait out a slow server's start timeout)."""
        ready, cancelled = self._ready, False
        if ready is not None and not ready.done():
            with contextlib.suppress(InvalidStateError):
                ready.set_exception(_StartCancelled())
                cancelled = True
        with self._life:
            self._teardown()
        with self._lock:
            if cancelled or self._state is not ServerState.FAILED:
                self._state, self._tools, self._error = ServerState.STOPPED, (), ""
        self._announce()

    def _teardown(self) -> None:
        loop, thread, holder = self._loop, self._thread, self._holder
        self._loop = self._thread = self._holder = None
        self._session = None
        if loop is None:
            return
        if holder is not None:
            with contextlib.suppress(BaseException):
                asyncio.run_coroutine_threadsafe(self._close(), loop).result(timeout=_STOP_GRACE_S + 5.0)
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=2.0)
        if thread is None or not thread.is_alive():
            loop.close()

    async def _close(self) -> None:
        """Ends the holder: a clean close when the session is open (the SDK stops the child
        within its own grace), a cancel when it is still starting; either way it waits for
        the SDK's shielded shutdown, so no child outlives this."""
        task, closing = self._task, self._closing
        if task is None or task.done():
            return
        if self._held and closing is not None:
            closing.set()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(task), _STOP_GRACE_S)
        if not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=5.0)

    def _fail(self, why: str) -> None:
        with self._lock:
            self._state, self._tools, self._error = ServerState.FAILED, (), why
        self._announce()

    def _announce(self) -> None:
        if self._on_status is not None:
            self._on_status(self.status())

    def _last_words(self) -> str:
        """The child's last stderr line, which is usually why it exited."""
        lines = [line.strip() for line in self.stderr_tail().splitlines() if line.strip()]
        return f" (stderr: {lines[-1][:200]})" if lines else ""


def _schema(schema: Any) -> dict:
    return schema if isinstance(schema, dict) and schema else {"type": "object", "properties": {}}


def _leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _one_line(error: BaseException) -> str:
    if isinstance(error, FileNotFoundError):
        return f"command not found: {error.filename or error}"
    text = " ".join(str(error).split()) or type(error).__name__
    return text[:300]


def _result_text(result: Any) -> str:
    parts: list[str] = []
    for block in result.content or ():
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            size = len(block.data or "") * 3 // 4
            parts.append(f"[{kind}: {getattr(block, 'mime_type', '')}, {size} bytes]")
        elif kind == "resource":
            resource = block.resource
            parts.append(getattr(resource, "text", None) or f"[resource: {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[resource: {block.uri}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)
