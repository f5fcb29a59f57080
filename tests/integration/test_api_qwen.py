"""The API on the real Qwen2.5-Coder 1.5B Instruct, through the official SDK: its chat
template, real tool calls, tool results and structured output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import openai
import pytest
from pydantic import BaseModel

from tests.api_support import ServerThread, load, sse_events

pytestmark = pytest.mark.qwen


class GetWeather(BaseModel):
    """The current weather in a city."""

    city: str
    unit: Literal["celsius", "fahrenheit"]


class Person(BaseModel):
    name: str
    age: int


WEATHER_TOOLS = [openai.pydantic_function_tool(GetWeather, name="get_weather")]
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Paris, in celsius? Use the tool."}]


@pytest.fixture(scope="module")
def qwen_server(qwen_path: Path):
    model = load(qwen_path, ctx=2048, parallel=2)
    with ServerThread(lambda: model) as server:
        yield server
    model.unload()


def test_a_chat_through_the_sdk_uses_the_model_s_template(qwen_server: ServerThread) -> None:
    client = qwen_server.client()
    chunks = list(
        client.chat.completions.create(
            model="qwen",
            messages=[
                {"role": "system", "content": "Answer with a number only."},
                {"role": "user", "content": "What is 2 + 2?"},
            ],
            temperature=0,
            max_tokens=16,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip() == "4"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"  # its end of turn
    assert "<|im_end|>" not in text


def test_tool_calls_stream_in_the_shape_the_sdk_accumulates(qwen_server: ServerThread) -> None:
    client = qwen_server.client()
    with client.chat.completions.stream(
        model="qwen", messages=ASK_WEATHER, tools=WEATHER_TOOLS, temperature=0, max_tokens=128
    ) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "get_weather"
    assert call.function.parsed_arguments == GetWeather(city="Paris", unit="celsius")
    assert "tool_calls.function.arguments.done" in events
    # The raw chunks: an index on every tool-call delta; id, type and name only in the first
    # delta of that index; the argument fragments, concatenated, are the arguments.
    body = {
        "messages": ASK_WEATHER,
        "tools": WEATHER_TOOLS,
        "temperature": 0,
        "max_tokens": 128,
        "stream": True,
    }
    _, _, payload = qwen_server.request("POST", "/v1/chat/completions", body)
    seen: dict[int, str] = {}
    for event in sse_events(payload)[:-1]:
        for delta in event["choices"][0]["delta"].get("tool_calls", []) if event["choices"] else []:
            index = delta["index"]
            if index in seen:
                assert "id" not in delta and "type" not in delta and "name" not in delta.get("function", {})
            else:
                assert delta["id"] and delta["type"] == "function" and delta["function"]["name"]
                seen[index] = ""
            seen[index] += delta.get("function", {}).get("arguments", "")
    assert [json.loads(arguments) for arguments in seen.values()] == [{"city": "Paris", "unit": "celsius"}]


def test_a_tool_result_is_read_back(qwen_server: ServerThread) -> None:
    client = qwen_server.client()
    first = client.chat.completions.create(
        model="qwen", messages=ASK_WEATHER, tools=WEATHER_TOOLS, temperature=0
    )
    call = first.choices[0].message.tool_calls[0]
    messages = [
        *ASK_WEATHER,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature": 17, "sky": "clear"})},
    ]
    # With the tools still offered, this 1.5B model calls the tool again (as it did in
    # the first turn); tool_choice "none" asks for the answer, as agents do once done.
    answer = client.chat.completions.create(
        model="qwen", messages=messages, tools=WEATHER_TOOLS, tool_choice="none", temperature=0
    )
    assert answer.choices[0].finish_reason == "stop"
    assert "17" in answer.choices[0].message.content


def test_structured_output_validates_against_its_schema(qwen_server: ServerThread) -> None:
    client = qwen_server.client()
    reply = client.chat.completions.parse(
        model="qwen",
        messages=[{"role": "user", "content": "Invent a person: a name and an age."}],
        response_format=Person,
        temperature=0,
        max_tokens=64,
    )
    person = reply.choices[0].message.parsed
    assert isinstance(person, Person) and person.name and 0 <= person.age < 150
