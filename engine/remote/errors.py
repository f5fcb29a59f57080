"""Typed errors of a remote OpenAI-compatible server, each with a one-line message that
names the server and says what to do."""

from __future__ import annotations

import errno

from engine.base.errors import EngineError, ReplyInterrupted


class RemoteError(EngineError):
    """A remote server could not be used."""


class RemoteBadUrl(RemoteError):
    """The base URL is not an http(s) address Hearth can talk to."""


class RemoteUnauthorized(RemoteError):
    """The server refused the API key (401/403)."""


class RemoteUnreachable(RemoteError):
    """Nothing answered: refused, unknown host, no route, or a timeout."""


class RemoteRefused(RemoteError):
    """The server answered the request with an error status."""


class RemoteInterrupted(ReplyInterrupted, RemoteError):
    """The stream broke off mid-reply: what arrived stands, and the reply can be continued."""


_ERRNO_TEXT = {
    errno.ECONNREFUSED: "connection refused",
    errno.EHOSTUNREACH: "no route to host",
    errno.ENETUNREACH: "network unreachable",
    errno.ECONNRESET: "connection reset",
    errno.ETIMEDOUT: "timed out",
}


def connection_reason(exc: BaseException) -> str:
    """Why a connection failed, in a few words, from the innermost OS error if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno is not None:
            return _ERRNO_TEXT.get(current.errno) or (current.strerror or str(current)).lower()
        text = str(current)
        if "Name or service not known" in text or "nodename nor servname" in text:
            return "unknown host"
        if "Connection refused" in text:
            return "connection refused"
        current = current.__cause__ or current.__context__
    return (str(exc).splitlines() or ["no answer"])[0].rstrip(".").lower() or "no answer"


def one_line(text: str, limit: int = 160) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def status_error(where: str, status: int, server_message: str = "") -> RemoteError:
    """The error for an HTTP error status from ``where`` (host:port)."""
    said = f": {one_line(server_message)}" if server_message else ""
    if status in (401, 403):
        return RemoteUnauthorized(
            f"{where} refused the API key ({status}): check the key under Settings → Remote servers."
        )
    if status == 404:
        return RemoteRefused(
            f"{where} answered 404 Not Found{said} — check the base URL (it usually ends in /v1)."
        )
    return RemoteRefused(f"{where} refused the request ({status}){said}.")


def transport_errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(timeouts, transport failures) of the HTTP library under the ``openai`` SDK, and the
    SDK's own: the SDK moved from ``httpx`` to ``httpx2`` in 3.x, and a stream read outside
    the SDK's own calls raises the library's errors unwrapped."""
    import importlib

    import openai

    timeouts: list[type[BaseException]] = [openai.APITimeoutError]
    failures: list[type[BaseException]] = [openai.APIConnectionError]
    for name in ("httpx", "httpx2"):
        try:
            http = importlib.import_module(name)
        except ImportError:
            continue
        timeouts.append(http.TimeoutException)
        failures.append(http.TransportError)
    return tuple(timeouts), tuple(failures)


def translate(exc: BaseException, where: str, timeout: float) -> RemoteError:
    """An ``openai`` or HTTP-library exception as Hearth's own, for ``where``."""
    import openai

    if isinstance(exc, RemoteError):
        return exc
    if isinstance(exc, openai.APIStatusError):
        return status_error(where, exc.status_code, _server_message(exc))
    timeouts, failures = transport_errors()
    if isinstance(exc, timeouts):
        return RemoteUnreachable(f"{where} did not answer within {timeout:g} s.")
    if isinstance(exc, failures):
        return RemoteUnreachable(f"Cannot reach {where}: {connection_reason(exc)}.")
    if isinstance(exc, openai.APIError):
        return RemoteRefused(f"{where}: {one_line(exc.message)}")
    what = one_line(str(exc) or type(exc).__name__)
    return RemoteRefused(f"{where} sent an answer Hearth cannot read: {what}.")


def _server_message(exc: BaseException) -> str:
    """The ``error.message`` of an OpenAI-shaped error body, if the server sent one."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return inner["message"]
        if isinstance(inner, str):
            return inner
    return ""
