"""Who may talk to the server: loopback by default, the API key in constant time, the Host
header against DNS rebinding, browser origins only when listed."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

from app.api import DEFAULT_HOST, ServerConfig
from app.api.guard import host_allowed, host_name
from tests.api_support import ServerThread, load

HELLO = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


@pytest.fixture(scope="module")
def model(scripted_model: Path):
    model = load(scripted_model, parallel=2)
    yield model
    model.unload()


def test_the_default_address_is_loopback() -> None:
    assert DEFAULT_HOST == "127.0.0.1"
    assert ServerConfig().host == "127.0.0.1"
    assert ServerConfig().api_key is None and ServerConfig().cors_origins == ()


def test_an_api_key_is_required_when_set(model) -> None:
    with ServerThread(lambda: model, ServerConfig(port=0, api_key="s3cret")) as server:
        status, body = server.post_json("/v1/chat/completions", HELLO)
        assert status == 401 and body["error"]["type"] == "authentication_error"
        assert "API key" in body["error"]["message"]
        status, body = server.post_json("/v1/chat/completions", HELLO, {"Authorization": "Bearer wrong"})
        assert status == 401 and body["error"]["code"] == "invalid_api_key"
        status, body = server.post_json("/v1/chat/completions", HELLO, {"Authorization": "s3cret"})
        assert status == 401
        status, _, _ = server.request("GET", "/v1/models")
        assert status == 401
        status, _, _ = server.request("GET", "/metrics")
        assert status == 401
        assert server.request("GET", "/health")[0] == 200  # for load balancers and scripts
        with pytest.raises(openai.AuthenticationError):
            server.client(api_key="nope").chat.completions.create(model="m", messages=HELLO["messages"])
        reply = server.client().chat.completions.create(model="m", messages=HELLO["messages"], max_tokens=2)
        assert reply.usage.completion_tokens == 2


def test_the_key_is_compared_in_constant_time() -> None:
    import inspect

    from app.api import guard

    assert "hmac.compare_digest" in inspect.getsource(guard.api_key_guard)


@pytest.mark.parametrize(
    ("header", "bound", "allowed"),
    [
        ("127.0.0.1:8080", "127.0.0.1", True),
        ("localhost:8080", "127.0.0.1", True),
        ("LOCALHOST", "127.0.0.1", True),
        ("[::1]:8080", "127.0.0.1", True),
        ("evil.example:8080", "127.0.0.1", False),
        ("127.0.0.1.evil.example", "127.0.0.1", False),
        ("localhost.evil.example", "127.0.0.1", False),
        ("192.168.1.5:8080", "127.0.0.1", False),
        ("192.168.1.5:8080", "0.0.0.0", True),  # bound to every interface: any address literal
        ("evil.example", "0.0.0.0", False),
        ("mybox.lan:8080", "mybox.lan", True),  # bound to a name: that name
    ],
)
def test_the_host_header_must_name_this_server(header: str, bound: str, allowed: bool) -> None:
    assert host_allowed(header, bound) is allowed


def test_host_name_strips_port_and_brackets() -> None:
    assert host_name("[::1]:80") == "::1"
    assert host_name("Example.COM:80") == "example.com"
    assert host_name("::1") == "::1"


def test_a_rebound_host_is_refused_over_http(model) -> None:
    with ServerThread(lambda: model) as server:
        status, _, payload = server.request(
            "POST", "/v1/chat/completions", HELLO, {"Host": "attacker.example"}
        )
        body = json.loads(payload)
        assert status == 403 and body["error"]["code"] == "host_not_allowed"
        assert "attacker.example" in body["error"]["message"]
        status, _, _ = server.request("GET", "/v1/models", headers={"Host": f"localhost:{server.port}"})
        assert status == 200


def test_browser_pages_are_refused_unless_listed(model) -> None:
    page = {"Origin": "http://evil.example"}
    with ServerThread(lambda: model) as server:
        status, headers, payload = server.request("POST", "/v1/chat/completions", HELLO, page)
        assert status == 403 and "--cors-origin" in json.loads(payload)["error"]["message"]
        assert "access-control-allow-origin" not in headers
        status, headers, _ = server.request("OPTIONS", "/v1/chat/completions", headers=page)
        assert status == 403 and "access-control-allow-origin" not in headers


def test_a_listed_origin_gets_cors_headers_streams_included(model) -> None:
    app = "http://app.example:3000"
    config = ServerConfig(port=0, cors_origins=(app,), api_key="k")
    with ServerThread(lambda: model, config) as server:
        status, headers, _ = server.request(
            "OPTIONS", "/v1/chat/completions",
            headers={"Origin": app, "Access-Control-Request-Method": "POST",
                     "Access-Control-Request-Headers": "authorization, content-type"},
        )  # fmt: skip
        assert status == 204  # a preflight carries no key: answered before the key is checked
        assert headers["access-control-allow-origin"] == app
        assert "POST" in headers["access-control-allow-methods"]
        assert "Authorization" in headers["access-control-allow-headers"]
        auth = {"Origin": app, "Authorization": "Bearer k"}
        status, headers, _ = server.request("POST", "/v1/chat/completions", {**HELLO, "stream": True}, auth)
        assert status == 200 and headers["access-control-allow-origin"] == app
        status, headers, _ = server.request("POST", "/v1/chat/completions", HELLO, {"Origin": app})
        assert status == 401 and headers["access-control-allow-origin"] == app  # the page may read why
        status, _, _ = server.request(
            "POST", "/v1/chat/completions", HELLO, {"Origin": "http://other.example"}
        )
        assert status == 403
