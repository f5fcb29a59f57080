"""Who may talk to the server: the Host header (DNS rebinding), the browser Origin (CORS),
the API key. Each is an aiohttp middleware answering in OpenAI's error shape.

- Host: a web page can make a name it controls resolve to 127.0.0.1 and then talk to a
  local server as if same-origin. So the Host header must name the bound address or
  localhost (or, when bound to every interface, any IP address): a domain name is refused.
- Origin: browsers send it; other programs do not. A page's origin must be listed (CORS
  is off by default), or the request is refused before it costs anything.
- API key: with one set, every request but ``/health`` needs ``Authorization: Bearer KEY``,
  compared in constant time.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable

from aiohttp import web

from app.api.errors import ApiError, ErrorType

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"", "0.0.0.0", "::"})
PUBLIC_PATHS = frozenset({"/health", "/v1/health"})
CORS_METHODS = "GET, POST, OPTIONS"
CORS_HEADERS = "Authorization, Content-Type"


def host_name(header: str) -> str:
    """The name in a Host header, without its port or IPv6 brackets, lower case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    if header.count(":") > 1:  # a bare IPv6 address: no port without brackets
        return header
    name, _, port = header.rpartition(":")
    return name if name and port.isdigit() else header


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def host_allowed(header: str, bound: str) -> bool:
    name = host_name(header)
    if name in LOCAL_NAMES or name == host_name(bound):
        return True
    return bound in WILDCARDS and _is_ip(name)


def host_guard(bound: str) -> Callable:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        header = request.headers.get("Host", "")
        if header and not host_allowed(header, bound):
            raise ApiError(
                403,
                f"Host '{host_name(header)[:60]}' is not this server's address: use localhost or {bound}.",
                ErrorType.PERMISSION,
                code="host_not_allowed",
            )
        return await handler(request)

    return middleware


def origin_guard(origins: tuple[str, ...]) -> Callable:
    allowed = frozenset(o.rstrip("/") for o in origins)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is None:
            return await handler(request)
        if "*" not in allowed and origin.rstrip("/") not in allowed:
            hint = "start the server with --cors-origin" if not allowed else "it is not in the listed origins"
            raise ApiError(403, f"Requests from the web page at {origin[:80]} are not allowed ({hint}).",
                           ErrorType.PERMISSION, code="origin_not_allowed")  # fmt: skip
        if request.method == "OPTIONS":  # a preflight: answered here, before any auth
            return web.Response(status=204, headers=cors_headers(origin) | {
                "Access-Control-Allow-Methods": CORS_METHODS,
                "Access-Control-Allow-Headers": CORS_HEADERS,
                "Access-Control-Max-Age": "600",
            })  # fmt: skip
        return await handler(request)

    return middleware


def cors_headers(origin: str) -> dict[str, str]:
    return {"Access-Control-Allow-Origin": origin, "Vary": "Origin"}


def cors_responder(origins: tuple[str, ...]) -> Callable:
    """For ``on_response_prepare``: a listed origin may read the response (streams and
    errors included)."""
    allowed = frozenset(o.rstrip("/") for o in origins)

    async def add_headers(request: web.Request, response: web.StreamResponse) -> None:
        origin = request.headers.get("Origin")
        if origin is None or "Access-Control-Allow-Origin" in response.headers:
            return
        if "*" in allowed or origin.rstrip("/") in allowed:
            response.headers.update(cors_headers(origin))

    return add_headers


def api_key_guard(key: str) -> Callable:
    expected = f"Bearer {key}".encode()

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in PUBLIC_PATHS:
            given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
            if not hmac.compare_digest(given, expected):
                message = "Invalid API key." if given else "An API key is needed: Authorization: Bearer KEY."
                raise ApiError(401, message, ErrorType.AUTHENTICATION, code="invalid_api_key")
        return await handler(request)

    return middleware
