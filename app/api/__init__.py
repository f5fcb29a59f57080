"""Hearth's OpenAI-compatible HTTP API: a front end beside the window and the CLI.

It turns HTTP requests into ``ChatRequest``s on the same ``LoadedModel``, so an editor's
request and a chat in the window share the engine's batches and its prefix cache.

- ``server``: ``ApiServer`` / ``ServerConfig`` — aiohttp on the running asyncio loop
  (qasync in the window, a plain loop under ``hearth serve``).
- ``routes``: the endpoints; ``mapping`` + ``messages`` + ``fields``: a request body → a
  ``ChatRequest`` or a 400 naming the field; ``body``: JSON bodies, capped.
- ``bridge``: an engine request's events, from the executor thread onto the loop.
- ``responses`` + ``sse``: OpenAI's JSON shapes and server-sent events.
- ``guard``: Host header, Origin (CORS), API key; ``errors``: OpenAI's error shape.
- ``metrics``, ``request_log``, ``reply_cache``: counters, one record per request, and
  the replies' token ids for the next turn's cache.
- ``headless``: ``hearth serve``.
"""

from app.api.request_log import RequestLog, RequestRecord
from app.api.server import DEFAULT_HOST, DEFAULT_PORT, ApiServer, ServerConfig, ServerStartFailed

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "ApiServer",
    "RequestLog",
    "RequestRecord",
    "ServerConfig",
    "ServerStartFailed",
]
