"""RemoteModel against the real Hearth server on loopback: the models it lists, a reply
streamed with the same events as a local one, a stop that frees the server's sequence,
a stream cut off mid-reply, a wrong key, an unreachable host, a bad URL."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest

from app.api import ServerConfig
from engine import (
    GREEDY,
    ChatMessage,
    ChatModel,
    ChatRequest,
    Completed,
    Failed,
    RemoteBadUrl,
    RemoteEndpoint,
    RemoteInterrupted,
    RemoteModel,
    RemoteUnauthorized,
    RemoteUnreachable,
    StopReason,
    TextDelta,
    list_models,
    normalize_base_url,
)
from engine.requests.events import Event, Started
from tests.api_support import Serve, ServerThread, active_sequences, load, wait_until
from tests.conftest import SCRIPT_TEXT

HELLO = (ChatMessage("user", "hello"),)
KEY = "s3cret-key"


def remote(server: ServerThread, key: str = "") -> RemoteModel:
    (info,) = list_models(RemoteEndpoint(server.base_url, key))
    return RemoteModel(info)


def events_of(handle, timeout: float = 60) -> list[Event]:
    return list(handle.events(timeout=timeout))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_server_lists_its_model_with_its_context(scripted_server: ServerThread) -> None:
    (info,) = list_models(RemoteEndpoint(scripted_server.base_url))
    assert info.model_id == "scripted"
    assert info.context_length == 1024
    assert info.endpoint.where == f"127.0.0.1:{scripted_server.port}"


def test_a_reply_streams_with_the_events_of_a_local_one(scripted_server: ServerThread) -> None:
    model = remote(scripted_server)
    assert isinstance(model, ChatModel)
    handle = model.submit(ChatRequest(messages=HELLO, sampling=GREEDY))
    events = events_of(handle)
    assert isinstance(events[0], Started)
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert "".join(d.text for d in deltas) == SCRIPT_TEXT
    assert all("".join(d.pieces) == d.text for d in deltas)
    done = events[-1]
    assert isinstance(done, Completed)
    completion = done.completion
    assert completion.text == SCRIPT_TEXT and completion.stop_reason is StopReason.STOP_TOKEN
    # What the server reports: its usage and its own decode rate (llama-server's timings).
    assert completion.usage.completion_tokens == 9 and completion.usage.prompt_tokens > 0
    assert completion.timings.decode_tokens_per_second > 0
    assert 0 < completion.timings.ttft < 30


def test_stop_ends_the_reply_at_once_and_frees_the_servers_sequence(looping_model: Path) -> None:
    served = load(looping_model, parallel=2)
    try:
        with ServerThread(lambda: served) as server:
            handle = remote(server).submit(ChatRequest(messages=HELLO, sampling=GREEDY, max_tokens=100_000))
            text = ""
            for event in handle.events(timeout=60):
                if isinstance(event, TextDelta):
                    text += event.text
                    if len(text) > 20:
                        handle.cancel()
                if isinstance(event, Completed | Failed):
                    break
            assert isinstance(event, Completed)
            assert event.completion.stop_reason is StopReason.CANCELLED
            assert event.completion.text == text
            wait_until(lambda: active_sequences(served) == 0, what="the server freeing the sequence")
    finally:
        served.unload()


def test_a_server_killed_mid_stream_interrupts_the_reply(looping_model: Path) -> None:
    serve = Serve(str(looping_model), "--port", "0", "--ctx", "512", "--parallel", "1")
    try:
        model = RemoteModel(list_models(RemoteEndpoint(serve.address()))[0])
        handle = model.submit(ChatRequest(messages=HELLO, sampling=GREEDY, max_tokens=100_000))
        text = ""
        for event in handle.events(timeout=60):
            if isinstance(event, TextDelta):
                text += event.text
                if serve.proc.poll() is None and len(text) > 20:
                    serve.kill()
        assert serve.proc.returncode == -signal.SIGKILL  # the kill landed, mid-stream
        assert isinstance(event, Failed)
        assert isinstance(event.error, RemoteInterrupted)
        assert event.error.message.startswith("Interrupted: the connection to 127.0.0.1:")
        assert len(text) > 20  # what arrived was published before the failure
    finally:
        if serve.proc.poll() is None:
            serve.kill()


def test_a_wrong_key_is_a_401_with_a_clear_message(scripted) -> None:
    with ServerThread(lambda: scripted, ServerConfig(port=0, api_key=KEY)) as server:
        with pytest.raises(RemoteUnauthorized) as listing:
            list_models(RemoteEndpoint(server.base_url, "wrong"))
        where = f"127.0.0.1:{server.port}"
        assert listing.value.message == (
            f"{where} refused the API key (401): check the key under Settings → Remote servers."
        )
        model = remote(server, KEY)  # listed with the right key
        wrong = RemoteModel(type(model.info)(RemoteEndpoint(server.base_url, "wrong"), model.info.model_id))
        (event,) = [e for e in events_of(wrong.submit(ChatRequest(messages=HELLO))) if isinstance(e, Failed)]
        assert isinstance(event.error, RemoteUnauthorized)
        done = events_of(model.submit(ChatRequest(messages=HELLO, sampling=GREEDY)))[-1]
        assert isinstance(done, Completed) and done.completion.text == SCRIPT_TEXT


def test_an_unreachable_host_says_so_in_one_line() -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(RemoteUnreachable) as error:
        list_models(RemoteEndpoint(f"http://127.0.0.1:{port}/v1"))
    assert error.value.message == f"Cannot reach 127.0.0.1:{port}: connection refused."


def test_base_urls_are_normalized_and_bad_ones_refused() -> None:
    assert normalize_base_url(" 127.0.0.1:8080 ") == "http://127.0.0.1:8080/v1"
    assert normalize_base_url("https://box.lan/v1/") == "https://box.lan/v1"
    assert normalize_base_url("http://box:11434/api/v1") == "http://box:11434/api/v1"
    for bad, why in (
        ("", "Enter the server's base URL"),
        ("ftp://box/v1", "is not an http:// or https:// address"),
        ("http://box:99999/v1", "is not a valid address"),
        ("http:///v1", "names no host"),
        ("http://box/v1?x=1", "no ?query"),
    ):
        with pytest.raises(RemoteBadUrl, match=None) as error:
            normalize_base_url(bad)
        assert why in error.value.message, (bad, error.value.message)
