"""An httpx transport on the standard library's ``http.client`` whose response bodies can
be read straight into the caller's buffer.

httpx reads a body 64 KiB at a time through httpcore and h11, each piece copied twice more
and wrapped in Python objects; at loopback speed that costs more than the SHA-256 the
download does. This transport answers the same requests (httpx still follows redirects,
drops ``Authorization`` off the origin, runs the event hooks and keeps the timeouts) and
hands the body over as ``response.extensions[READINTO]``: one read of the socket into a
given buffer, what has arrived up to the buffer's size.

Each request gets its own connection, closed with its response: a download is one long
request, and a pool would only save a handshake per file.
"""

from __future__ import annotations

import contextlib
import http.client
import ssl
import threading
from collections.abc import Callable, Iterator

import httpx

READINTO = "hearth.readinto"  # the response extension: Callable[[memoryview], int]
_ITER_BYTES = 64 << 10


def readinto_of(response: httpx.Response) -> Callable[[memoryview], int] | None:
    """The body's reader when ``response`` came through this transport; None otherwise
    (a proxy from the environment is mounted by httpx on its own transport)."""
    return response.extensions.get(READINTO)


def body_client(like: httpx.Client) -> httpx.Client:
    """A client on this transport with ``like``'s event hooks and environment settings
    (huggingface_hub's session: offline mode, request ids), following redirects as it does."""
    trust_env = like.trust_env
    return httpx.Client(
        transport=StdlibTransport(trust_env=trust_env),
        follow_redirects=True,
        timeout=None,
        event_hooks=like.event_hooks,
        trust_env=trust_env,
    )


class StdlibTransport(httpx.BaseTransport):
    """Verifies certificates as httpx does by default (certifi, or ``SSL_CERT_FILE`` and
    ``SSL_CERT_DIR`` with ``trust_env``)."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None, *, trust_env: bool = True) -> None:
        self._ssl = ssl_context
        self._trust_env = trust_env
        self._lock = threading.Lock()

    def ssl_context(self) -> ssl.SSLContext:
        # Made at the first https request: loading the certificates takes 50 ms.
        with self._lock:
            if self._ssl is None:
                self._ssl = httpx.create_ssl_context(verify=True, trust_env=self._trust_env)
            return self._ssl

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        timeout = request.extensions.get("timeout", {})
        port = url.port
        conn: http.client.HTTPConnection
        if url.scheme == "https":
            conn = http.client.HTTPSConnection(url.host, port or 443, timeout=timeout.get("connect"),
                                               context=self.ssl_context())  # fmt: skip
        elif url.scheme == "http":
            conn = http.client.HTTPConnection(url.host, port or 80, timeout=timeout.get("connect"))
        else:
            raise httpx.UnsupportedProtocol(f"Request URL has an unsupported protocol '{url.scheme}://'.")
        try:
            with _mapped(request, connecting=True):
                conn.connect()
            assert conn.sock is not None
            conn.sock.settimeout(timeout.get("read"))
            with _mapped(request, connecting=False):
                conn.putrequest(request.method, url.raw_path.decode("ascii"), skip_host=True,
                                skip_accept_encoding=True)  # fmt: skip
                for name, value in request.headers.multi_items():  # Host and Accept-Encoding too
                    conn.putheader(name, value)
                body = request.read()
                conn.endheaders(body or None)
                resp = conn.getresponse()
        except BaseException:
            conn.close()
            raise
        stream = _Body(conn, resp, request)
        return httpx.Response(
            resp.status,
            headers=resp.getheaders(),
            stream=stream,
            extensions={
                "http_version": b"HTTP/1.1" if resp.version == 11 else b"HTTP/1.0",
                "reason_phrase": resp.reason.encode("ascii", "replace"),
                READINTO: stream.readinto,
            },
        )


class _Body(httpx.SyncByteStream):
    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse,
                 request: httpx.Request) -> None:  # fmt: skip
        self._conn = conn
        self._resp = resp
        self._request = request
        self._left: int | None = None  # bytes the framing still promises, when it says
        length = resp.getheader("Content-Length")
        if request.method == "HEAD" or resp.status in (204, 304) or resp.status < 200:
            self._left = 0
        elif length is not None and resp.getheader("Transfer-Encoding") is None:
            with contextlib.suppress(ValueError):
                self._left = int(length)

    def readinto(self, view: memoryview) -> int:
        """At most one read of the socket; 0 at the end of the body."""
        if not view:
            return 0
        with _mapped(self._request, connecting=False):
            # readinto1, not readinto: that one waits for the whole buffer, so a slow link
            # would be looked at (stop requests, progress) once a buffer, and a timeout in
            # the middle would lose what the buffer held.
            n = self._resp.readinto1(view)
        if self._left is not None:
            if n == 0 and self._left > 0:
                # http.client ends such a body quietly; h11 (httpx's own transport) does not.
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body "
                    f"({self._left} bytes missing)",
                    request=self._request,
                )
            self._left -= n
        return n

    def __iter__(self) -> Iterator[bytes]:
        buffer = memoryview(bytearray(_ITER_BYTES))
        while n := self.readinto(buffer):
            yield bytes(buffer[:n])

    def close(self) -> None:
        self._resp.close()
        self._conn.close()


@contextlib.contextmanager
def _mapped(request: httpx.Request, *, connecting: bool) -> Iterator[None]:
    """The standard library's errors as the httpx exceptions its own transport raises."""
    try:
        yield
    except TimeoutError as exc:
        kind = httpx.ConnectTimeout if connecting else httpx.ReadTimeout
        raise kind(str(exc) or "timed out", request=request) from exc
    except http.client.HTTPException as exc:  # RemoteDisconnected included (it is an OSError too)
        raise httpx.RemoteProtocolError(str(exc) or type(exc).__name__, request=request) from exc
    except OSError as exc:  # ssl.SSLError included: a certificate that fails is a ConnectError
        kind = httpx.ConnectError if connecting else httpx.ReadError
        raise kind(str(exc) or type(exc).__name__, request=request) from exc
