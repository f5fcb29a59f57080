"""The API answers like OpenAI's, driven with the official SDK: exact text from the scripted
tiny model, whole and streamed, usage with cached tokens, stop strings, raw completions."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.api_support import ServerThread, load, sse_events
from tests.conftest import SCRIPT_TEXT

GREEDY = {"temperature": 0, "repeat_penalty": 1.0}


@pytest.fixture(scope="module")
def scripted_server(scripted_model: Path):
    model = load(scripted_model)
    with ServerThread(lambda: model) as server:
        server.model = model
        yield server
    model.unload()


def test_a_chat_completion_is_the_model_s_reply(scripted_server: ServerThread) -> None:
    client = scripted_server.client()
    reply = client.chat.completions.create(
        model="anything", messages=[{"role": "user", "content": "hello"}], extra_body=GREEDY
    )
    assert reply.object == "chat.completion"
    assert reply.id.startswith("chatcmpl-")
    assert reply.model == scripted_server.model.plan.model.path.stem
    (choice,) = reply.choices
    assert choice.message.role == "assistant"
    assert choice.message.content == SCRIPT_TEXT
    assert choice.finish_reason == "stop"
    usage = reply.usage
    assert usage.completion_tokens == 9  # the script, its end token not counted
    assert usage.prompt_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens_details.cached_tokens >= 0
    # llama-server's timings, with Hearth's queue time apart from its time to first token.
    timings = reply.model_extra["timings"]
    assert timings["predicted_n"] == 9 and timings["predicted_per_second"] > 0
    assert timings["queued_ms"] >= 0 and timings["ttft_ms"] > 0


def test_streaming_sends_role_then_content_then_finish_and_usage(scripted_server: ServerThread) -> None:
    client = scripted_server.client()
    chunks = list(
        client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hello"}],
            stream=True,
            stream_options={"include_usage": True},
            extra_body=GREEDY,
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == SCRIPT_TEXT
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 9
    assert all(c.usage is None for c in chunks[:-1])
    assert len({c.id for c in chunks}) == 1


def test_the_raw_stream_ends_with_done(scripted_server: ServerThread) -> None:
    status, headers, payload = scripted_server.request(
        "POST",
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "hi"}], "stream": True, **GREEDY},
    )
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    events = sse_events(payload)
    assert events[-1] == "[DONE]"
    assert all(isinstance(e, dict) and e["object"] == "chat.completion.chunk" for e in events[:-1])
    assert "usage" not in events[0]  # only with stream_options.include_usage


def test_max_tokens_cuts_with_finish_reason_length(scripted_server: ServerThread) -> None:
    client = scripted_server.client()
    reply = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hello"}], max_tokens=3, extra_body=GREEDY
    )
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.completion_tokens == 3
    assert reply.choices[0].message.content == "é a"  # é is two byte tokens, then ' a'
    again = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hello"}], max_completion_tokens=2, extra_body=GREEDY
    )
    assert again.usage.completion_tokens == 2


def test_a_stop_string_ends_the_reply_before_it(scripted_server: ServerThread) -> None:
    client = scripted_server.client()
    reply = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hello"}], stop=["你"], extra_body=GREEDY
    )
    assert reply.choices[0].message.content == "é ab"
    assert reply.choices[0].finish_reason == "stop"
    streamed = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hello"}], stop="b", stream=True, extra_body=GREEDY
    )
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == "é a"


def test_the_second_turn_reuses_the_cached_prefix(scripted_server: ServerThread) -> None:
    client = scripted_server.client()
    history = [{"role": "system", "content": "You are terse. " * 20}, {"role": "user", "content": "first"}]
    first = client.chat.completions.create(model="m", messages=history, extra_body=GREEDY)
    history += [{"role": "assistant", "content": first.choices[0].message.content},
                {"role": "user", "content": "second"}]  # fmt: skip
    second = client.chat.completions.create(model="m", messages=history, extra_body=GREEDY)
    cached = second.usage.prompt_tokens_details.cached_tokens
    # Everything before the new user turn, the reply included (spliced with its own ids).
    assert cached >= first.usage.prompt_tokens + first.usage.completion_tokens - 2
    assert cached < second.usage.prompt_tokens


def test_content_parts_are_read_as_text(scripted_server: ServerThread) -> None:
    client = scripted_server.client()
    reply = client.chat.completions.create(
        model="m",
        messages=[
            {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
            {
                "role": "user",
                "content": [{"type": "text", "text": "hello"}, {"type": "text", "text": "there"}],
            },
        ],
        extra_body=GREEDY,
    )
    assert reply.choices[0].message.content == SCRIPT_TEXT


def test_a_final_assistant_message_is_continued(scripted_server: ServerThread) -> None:
    status, body = scripted_server.post_json(
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "é ab"}], **GREEDY},
    )
    assert status == 200
    # The scripted model goes on from the last token it sees ('b'): '你cd'.
    assert body["choices"][0]["message"]["content"] == "你cd"


def test_raw_completions_for_base_models(scripted_server: ServerThread) -> None:
    client = scripted_server.client()
    reply = client.completions.create(model="m", prompt="once upon", max_tokens=4, extra_body=GREEDY)
    assert reply.object == "text_completion"
    assert reply.id.startswith("cmpl-")
    assert reply.choices[0].text == "é ab"
    assert reply.choices[0].finish_reason == "length"
    streamed = list(
        client.completions.create(model="m", prompt=["once upon"], stream=True, extra_body=GREEDY)
    )
    assert "".join(c.choices[0].text for c in streamed) == SCRIPT_TEXT
    assert streamed[-1].choices[0].finish_reason == "stop"


def test_models_lists_the_loaded_model_with_its_context(scripted_server: ServerThread) -> None:
    models = scripted_server.client().models.list()
    (model,) = models.data
    assert model.id == scripted_server.model.plan.model.path.stem
    assert model.owned_by == "hearth"
    assert model.context_length == scripted_server.model.context_per_conversation  # type: ignore[attr-defined]


def test_health(scripted_server: ServerThread) -> None:
    status, _, payload = scripted_server.request("GET", "/health")
    assert (status, payload) == (200, b'{"status": "ok"}')


def test_metrics_count_requests_tokens_and_the_engine(scripted_server: ServerThread) -> None:
    scripted_server.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": "count me"}], extra_body=GREEDY
    )
    status, headers, payload = scripted_server.request("GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    text = payload.decode()
    values = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if not line.startswith("#")
    }
    assert values['hearth_requests_total{path="/v1/chat/completions",status="200"}'] >= 1
    assert values["hearth_completion_tokens_total"] >= 9
    for name in ("queue_depth", "kv_cells_used", "kv_cache_usage_ratio", "prefix_cache_hits_total",
                 "prefix_cache_misses_total", "requests_in_flight", "prompt_tokens_total"):  # fmt: skip
        assert f"hearth_{name}" in values, name
    assert 0 < values["hearth_kv_cache_usage_ratio"] <= 1


def test_llama_server_extensions_cache_prompt_and_ignore_eos(scripted_server: ServerThread) -> None:
    client = scripted_server.client()
    messages = [{"role": "system", "content": "Same prefix. " * 20}, {"role": "user", "content": "again"}]
    client.chat.completions.create(model="m", messages=messages, extra_body=GREEDY)
    warm = client.chat.completions.create(model="m", messages=messages, extra_body=GREEDY)
    assert warm.usage.prompt_tokens_details.cached_tokens > 0
    cold = client.chat.completions.create(
        model="m", messages=messages, extra_body={**GREEDY, "cache_prompt": False}
    )
    assert cold.usage.prompt_tokens_details.cached_tokens == 0
    endless = client.chat.completions.create(
        model="m", messages=messages, max_tokens=12, extra_body={**GREEDY, "ignore_eos": True}
    )
    assert endless.usage.completion_tokens == 12 and endless.choices[0].finish_reason == "length"


def test_the_sdk_stream_helper_accumulates_the_reply(scripted_server: ServerThread) -> None:
    client = scripted_server.client()
    with client.chat.completions.stream(
        model="m", messages=[{"role": "user", "content": "hello"}], extra_body=GREEDY
    ) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_completion()
    assert final.choices[0].message.content == SCRIPT_TEXT
    assert final.choices[0].finish_reason == "stop"
    assert events.count("content.done") == 1 and "content.delta" in events
