"""Work the API does once, counted: the loaded model's facts are taken once per model (not
per request), and a request's tools are checked once (by the engine, at submission)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import app.api.mapping as mapping
import app.api.routes as routes
import engine.requests.request as engine_request
from tests.api_support import ServerThread, load

HELLO = [{"role": "user", "content": "hello"}]
TOOL = {"type": "function", "function": {"name": "now", "description": "The time.", "parameters": {}}}


@pytest.fixture(scope="module")
def models(scripted_model: Path):
    first, second = load(scripted_model, parallel=1), load(scripted_model, parallel=1)
    yield first, second
    first.unload()
    second.unload()


def _counting(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[object]:
    calls: list[object] = []
    original = getattr(module, name)

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_model_facts_are_taken_once_per_loaded_model(models, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch, routes, "model_facts")
    first, second = models
    serving = [first]
    with ServerThread(lambda: serving[0]) as server:
        for _ in range(3):
            status, body = server.post_json("/v1/chat/completions", {"messages": HELLO, "max_tokens": 2})
            assert status == 200, body
        status, _, listing = server.request("GET", "/v1/models")
        assert status == 200 and json.loads(listing)["data"][0]["id"]
        assert len(calls) == 1  # three requests and a listing: one snapshot
        serving[0] = second  # the user loads another model: its facts are taken, once
        for _ in range(2):
            status, body = server.post_json("/v1/chat/completions", {"messages": HELLO, "max_tokens": 2})
            assert status == 200, body
        assert [c[0] for c in calls] == [first, second]


def test_tools_are_checked_once_per_request(models, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch, engine_request, "check_tools")
    assert not hasattr(mapping, "check_tools")  # the mapping leaves them to the engine
    with ServerThread(lambda: models[0]) as server:
        status, body = server.post_json(
            "/v1/chat/completions", {"messages": HELLO, "max_tokens": 2, "tools": [TOOL]}
        )
        assert status == 200, body
        assert len(calls) == 1
        bad = {**TOOL, "function": {**TOOL["function"], "description": 3}}
        status, body = server.post_json("/v1/chat/completions", {"messages": HELLO, "tools": [bad]})
        assert status == 400 and body["error"]["param"] == "tools", body
        assert "description of tool 'now'" in body["error"]["message"]
        assert len(calls) == 2
