"""The http.client transport downloads read their bodies through (engine/hub/stdlib_transport.py):
httpx's redirects and headers on top, the body read into the caller's buffer, and every
failure raised as the httpx exception httpx's own transport would raise."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import httpx
import pytest

from engine.hub import HubAccess, HubClient
from engine.hub.stdlib_transport import READINTO, StdlibTransport, body_client, readinto_of
from tests.fake_hub import FakeHub
from tests.hub_fixtures import GATED_REPO, TINY_REPO


def _client() -> httpx.Client:
    return body_client(httpx.Client())


def _resolve(access: HubAccess, repo: str = TINY_REPO) -> str:
    listing = HubClient(access).repo_files(repo)
    return access.resolve_url(listing.repo_id, listing.commit, listing.quants[0].first.path)


def _read_all(response: httpx.Response, size: int = 1 << 16) -> bytes:
    read = readinto_of(response)
    assert read is not None
    buffer = memoryview(bytearray(size))
    out = bytearray()
    while n := read(buffer):
        out += buffer[:n]
    return bytes(out)


def test_a_body_after_the_hub_s_redirect_is_read_into_the_caller_s_buffer(
    fake_hub: FakeHub, hub_access: HubAccess, hub_files: dict[str, Path]
) -> None:
    with _client() as client, client.stream("GET", _resolve(hub_access)) as response:
        assert response.status_code == 200 and [r.status_code for r in response.history] == [302]
        assert response.url.host == "localhost"  # the fake's CDN
        assert _read_all(response) == hub_files["q8"].read_bytes()


def test_a_range_is_sent_and_answered(hub_access: HubAccess, hub_files: dict[str, Path]) -> None:
    headers = {"Range": "bytes=1000-", "Accept-Encoding": "identity"}
    with _client() as client, client.stream("GET", _resolve(hub_access), headers=headers) as response:
        assert response.status_code == 206
        assert response.headers["Content-Range"].startswith("bytes 1000-")
        assert _read_all(response) == hub_files["q8"].read_bytes()[1000:]


def test_the_token_stays_with_the_hub(fake_hub: FakeHub, hub_access: HubAccess) -> None:
    url = _resolve(HubAccess(hub_access.endpoint, fake_hub.token), GATED_REPO)
    fake_hub.clear_log()
    headers = {"Authorization": f"Bearer {fake_hub.token}"}
    with _client() as client, client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200
        _read_all(response)
    (resolve, cdn) = fake_hub.log
    assert resolve.authorization == f"Bearer {fake_hub.token}" and cdn.authorization is None


def test_httpx_reads_and_iterates_the_same_bodies(hub_access: HubAccess, hub_files: dict[str, Path]) -> None:
    with _client() as client:
        assert client.get(_resolve(hub_access)).content == hub_files["q8"].read_bytes()
        head = client.head(_resolve(hub_access))
        assert head.status_code == 200 and head.content == b""


def test_a_read_returns_what_has_arrived_without_waiting_to_fill_the_buffer(
    fake_hub: FakeHub, hub_access: HubAccess
) -> None:
    fake_hub.faults.trickle_bytes_per_s = 20_000  # pieces of 1,000 bytes, 20 a second
    with _client() as client, client.stream("GET", _resolve(hub_access)) as response:
        read = readinto_of(response)
        assert read is not None
        assert 0 < read(memoryview(bytearray(1 << 20))) <= 2_000


def test_a_body_shorter_than_its_content_length_is_a_protocol_error(
    fake_hub: FakeHub, hub_access: HubAccess
) -> None:
    fake_hub.faults.lie_length = 5000
    missing = pytest.raises(httpx.RemoteProtocolError, match="5000 bytes missing")
    with _client() as client, client.stream("GET", _resolve(hub_access)) as response, missing:
        _read_all(response)
    assert fake_hub.fired["lies"] == 1


def test_a_dropped_connection_is_a_protocol_error(fake_hub: FakeHub, hub_access: HubAccess) -> None:
    fake_hub.faults.drop_at = 100_000
    broken = pytest.raises(httpx.RemoteProtocolError)
    with _client() as client, client.stream("GET", _resolve(hub_access)) as response, broken:
        _read_all(response)
    assert fake_hub.fired["drops"] == 1


def test_a_stall_is_a_read_timeout(fake_hub: FakeHub, hub_access: HubAccess) -> None:
    fake_hub.faults.trickle_bytes_per_s = 2
    timeout = httpx.Timeout(5.0, read=0.2)
    stalled = pytest.raises(httpx.ReadTimeout)
    url = _resolve(hub_access)
    with _client() as client, client.stream("GET", url, timeout=timeout) as response, stalled:
        _read_all(response)


def test_nobody_listening_is_a_connect_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with _client() as client, pytest.raises(httpx.ConnectError):
        client.get(f"http://127.0.0.1:{port}/x")


def test_a_server_that_hangs_up_before_answering_is_a_protocol_error() -> None:
    server = socket.create_server(("127.0.0.1", 0))

    def hang_up() -> None:
        conn, _ = server.accept()
        conn.recv(4096)
        conn.close()

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    try:
        with _client() as client, pytest.raises(httpx.RemoteProtocolError):
            client.get(f"http://127.0.0.1:{server.getsockname()[1]}/x")
    finally:
        thread.join(5)
        server.close()


def test_a_certificate_that_does_not_verify_is_a_connect_error(tmp_path: Path) -> None:
    """A TLS server with a self-signed certificate: verification is on, as in httpx."""
    import ssl
    import subprocess

    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    try:
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
             "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"],
            check=True, capture_output=True,
        )  # fmt: skip
    except (FileNotFoundError, subprocess.CalledProcessError):
        pytest.skip("openssl is not available")
    server = socket.create_server(("127.0.0.1", 0))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    def handshake() -> None:
        conn, _ = server.accept()
        try:
            with context.wrap_socket(conn, server_side=True):
                pass
        except (ssl.SSLError, OSError):
            pass

    thread = threading.Thread(target=handshake, daemon=True)
    thread.start()
    try:
        with _client() as client, pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            client.get(f"https://127.0.0.1:{server.getsockname()[1]}/x")
    finally:
        thread.join(5)
        server.close()


def test_a_response_from_another_transport_has_no_reader(hub_access: HubAccess) -> None:
    plain = httpx.Client(follow_redirects=True)
    with plain as client, client.stream("GET", _resolve(hub_access)) as response:
        assert READINTO not in response.extensions and readinto_of(response) is None


def test_the_ssl_context_is_made_only_for_https() -> None:
    transport = StdlibTransport()
    assert transport._ssl is None
    context = transport.ssl_context()
    assert context.verify_mode.name == "CERT_REQUIRED" and context.check_hostname
    assert transport.ssl_context() is context
