"""Qwen2.5-Coder 1.5B Instruct with tools and structured output (issue 16): its template
renders the tools, it calls one in the Hermes format and the call parses into valid JSON;
tool_choice "required" forces a call it would not make; a tool's result comes back as a
tool message and is used; a JSON schema constrains a reply to a valid instance, in the
same batches as a plain request; log-probabilities are a distribution."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

import engine.runtime.active_request as active_request_module
from engine.chat import (
    ChatMessage,
    ChatTraits,
    OutputEvent,
    Role,
    ToolCall,
    ToolCallFormat,
    ToolCallParser,
    tool_choice_grammar,
)
from engine.chat.tool_calls import collect_output
from engine.loaded_model import Engine, LoadedModel
from engine.requests.completion import Completion, StopReason
from engine.requests.events import TextDelta
from engine.requests.request import ChatRequest
from engine.sampling.grammar import grammar_from_json_schema
from engine.sampling.params import GREEDY, SamplingParams
from tests.conftest import plan_for

pytestmark = pytest.mark.qwen
TIMEOUT = 600

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city, e.g. Paris"}},
            "required": ["city"],
        },
    },
}
NAMES = ("get_weather",)


@pytest.fixture(scope="module")
def qwen(qwen_path: Path) -> Iterator[LoadedModel]:
    model = Engine.load(plan_for(qwen_path, ctx=2048, parallel=2)).wait_ready(TIMEOUT)
    yield model
    model.unload()


def ask(text: str, **kwargs: object) -> ChatRequest:
    sampling = kwargs.pop("sampling", GREEDY)
    return ChatRequest(
        messages=(ChatMessage(Role.USER, text),),
        sampling=sampling,  # type: ignore[arg-type]
        max_tokens=kwargs.pop("max_tokens", 96),  # type: ignore[arg-type]
        **kwargs,  # type: ignore[arg-type]
    )


def stream(model: LoadedModel, request: ChatRequest) -> tuple[Completion, list[str]]:
    deltas: list[str] = []
    completion = None
    for event in model.submit(request).events(timeout=TIMEOUT):
        if isinstance(event, TextDelta):
            deltas.append(event.text)
        elif hasattr(event, "completion"):
            completion = event.completion  # type: ignore[attr-defined]
    assert completion is not None
    return completion, deltas


def calls_in(deltas: list[str]) -> tuple[str, list[tuple[str, str]]]:
    parser = ToolCallParser(ToolCallFormat.HERMES, tool_names=NAMES)
    events: list[OutputEvent] = []
    for delta in deltas:
        events += parser.feed(delta)
    events += parser.finish()
    return collect_output(events)


def test_the_loaded_model_says_how_it_calls_tools(qwen: LoadedModel) -> None:
    assert qwen.chat_traits == ChatTraits(ToolCallFormat.HERMES, False, False, renders_tools=True)


def test_qwen_calls_the_weather_tool_with_valid_arguments(
    qwen: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(active_request_module, "DELTA_INTERVAL", 0.0)  # many small deltas
    completion, deltas = stream(qwen, ask("What's the weather in Paris?", tools=(WEATHER,)))
    assert completion.stop_reason is StopReason.STOP_TOKEN, completion.text
    content, calls = calls_in(deltas)
    assert content == "", completion.text
    assert [name for name, _ in calls] == ["get_weather"], completion.text
    arguments = json.loads(calls[0][1])
    assert arguments == {"city": "Paris"}


def test_required_tool_choice_forces_a_call_it_would_not_make(qwen: LoadedModel) -> None:
    question = "Write a haiku about the sea."
    free, free_deltas = stream(qwen, ask(question, tools=(WEATHER,), max_tokens=48))
    assert calls_in(free_deltas)[1] == [], free.text  # left alone, it answers in words
    traits = qwen.chat_traits
    assert traits is not None
    grammar = tool_choice_grammar(traits.tool_format, (WEATHER,), "required", parallel=False)
    assert grammar is not None
    sampling = SamplingParams(**{**GREEDY.__dict__, "grammar": traits.constrain(grammar)})
    forced, deltas = stream(qwen, ask(question, tools=(WEATHER,), sampling=sampling, max_tokens=64))
    assert forced.stop_reason is StopReason.STOP_TOKEN, forced.text
    content, calls = calls_in(deltas)
    assert content == "" and [name for name, _ in calls] == ["get_weather"], forced.text
    assert isinstance(json.loads(calls[0][1])["city"], str)


def test_a_tool_result_comes_back_and_is_used(qwen: LoadedModel) -> None:
    conversation = (
        ChatMessage(Role.USER, "What's the weather in Paris?"),
        ChatMessage(Role.ASSISTANT, "", tool_calls=(ToolCall("call_1", "get_weather", '{"city": "Paris"}'),)),
        ChatMessage(
            Role.TOOL, '{"temperature_c": 21, "sky": "sunny"}', tool_call_id="call_1", name="get_weather"
        ),
    )
    # Offered the tool again, this 1.5B model calls it again (with the template's "{{"); asked
    # for the answer (tools not offered, what tool_choice "none" amounts to), it uses the result.
    request = ChatRequest(messages=conversation, sampling=GREEDY, max_tokens=48)
    completion = qwen.submit(request).wait(TIMEOUT)
    assert "21" in completion.text and "sunny" in completion.text, completion.text
    assert completion.stop_reason is StopReason.STOP_TOKEN


def test_openai_sdk_round_trip_calls_again_after_the_tool_result(qwen: LoadedModel) -> None:
    """The official SDK against Hearth's server on loopback: a call, its result sent back as a
    tool message, and the turn after it, where this model calls again in its template's
    doubled braces ({{"name": ...}, issue 26): both reach the client as tool_calls."""
    import openai

    from tests.api_support import ServerThread

    ask_paris = [{"role": "user", "content": "What is the weather in Paris?"}]
    with ServerThread(lambda: qwen) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="-", max_retries=0, timeout=TIMEOUT)
        first = client.chat.completions.create(
            model="qwen", messages=ask_paris, tools=[WEATHER], temperature=0, max_tokens=48
        )
        (call,) = first.choices[0].message.tool_calls or [None]
        assert call is not None, first.choices[0].message.content
        assert call.function.name == "get_weather"
        assert json.loads(call.function.arguments) == {"city": "Paris"}
        messages = [
            *ask_paris,
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": '{"temperature_c": 21, "sky": "sunny"}'},
        ]
        chunks = list(
            client.chat.completions.create(
                model="qwen", messages=messages, tools=[WEATHER], temperature=0, max_tokens=48, stream=True
            )
        )
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    content = "".join(d.content or "" for d in deltas)
    calls = [c for d in deltas for c in d.tool_calls or []]
    assert calls and calls[0].function.name == "get_weather", content
    assert not content.strip()
    assert isinstance(json.loads("".join(c.function.arguments or "" for c in calls)), dict)
    # (What it writes depends on the prompt cache's state; a call it goes on after is cut.)
    assert chunks[-1].choices[0].finish_reason in ("tool_calls", "length")


CITY = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "country": {"type": "string"},
        "population": {"type": "integer"},
        "landmarks": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    },
    "required": ["name", "country", "population", "landmarks"],
}


def test_a_json_schema_reply_validates_beside_a_plain_request(qwen: LoadedModel) -> None:
    traits = qwen.chat_traits
    assert traits is not None
    grammar = traits.constrain(grammar_from_json_schema(CITY))
    sampling = SamplingParams(**{**GREEDY.__dict__, "grammar": grammar})
    structured = qwen.submit(ask("Describe Paris as JSON.", sampling=sampling, max_tokens=160))
    plain = qwen.submit(ask("Say hello in French, in one word.", max_tokens=16))
    completion = structured.wait(TIMEOUT)
    assert completion.stop_reason is StopReason.STOP_TOKEN, completion.text
    data = json.loads(completion.text)
    assert set(data) == set(CITY["properties"])  # type: ignore[arg-type]
    assert isinstance(data["name"], str) and "Paris" in data["name"]
    assert isinstance(data["country"], str) and isinstance(data["population"], int)
    assert isinstance(data["landmarks"], list) and len(data["landmarks"]) <= 3
    assert all(isinstance(item, str) for item in data["landmarks"])
    assert "bonjour" in plain.wait(TIMEOUT).text.lower()


def test_logprobs_on_a_real_vocabulary(qwen: LoadedModel) -> None:
    sampling = SamplingParams(**{**GREEDY.__dict__, "logprobs": 5})
    completion = qwen.submit(ask("Count: one, two, three,", sampling=sampling, max_tokens=6)).wait(TIMEOUT)
    assert len(completion.logprobs) == len(completion.tokens) > 0
    for lp in completion.logprobs:
        assert lp.logprob <= 0 and len(lp.top) == 5
        assert lp.top[0].logprob == pytest.approx(lp.logprob, abs=1e-5)  # greedy takes the likeliest
        assert sum(math.exp(t.logprob) for t in lp.top) <= 1 + 1e-5
        assert [t.logprob for t in lp.top] == sorted((t.logprob for t in lp.top), reverse=True)
    assert "".join(lp.token for lp in completion.logprobs) == completion.text
