"""Many clients at once: parallel streams share the batches, a client that goes away frees
only its own sequence, a full queue is a 429 with Retry-After, and an unload ends the
streams with an error instead of a hang."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from pathlib import Path

import openai
import pytest

from app.api.request_log import CLIENT_CLOSED
from engine import SlotState
from tests.api_support import TIMEOUT, ServerThread, active_sequences, load, wait_until

LONG = {"temperature": 0, "repeat_penalty": 1.0}
HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture()
def looping_server(looping_model: Path):
    model = load(looping_model, parallel=4)
    with ServerThread(lambda: model) as server:
        server.model = model
        yield server
    model.unload()


def test_parallel_streams_are_decoded_together(looping_server: ServerThread) -> None:
    client = looping_server.client()
    tokens = 48
    results: dict[int, tuple[str, int]] = {}
    peak = [0]

    def stream(i: int) -> None:
        chunks = client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": f"stream {i}"}],
            max_tokens=tokens,
            stream=True,
            stream_options={"include_usage": True},
            extra_body=LONG,
        )
        text, usage = "", None
        for chunk in chunks:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
            usage = chunk.usage or usage
        results[i] = (text, usage.completion_tokens)

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        peak[0] = max(peak[0], active_sequences(looping_server.model))
        time.sleep(0.01)
    assert sorted(results) == [0, 1, 2, 3]
    assert all(n == tokens for _, n in results.values())
    assert len({text for text, _ in results.values()}) == 1  # greedy: the same loop each time
    assert peak[0] >= 2  # they held sequences at the same time (one batch), not one after another


def active_owners(model) -> list[str]:
    return sorted(s.owner for s in model.stats().sequences if s.state is SlotState.ACTIVE)


def test_a_client_that_disconnects_frees_only_its_own_sequence(looping_server: ServerThread) -> None:
    model = looping_server.model
    client = looping_server.client()

    def endless(user: str):
        return client.chat.completions.create(
            model="m", messages=HELLO, max_tokens=100_000, stream=True, user=user, extra_body=LONG
        )

    def content(chunk) -> bool:
        return bool(chunk.choices and chunk.choices[0].delta.content)

    survivor, leaving = endless("survivor"), endless("leaving")
    survivor_chunks, leaving_chunks = iter(survivor), iter(leaving)
    for chunks in (survivor_chunks, leaving_chunks):
        while not content(next(chunks)):
            pass
    assert active_owners(model) == ["API · leaving", "API · survivor"]
    closed = time.monotonic()
    leaving.close()  # the connection goes; nothing else is said
    wait_until(lambda: active_owners(model) == ["API · survivor"], timeout=5, what="only the survivor to run")
    assert time.monotonic() - closed < 2.0
    # The survivor still streams after the other one left.
    received = sum(content(next(survivor_chunks)) for _ in range(5))
    assert received >= 1
    records = looping_server.call(lambda: list(looping_server.server.log.records))
    assert any(r.status == CLIENT_CLOSED and r.stream for r in records)
    survivor.close()
    wait_until(lambda: active_owners(model) == [], timeout=5, what="the survivor to end")


def test_a_client_that_disconnects_while_queued_is_dropped(looping_model: Path) -> None:
    model = load(looping_model, parallel=1)
    try:
        with ServerThread(lambda: model) as server:
            client = server.client()
            busy = client.chat.completions.create(
                model="m", messages=HELLO, max_tokens=100_000, stream=True, extra_body=LONG
            )
            next(iter(busy))
            # A raw request that waits for the only sequence, then hangs up.
            body = json.dumps({"messages": HELLO, "max_tokens": 100_000, **LONG}).encode()
            sock = socket.create_connection(("127.0.0.1", server.port))
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                         b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))  # fmt: skip
            wait_until(lambda: model.stats().queue_depth == 1, what="the second request to queue")
            sock.close()
            wait_until(lambda: model.stats().queue_depth == 0, timeout=5, what="the queued request to go")
            assert active_sequences(model) == 1  # the first one is untouched
            busy.close()
            wait_until(lambda: active_sequences(model) == 0, timeout=5, what="the stream to end")
    finally:
        model.unload()


def test_a_full_queue_is_a_429_with_retry_after(looping_model: Path) -> None:
    model = load(looping_model, parallel=1, queue_capacity=1)  # one running, one waiting
    try:
        with ServerThread(lambda: model) as server:
            client = server.client()
            running = [
                client.chat.completions.create(
                    model="m", messages=HELLO, max_tokens=100_000, stream=True, extra_body=LONG
                )
            ]
            next(iter(running[0]))
            waiting = threading.Thread(target=lambda: running.append(client.chat.completions.create(
                model="m", messages=HELLO, max_tokens=100_000, stream=True, extra_body=LONG)))  # fmt: skip
            waiting.start()
            wait_until(lambda: model.stats().queue_depth == 1, what="a request to wait")
            started = time.monotonic()
            status, headers, payload = server.request("POST", "/v1/chat/completions", {"messages": HELLO})
            assert time.monotonic() - started < 5  # refused at once, not a hang
            assert status == 429
            assert int(headers["retry-after"]) >= 1
            error = json.loads(payload)["error"]
            assert error["type"] == "rate_limit_error" and "busy" in error["message"]
            with pytest.raises(openai.RateLimitError):
                client.chat.completions.create(model="m", messages=HELLO)
            running[0].close()
            waiting.join(30)
            for stream in running[1:]:
                stream.close()
    finally:
        model.unload()


def test_unloading_mid_stream_ends_the_stream_with_an_error(looping_model: Path) -> None:
    model = load(looping_model, parallel=2)
    current = [model]
    with ServerThread(lambda: current[0]) as server:
        stream = server.client().chat.completions.create(
            model="m", messages=HELLO, max_tokens=100_000, stream=True, extra_body=LONG
        )
        chunks = iter(stream)
        next(chunks)
        current[0] = None
        model.unload()
        with pytest.raises(openai.APIError) as caught:
            for _ in chunks:
                pass
        assert "unloaded" in str(caught.value.message)
        status, body = server.post_json("/v1/chat/completions", {"messages": HELLO})
        assert status == 503 and "No model" in body["error"]["message"]


def test_a_server_that_stops_mid_stream_says_the_reply_was_cut_short(looping_model: Path) -> None:
    """Not finish_reason "stop": a client (Hearth's remote chats among them) must not keep a
    cut reply as complete."""
    model = load(looping_model, parallel=2)
    try:
        with ServerThread(lambda: model) as server:
            stream = server.client().chat.completions.create(
                model="m", messages=HELLO, max_tokens=100_000, stream=True, extra_body=LONG
            )
            chunks = iter(stream)
            next(chunks)
            stopping = asyncio.run_coroutine_threadsafe(server.server.stop(), server.loop)
            reasons = []
            with pytest.raises(openai.APIError) as caught:
                for chunk in chunks:
                    reasons += [c.finish_reason for c in chunk.choices if c.finish_reason]
            stopping.result(TIMEOUT)
            assert "stopped before the reply was finished" in str(caught.value.message)
            assert reasons == []
    finally:
        model.unload()
