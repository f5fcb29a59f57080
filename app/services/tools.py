"""The window's MCP servers (issue 29): ``mcp.json`` read and saved, a ``Toolbox`` over it,
and all server work (starting, stopping, calls) on worker threads, so a slow or hung server
never freezes the window. Answers come back as queued signals on the GUI thread."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal

from app.platform.paths import AppPaths
from app.settings.preferences import SettingsStore
from app.settings.tool_settings import ToolTrust
from engine import (
    CallStatus,
    McpConfigError,
    ServerConfig,
    ServerStatus,
    Toolbox,
    ToolCall,
    ToolCallRecord,
    ToolSpec,
    read_mcp_config,
    write_mcp_config,
)

log = logging.getLogger("hearth.tools")

SHUTDOWN_WAIT_S = 10.0  # quitting waits at most this for the servers' children to end
GONE = "Not run: the reply was stopped."


class ToolsService(QObject):
    changed = Signal()  # configs or statuses changed
    call_done = Signal(object, object)  # (token, ToolCallRecord)
    _status = Signal(object)  # ServerStatus, from a worker thread
    _finished = Signal(object, object)  # (token, ToolCallRecord), from a worker thread

    def __init__(self, paths: AppPaths, store: SettingsStore, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.path: Path = paths.mcp_config
        self.trust = ToolTrust(store)
        self._config_error = ""
        configs = self._read()
        self.toolbox = Toolbox(configs, on_status=self._status.emit)
        self._servers = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mcp-servers")
        self._calls = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mcp-calls")
        self._cancelled: set[object] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._status.connect(lambda _status: self.changed.emit(), Qt.ConnectionType.QueuedConnection)
        self._finished.connect(self._deliver, Qt.ConnectionType.QueuedConnection)

    def _read(self) -> tuple[ServerConfig, ...]:
        try:
            configs = read_mcp_config(self.path)
        except McpConfigError as error:
            self._config_error = error.message
            log.warning("%s", error.message)
            return ()
        self._config_error = ""
        return configs

    # -- servers --------------------------------------------------------------------------------

    def start(self) -> None:
        """Starts every enabled server, off the GUI thread."""
        for config in self.configs():
            if config.enabled:
                self._background(self.toolbox.start, config.name)

    def shutdown(self) -> None:
        """Stops every server and waits (bounded) for their children to end."""
        if self._closed:
            return
        self._closed = True
        self.blockSignals(True)  # what the servers say while stopping reaches no page now
        self._servers.shutdown(wait=False, cancel_futures=True)
        self._calls.shutdown(wait=False, cancel_futures=True)
        stopper = threading.Thread(target=self.toolbox.stop_all, name="mcp-shutdown", daemon=True)
        stopper.start()
        stopper.join(SHUTDOWN_WAIT_S)

    def configs(self) -> tuple[ServerConfig, ...]:
        return self.toolbox.configs()

    def statuses(self) -> tuple[ServerStatus, ...]:
        return self.toolbox.statuses()

    def status(self, name: str) -> ServerStatus | None:
        return next((status for status in self.statuses() if status.name == name), None)

    def config_error(self) -> str:
        return self._config_error

    def add(self, config: ServerConfig) -> None:
        if any(old.name == config.name for old in self.configs()):
            raise McpConfigError(f"There is already a tool server named {config.name!r}.")
        self._save((*self.configs(), config))
        if config.enabled:
            self._background(self.toolbox.start, config.name)

    def update(self, old_name: str, config: ServerConfig) -> None:
        names = [old.name for old in self.configs()]
        if config.name != old_name and config.name in names:
            raise McpConfigError(f"There is already a tool server named {config.name!r}.")
        self._save(tuple(config if old.name == old_name else old for old in self.configs()))
        if config.name != old_name:  # a later server given the old name inherits no trust
            self.trust.forget_server(old_name)
        if config.enabled:
            self._background(self.toolbox.start, config.name)

    def remove(self, name: str) -> None:
        self._save(tuple(old for old in self.configs() if old.name != name))
        self.trust.forget_server(name)

    def set_enabled(self, name: str, on: bool) -> None:
        self._save(tuple(replace(old, enabled=on) if old.name == name else old for old in self.configs()))
        if on:
            self._background(self.toolbox.start, name)

    def restart(self, name: str) -> None:
        self._background(self.toolbox.restart, name)

    def import_file(self, path: Path) -> int:
        """Adds the servers of another app's config (Claude Desktop, LM Studio, Cursor); a
        name Hearth has already is kept as it is. Returns how many were added."""
        incoming = read_mcp_config(Path(path))
        if not incoming and not Path(path).is_file():
            raise McpConfigError(f"{Path(path).name} does not exist.")
        names = {old.name for old in self.configs()}
        added = tuple(config for config in incoming if config.name not in names)
        if added:
            self._save((*self.configs(), *added))
            for config in added:
                if config.enabled:
                    self._background(self.toolbox.start, config.name)
        return len(added)

    def _save(self, configs: tuple[ServerConfig, ...]) -> None:
        if self._config_error:  # saving now would replace the user's file with what parsed: nothing
            raise McpConfigError(f"Fix {self.path} first: {self._config_error}")
        try:
            write_mcp_config(self.path, configs)
        except OSError as error:
            raise McpConfigError(f"{self.path.name} cannot be saved: {error.strerror or error}") from None
        self._config_error = ""
        # Stopping a removed or changed server waits for its child: not on the GUI thread.
        for server in self.toolbox.replace_configs(configs, stop=False):
            self._background(server.stop)
        self.changed.emit()

    def _background(self, work: Callable, *args: object) -> None:
        if self._closed:
            return

        def run() -> None:
            try:
                work(*args)
            except Exception:  # a server's failure is its status; anything else is a bug to log
                log.exception("tool server work failed")
            self._status.emit(None)

        self._servers.submit(run)

    # -- tools and calls ------------------------------------------------------------------------

    def tools(self, off: Collection[str] = ()) -> tuple[ToolSpec, ...]:
        return self.toolbox.tools(off)

    def openai_tools(self, off: Collection[str] = ()) -> tuple[dict, ...]:
        return self.toolbox.openai_tools(off)

    def check(self, call: ToolCall) -> ToolSpec | ToolCallRecord:
        return self.toolbox.check(call)

    def run_call(self, token: object, call: ToolCall) -> None:
        """Runs ``call`` on a worker; ``call_done(token, record)`` follows on the GUI thread."""
        with self._lock:
            self._cancelled.discard(token)
        if self._closed:
            self.call_done.emit(token, ToolCallRecord(call, CallStatus.INTERRUPTED, GONE))
            return
        self._calls.submit(lambda: self._finished.emit(token, self.toolbox.run(call)))

    def cancel_calls(self, token: object) -> None:
        with self._lock:
            self._cancelled.add(token)

    def _deliver(self, token: object, record: ToolCallRecord) -> None:
        with self._lock:
            if token in self._cancelled:
                self._cancelled.discard(token)
                return
        self.call_done.emit(token, record)
