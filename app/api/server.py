"""The OpenAI-compatible HTTP server: aiohttp on whatever asyncio loop is running.

The window runs it on the Qt event loop (qasync), ``hearth serve`` on a plain asyncio
loop; the code is the same. It serves the model its provider returns at each request, so
the window's server follows whatever the user loads.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from app.api.body import too_large
from app.api.documents import DocumentsSource
from app.api.embeddings import EmbedderProvider
from app.api.errors import ApiError, ErrorType
from app.api.guard import api_key_guard, cors_responder, host_guard, origin_guard
from app.api.request_log import RequestLog, RequestRecord
from app.api.routes import ModelProvider, Routes, ServerState
from engine import DEFAULT_API_HOST, DEFAULT_API_PORT, EngineError

log = logging.getLogger("hearth.api")

DEFAULT_HOST = DEFAULT_API_HOST  # the names the app has always used, from the one source
DEFAULT_PORT = DEFAULT_API_PORT
MAX_BODY_BYTES = 20 * 1024 * 1024
SHUTDOWN_TIMEOUT = 2.0  # seconds open connections get to finish when the server stops


class ServerStartFailed(EngineError):
    """The server could not listen (port taken, address not on this machine...)."""


@dataclass(frozen=True)
class ServerConfig:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT  # 0: any free port (tests)
    api_key: str | None = None
    cors_origins: tuple[str, ...] = ()
    max_body_bytes: int = MAX_BODY_BYTES
    # The documents index a chat request's "documents" field searches (None: refused).
    documents_file: Path | None = None


def url_host(host: str) -> str:
    shown = "127.0.0.1" if host in ("", "0.0.0.0") else ("::1" if host == "::" else host)
    return f"[{shown}]" if ":" in shown else shown


class ApiServer:
    """``await start()``, then ``address``; ``await stop()`` ends every request it serves."""

    def __init__(
        self,
        config: ServerConfig,
        model: ModelProvider,
        on_request: Callable[[RequestRecord], None] | None = None,
        embedder: EmbedderProvider | None = None,
        embedder_refusal: str | None = None,
    ) -> None:
        """``embedder``: the embedding model ``/v1/embeddings`` and document search use;
        ``embedder_refusal``: why there is none (an embedder that did not fit), which
        ``/v1/embeddings`` answers with."""
        self.config = config
        self.state = ServerState(
            model=model,
            max_body_bytes=config.max_body_bytes,
            embedder=embedder,
            embedder_refusal=embedder_refusal,
            documents=DocumentsSource(config.documents_file, embedder),
        )
        if on_request is not None:
            self.state.log.listeners.append(on_request)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def log(self) -> RequestLog:
        return self.state.log

    @property
    def running(self) -> bool:
        return self._runner is not None

    @property
    def base_url(self) -> str:
        return f"http://{url_host(self.config.host)}:{self.port}"

    @property
    def address(self) -> str:
        """What an OpenAI client takes as its base URL."""
        return f"{self.base_url}/v1"

    def build_app(self) -> web.Application:
        config = self.config
        middlewares = [error_middleware(config.max_body_bytes), host_guard(config.host),
                       origin_guard(config.cors_origins)]  # fmt: skip
        if config.api_key:
            middlewares.append(api_key_guard(config.api_key))
        app = web.Application(middlewares=middlewares, client_max_size=config.max_body_bytes)
        app.on_response_prepare.append(cors_responder(config.cors_origins))
        Routes(self.state).install(app)
        return app

    async def start(self) -> None:
        if self._runner is not None:
            return
        runner = web.AppRunner(
            self.build_app(), handler_cancellation=True, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT
        )
        await runner.setup()
        site = web.TCPSite(runner, self.config.host or None, self.config.port, reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise ServerStartFailed(_listen_error(self.config, exc)) from exc
        self._runner = runner
        self.port = runner.addresses[0][1]
        log.info("serving on %s", self.address)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            return
        for stream in list(self.state.streams):
            stream.cancel(server_stopping=True)
        await runner.cleanup()
        self.state.documents.close()


def _listen_error(config: ServerConfig, exc: OSError) -> str:
    where = f"{url_host(config.host)}:{config.port}"
    if exc.errno == errno.EADDRINUSE:
        return f"Port {config.port} is in use on {url_host(config.host)}: choose another port."
    if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
        return f"{config.host} is not an address of this machine."
    if exc.errno == errno.EACCES:
        return f"Listening on {where} needs privileges: choose a port above 1023."
    return f"Could not listen on {where}: {exc.strerror or exc}."


def error_middleware(max_body: int) -> Callable:
    """Every error, whoever raised it, in OpenAI's shape; a bug costs one request a 500."""

    @web.middleware
    async def middleware(request: web.Request, handler: Callable) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiError as exc:
            return exc.response()
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            return _http_error(request, exc, max_body).response()
        except (asyncio.CancelledError, ConnectionResetError):
            raise
        except Exception as exc:
            log.exception("%s %s failed", request.method, request.path)
            return ApiError(500, f"Internal error: {type(exc).__name__}.", ErrorType.SERVER).response()

    return middleware


def _http_error(request: web.Request, exc: web.HTTPException, max_body: int) -> ApiError:
    if exc.status == 404:
        return ApiError(404, f"Unknown endpoint: {request.method} {request.path[:100]}.", ErrorType.NOT_FOUND,
                        code="unknown_url")  # fmt: skip
    if exc.status == 405:
        return ApiError(
            405, f"{request.path[:100]} does not take {request.method}.", code="method_not_allowed"
        )
    if exc.status == 413:
        return too_large(max_body)
    return ApiError(exc.status, exc.reason or "Request refused.")
