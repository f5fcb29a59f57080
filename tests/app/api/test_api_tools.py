"""Tool calls, structured output, reasoning and log probabilities over the API, exact on
tiny models: scripted ones whose greedy output is known (a Hermes call cut into pieces,
thinking tags cut across tokens), and a random one that only grammars make well-formed."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from app.api.mapping import OutputPlan
from app.api.output import OutputShaper, PieceKind
from engine import ChatTraits, StopReason
from engine.devtools.tiny_models import DEFAULT_CHAT_TEMPLATE, TinyTextSpec, write_tiny_text_model
from tests.api_support import ServerThread, load, sse_events

GREEDY = {"temperature": 0, "repeat_penalty": 1.0}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["unit"],
        },
    },
}
NOW = {"type": "function", "function": {"name": "now", "description": "The time.", "parameters": {}}}
ASK = [{"role": "user", "content": "weather?"}]

# A Hermes call cut where a model's tokens would cut it: the name, the arguments mid-string.
CALL_PIECES = ('{"name":\u2581"get_weather",\u2581', '"arguments":\u2581{"unit":\u2581"cel', 'sius"}}')
CALL_SCRIPT = ("<tool_call>", *CALL_PIECES, "</tool_call>")
# What Qwen2.5-Coder 1.5B writes after a tool result (its greedy output, tests/engine/
# test_tool_calls.py's QWEN_OUTPUTS): its template's doubled braces, one closing brace short.
DOUBLED_PIECES = (
    '{{"name":', '\u2581"get_weather",', '\u2581"arguments":', '\u2581{"unit":', '\u2581"celsius"}}'
)
# Thinking whose closing tag arrives in three tokens, then the answer.
THINK_SCRIPT = ("<think>", "h", "m", "</", "think", ">", "o", "k")
THINKING_TEMPLATE = DEFAULT_CHAT_TEMPLATE.replace(
    "message['content']", "message['content'].split('</think>')[-1]"
)
OPENS_THINKING_TEMPLATE = THINKING_TEMPLATE.replace(
    "'<|im_start|>assistant\n'", "'<|im_start|>assistant\n<think>\n'"
)


def _serve(path: Path, **spec: Any):
    model = load(write_tiny_text_model(path, TinyTextSpec(**spec)))
    server = ServerThread(lambda: model)
    server.__enter__()
    server.model = model
    return model, server


@pytest.fixture(scope="module")
def caller(tmp_path_factory: pytest.TempPathFactory):
    model, server = _serve(
        tmp_path_factory.mktemp("api-tools") / "caller.gguf",
        script=CALL_SCRIPT, control_tokens=("<tool_call>", "</tool_call>"), extra_tokens=CALL_PIECES,
    )  # fmt: skip
    yield server
    server.__exit__(None, None, None)
    model.unload()


@pytest.fixture(scope="module")
def doubler(tmp_path_factory: pytest.TempPathFactory):
    model, server = _serve(
        tmp_path_factory.mktemp("api-doubled") / "doubler.gguf",
        script=DOUBLED_PIECES, extra_tokens=DOUBLED_PIECES,
    )  # fmt: skip
    yield server
    server.__exit__(None, None, None)
    model.unload()


@pytest.fixture(scope="module")
def thinker(tmp_path_factory: pytest.TempPathFactory):
    model, server = _serve(
        tmp_path_factory.mktemp("api-think") / "thinker.gguf",
        script=THINK_SCRIPT, control_tokens=("<think>", "</think>"), extra_tokens=("</", "think", ">"),
        chat_template=THINKING_TEMPLATE,
    )  # fmt: skip
    yield server
    server.__exit__(None, None, None)
    model.unload()


@pytest.fixture(scope="module")
def random_server(tiny_model: Path):
    model = load(tiny_model)
    with ServerThread(lambda: model) as server:
        yield server
    model.unload()


def _stream(server: ServerThread, body: dict) -> list[dict]:
    status, _, payload = server.request("POST", "/v1/chat/completions", {**body, "stream": True})
    assert status == 200, payload
    events = sse_events(payload)
    assert events[-1] == "[DONE]"
    return [e for e in events[:-1] if e["choices"]]


# --------------------------------------------------------------------------- tool calls


def test_a_streamed_call_has_the_shape_the_sdk_accumulates(caller: ServerThread) -> None:
    chunks = _stream(caller, {"messages": ASK, "tools": [WEATHER], **GREEDY})
    deltas = [c["choices"][0]["delta"] for c in chunks]
    calls = [call for d in deltas for call in d.get("tool_calls", [])]
    assert calls[0] == {
        "index": 0, "id": calls[0]["id"], "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }  # fmt: skip
    assert calls[0]["id"].startswith("call_")
    for later in calls[1:]:  # id, type and name only in the first delta of the index
        assert later.keys() == {"index", "function"} and later["function"].keys() == {"arguments"}
        assert later["index"] == 0
    arguments = "".join(c["function"]["arguments"] for c in calls)
    assert json.loads(arguments) == {"unit": "celsius"}
    assert all(not d.get("content") for d in deltas)  # no markers or JSON leak into the content
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_the_sdk_stream_helper_parses_the_call(caller: ServerThread) -> None:
    client = caller.client()
    with client.chat.completions.stream(
        model="m", messages=ASK, tools=[WEATHER], extra_body=GREEDY
    ) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_completion()
    (call,) = final.choices[0].message.tool_calls
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"unit": "celsius"}
    assert "tool_calls.function.arguments.done" in events
    assert final.choices[0].finish_reason == "tool_calls"


def test_a_whole_answer_carries_its_calls_and_no_content(caller: ServerThread) -> None:
    reply = caller.client().chat.completions.create(
        model="m", messages=ASK, tools=[WEATHER], extra_body=GREEDY
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"unit": "celsius"}


def test_without_tools_the_same_text_is_content(caller: ServerThread) -> None:
    reply = caller.client().chat.completions.create(model="m", messages=ASK, extra_body=GREEDY)
    assert reply.choices[0].message.tool_calls is None
    assert (
        reply.choices[0].message.content
        == '<tool_call>{"name": "get_weather", "arguments": {"unit": "celsius"}}</tool_call>'
    )
    assert reply.choices[0].finish_reason == "stop"


def test_tool_choice_none_hides_the_tools_from_the_model(caller: ServerThread) -> None:
    with_tools = caller.post_json(
        "/v1/chat/completions", {"messages": ASK, "tools": [WEATHER], "max_tokens": 1}
    )
    none = caller.post_json(
        "/v1/chat/completions", {"messages": ASK, "tools": [WEATHER], "tool_choice": "none", "max_tokens": 1}
    )
    plain = caller.post_json("/v1/chat/completions", {"messages": ASK, "max_tokens": 1})
    tokens = [body["usage"]["prompt_tokens"] for _, body in (with_tools, none, plain)]
    assert tokens[0] > tokens[2] + 20 and tokens[1] == tokens[2]


def test_a_tool_result_round_trip_is_accepted(caller: ServerThread) -> None:
    first = caller.client().chat.completions.create(
        model="m", messages=ASK, tools=[WEATHER], extra_body=GREEDY
    )
    call = first.choices[0].message.tool_calls[0]
    messages = [
        *ASK,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "name": "get_weather", "content": '{"temp": 17}'},
    ]
    status, body = caller.post_json(
        "/v1/chat/completions", {"messages": messages, "tools": [WEATHER], **GREEDY}
    )
    assert status == 200, body
    # The template without tool support gets the fallback prompt: the result reaches it.
    assert body["usage"]["prompt_tokens"] > first.usage.prompt_tokens


def _round_trip(call_id: str) -> list[dict]:
    return [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": "get_weather", "arguments": '{"unit": "celsius"}'}}
        ]},
        {"role": "tool", "tool_call_id": call_id, "content": '{"temp": 17}'},
    ]  # fmt: skip


def test_doubled_braces_are_a_call_whole_streamed_and_after_a_tool_result(doubler: ServerThread) -> None:
    client = doubler.client()
    for messages in (ASK, _round_trip("call_1")):
        whole = client.chat.completions.create(
            model="m", messages=messages, tools=[WEATHER], extra_body=GREEDY
        )
        choice = whole.choices[0]
        assert choice.message.content is None and choice.finish_reason == "tool_calls"
        (call,) = choice.message.tool_calls
        assert call.function.name == "get_weather"
        assert json.loads(call.function.arguments) == {"unit": "celsius"}
        chunks = list(
            client.chat.completions.create(
                model="m", messages=messages, tools=[WEATHER], stream=True, extra_body=GREEDY
            )
        )
        deltas = [c.choices[0].delta for c in chunks if c.choices]
        assert not any(d.content for d in deltas)  # the braces never show up as content
        calls = [call for d in deltas for call in d.tool_calls or []]
        assert calls[0].function.name == "get_weather" and calls[0].id.startswith("call_")
        assert json.loads("".join(c.function.arguments or "" for c in calls)) == {"unit": "celsius"}
        assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_without_tools_doubled_braces_are_content(doubler: ServerThread) -> None:
    reply = doubler.client().chat.completions.create(model="m", messages=ASK, extra_body=GREEDY)
    assert reply.choices[0].message.content == '{{"name": "get_weather", "arguments": {"unit": "celsius"}}'
    assert reply.choices[0].message.tool_calls is None


def test_required_and_named_choices_force_a_call_on_a_random_model(random_server: ServerThread) -> None:
    client = random_server.client()
    forced = client.chat.completions.create(
        model="m", messages=ASK, tools=[WEATHER, NOW], tool_choice="required", max_tokens=200,
        extra_body=GREEDY,
    )  # fmt: skip
    (call,) = forced.choices[0].message.tool_calls[:1]
    assert call.function.name in ("get_weather", "now")
    json.loads(call.function.arguments)
    assert forced.choices[0].finish_reason == "tool_calls"
    named = client.chat.completions.create(
        model="m", messages=ASK, tools=[WEATHER, NOW], max_tokens=200, extra_body=GREEDY,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )  # fmt: skip
    (call,) = named.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments)["unit"] in ("celsius", "fahrenheit")


def test_arguments_are_sent_as_written_not_when_the_call_ends() -> None:
    # (Over HTTP the engine may join deltas that pile up while the loop is busy.)
    shaper = OutputShaper(OutputPlan(ChatTraits(), ("get_weather",)))
    pieces = [shaper.feed(text) for text in ("<tool_call>", *(p.replace("\u2581", " ") for p in CALL_PIECES))]
    assert [p.kind for p in pieces[1]] == [PieceKind.CALL_BEGIN]
    assert [p.text for p in pieces[2]] == ['{"unit": "cel']  # before the call is complete
    assert [p.text for p in pieces[3]] == ['sius"}']
    assert shaper.feed("</tool_call>") + shaper.finish() == []


def test_parallel_tool_calls_false_sends_one_call() -> None:
    one = '<tool_call>{"name": "%s", "arguments": {}}</tool_call>'
    two = one % "a" + one % "b"
    for parallel, names in ((True, ["a", "b"]), (False, ["a"])):
        shaper = OutputShaper(OutputPlan(ChatTraits(), ("a", "b"), parallel))
        pieces = [p for ch in two for p in shaper.feed(ch)] + shaper.finish()
        assert [p.name for p in pieces if p.kind is PieceKind.CALL_BEGIN] == names
        assert [c.name for c in shaper.calls] == names
        assert shaper.finish_reason(StopReason.STOP_TOKEN) == "tool_calls"


# --------------------------------------------------------------------------- structured output


def test_a_json_schema_reply_validates_on_a_random_model(random_server: ServerThread) -> None:
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}, "unit": {"enum": ["c", "f"]}},
        "required": ["ok", "unit"],
        "additionalProperties": False,
    }
    body = {
        "messages": ASK, "max_tokens": 100, **GREEDY,
        "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}},
    }  # fmt: skip
    status, reply = random_server.post_json("/v1/chat/completions", body)
    assert status == 200, reply
    value = json.loads(reply["choices"][0]["message"]["content"])
    assert set(value) == {"ok", "unit"} and isinstance(value["ok"], bool) and value["unit"] in ("c", "f")
    chunks = _stream(random_server, body)  # the same grammar, streamed
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert json.loads(text) == value


# --------------------------------------------------------------------------- reasoning


def test_thinking_streams_as_reasoning_content_never_in_the_content(thinker: ServerThread) -> None:
    chunks = _stream(thinker, {"messages": ASK, **GREEDY})
    deltas = [c["choices"][0]["delta"] for c in chunks]
    reasoning = "".join(d.get("reasoning_content") or "" for d in deltas)
    content = "".join(d.get("content") or "" for d in deltas)
    assert (reasoning, content) == ("hm", "ok")
    assert not any(d.get("reasoning_content") and d.get("content") for d in deltas)
    whole = thinker.post_json("/v1/chat/completions", {"messages": ASK, **GREEDY})[1]["choices"][0]["message"]
    assert (whole["reasoning_content"], whole["content"]) == ("hm", "ok")


def test_a_template_that_opens_thinking_starts_the_reply_inside_it(tmp_path: Path) -> None:
    script = ("h", "m", "</think>", "o", "k")
    model, server = _serve(
        tmp_path / "opens.gguf", script=script, control_tokens=("<think>", "</think>"),
        chat_template=OPENS_THINKING_TEMPLATE,
    )  # fmt: skip
    try:
        assert model.chat_traits.opens_thinking
        message = server.post_json("/v1/chat/completions", {"messages": ASK, **GREEDY})[1]["choices"][0][
            "message"
        ]
    finally:
        server.__exit__(None, None, None)
        model.unload()
    assert (message["reasoning_content"], message["content"]) == ("hm", "ok")


# --------------------------------------------------------------------------- log probabilities


def test_chat_logprobs_name_each_token_of_the_reply(caller: ServerThread) -> None:
    body = {"messages": ASK, "logprobs": True, "top_logprobs": 2, **GREEDY}
    status, reply = caller.post_json("/v1/chat/completions", body)
    assert status == 200, reply
    content = reply["choices"][0]["logprobs"]["content"]
    assert "".join(t["token"] for t in content) == reply["choices"][0]["message"]["content"]
    for token in content:
        assert token["logprob"] <= 0 and math.isfinite(token["logprob"])
        assert len(token["top_logprobs"]) == 2
        assert token["top_logprobs"][0]["logprob"] >= token["top_logprobs"][1]["logprob"]
        assert bytes(token["bytes"]).decode() == token["token"]
    streamed = _stream(caller, body)
    tokens = [
        t["token"]
        for c in streamed
        if c["choices"][0]["logprobs"]
        for t in c["choices"][0]["logprobs"]["content"]
    ]
    assert tokens == [t["token"] for t in content]


def test_completion_logprobs_in_the_legacy_shape(caller: ServerThread) -> None:
    status, reply = caller.post_json(
        "/v1/completions", {"prompt": "x", "logprobs": 1, "max_tokens": 3, **GREEDY}
    )
    assert status == 200, reply
    choice = reply["choices"][0]
    logprobs = choice["logprobs"]
    assert "".join(logprobs["tokens"]) == choice["text"]
    assert len(logprobs["token_logprobs"]) == len(logprobs["tokens"]) == 3
    assert logprobs["text_offset"][0] == 0 and logprobs["text_offset"][1] == len(logprobs["tokens"][0])
    assert all(len(top) == 1 for top in logprobs["top_logprobs"])


def test_openai_penalties_are_accepted(caller: ServerThread) -> None:
    status, reply = caller.post_json(
        "/v1/chat/completions",
        {"messages": ASK, "presence_penalty": 0.5, "frequency_penalty": 0.5, "max_tokens": 4, **GREEDY},
    )
    assert status == 200, reply
