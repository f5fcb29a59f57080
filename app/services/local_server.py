"""The window's Local server: the API (``app.api``) serving whatever model the session has
loaded, on the window's own event loop (qasync), switched on and off by the user.

The switch and the port are remembered in the store, so a server left on comes back on
with the window. Requests from other programs land in the same engine as the window's
chats: they share its batches and its prefix cache, and the dashboard shows them as their
own sequences (owner "API · <client>").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from app.api import DEFAULT_PORT, ApiServer, RequestRecord, ServerConfig
from app.state.serving import ServerStatus
from app.store.history import Store
from engine import EngineError, LoadedModel

ENABLED_KEY = "server.enabled"
PORT_KEY = "server.port"
STOP_TIMEOUT = 3.0  # seconds the window waits for the server to close when it quits


class LocalServer(QObject):
    status_changed = Signal(object)  # ServerStatus
    request_logged = Signal(object)  # RequestRecord

    def __init__(
        self,
        store: Store,
        model: Callable[[], LoadedModel | None],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._store = store
        self._model = model
        self.status = ServerStatus.OFF
        self.error = ""
        self.port = _valid_port(store.get_setting(PORT_KEY, DEFAULT_PORT))
        self._server: ApiServer | None = None
        self._task: asyncio.Future | None = None

    # -- what the window reads ---------------------------------------------------------

    @property
    def remembered_on(self) -> bool:
        return bool(self._store.get_setting(ENABLED_KEY, False))

    @property
    def address(self) -> str:
        """The base URL clients use (while on), else ""."""
        return self._server.address if self._server is not None and self.status is ServerStatus.ON else ""

    @property
    def bound_port(self) -> int:
        """The port it listens on (while on), else 0."""
        return self._server.port if self._server is not None and self.status is ServerStatus.ON else 0

    @property
    def records(self) -> tuple[RequestRecord, ...]:
        return tuple(self._server.log.records) if self._server is not None else ()

    # -- switching -----------------------------------------------------------------------

    def set_enabled(self, on: bool) -> None:
        self._store.set_setting(ENABLED_KEY, on)
        if on and self.status in (ServerStatus.OFF, ServerStatus.FAILED):
            self._schedule(self._start())
        elif not on and self.status in (ServerStatus.ON, ServerStatus.STARTING):
            self._schedule(self._stop())

    def set_port(self, port: int) -> None:
        """A new port: remembered, and a running server moves to it."""
        port = _valid_port(port)
        if port == self.port:
            return
        self.port = port
        self._store.set_setting(PORT_KEY, port)
        if self.status in (ServerStatus.ON, ServerStatus.STARTING, ServerStatus.FAILED):
            self._schedule(self._restart())

    def restore(self) -> None:
        """Switch on if it was on when the window last closed."""
        if self.remembered_on:
            self.set_enabled(True)

    def shutdown(self) -> None:
        """The window closes: requests end now, the socket closes on the loop (``stopped``)."""
        if self._server is not None:
            for stream in list(self._server.state.streams):
                stream.cancel()
            self._schedule(self._stop())

    async def stopped(self) -> None:
        if self._task is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._task), STOP_TIMEOUT)

    # -- on the event loop ------------------------------------------------------------

    def _schedule(self, step) -> None:  # step: a coroutine
        previous = self._task

        async def after_previous() -> None:
            if previous is not None and not previous.done():
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await previous
            await step

        try:
            loop = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:  # no event loop any more (the application is ending): nothing runs
            step.close()
            return
        self._task = asyncio.ensure_future(after_previous(), loop=loop)

    async def _start(self) -> None:
        if self._server is not None:
            return
        self._set_status(ServerStatus.STARTING)
        server = ApiServer(ServerConfig(port=self.port), self._model, on_request=self.request_logged.emit)
        try:
            await server.start()
        except EngineError as exc:
            self.error = exc.message
            self._set_status(ServerStatus.FAILED)
            return
        self._server, self.error = server, ""
        self._set_status(ServerStatus.ON)

    async def _stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await server.stop()
        self.error = ""
        self._set_status(ServerStatus.OFF)

    async def _restart(self) -> None:
        await self._stop()
        await self._start()

    def _set_status(self, status: ServerStatus) -> None:
        self.status = status
        self.status_changed.emit(status)


def _valid_port(value: object) -> int:
    return value if isinstance(value, int) and 0 <= value <= 65535 else DEFAULT_PORT
