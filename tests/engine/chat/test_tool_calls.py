"""Tool calls and reasoning, read out of streamed output (pure parsers, property-tested over
every way the output can be cut), the grammars that force a call, tools in the prompt
(the template's own rendering, or the fallback), and what a template's traits are."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.base.errors import InvalidChatRequest
from engine.chat import (
    ChatMessage,
    ChatTemplate,
    ChatTraits,
    ContentDelta,
    OutputEvent,
    ReasoningSplitter,
    Role,
    ToolCall,
    ToolCallArgs,
    ToolCallBegin,
    ToolCallFormat,
    ToolCallParser,
    chat_traits,
    new_call_id,
    parse_tool_calls,
    split_reasoning,
    tool_choice_grammar,
)
from engine.chat.near_json import loads_near_json
from engine.chat.tool_calls import collect_output
from engine.chat.tool_prompt import plain_tool_turns, tools_system_prompt
from engine.devtools.tiny_models import DEFAULT_CHAT_TEMPLATE
from engine.requests.request import ChatRequest
from engine.sampling.grammar import Grammar
from tests.engine.chat.test_chat import vocab_only
from tests.engine.sampling.test_grammar import native_accepts

F = ToolCallFormat
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
TIME_TOOL = {"type": "function", "function": {"name": "now", "description": "The time."}}
TOOLS = (WEATHER_TOOL, TIME_TOOL)
NAMES = ("get_weather", "now")


def run(fmt: ToolCallFormat, pieces: list[str], names: tuple[str, ...] | None = NAMES) -> list[OutputEvent]:
    parser = ToolCallParser(fmt, tool_names=names, make_id=lambda: "call_x")
    events: list[OutputEvent] = []
    for piece in pieces:
        events += parser.feed(piece)
    return events + parser.finish()


def normalized(events: list[OutputEvent]) -> list[OutputEvent]:
    """Adjacent content joined, each call's fragments joined: what any cutting must agree on."""
    out: list[OutputEvent] = []
    for event in events:
        last = out[-1] if out else None
        if isinstance(event, ContentDelta) and isinstance(last, ContentDelta):
            out[-1] = ContentDelta(last.text + event.text)
        elif isinstance(event, ToolCallArgs) and isinstance(last, ToolCallArgs) and last.index == event.index:
            out[-1] = ToolCallArgs(event.index, last.fragment + event.fragment)
        else:
            out.append(event)
    return out


def cut(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


HERMES_TWO = (
    "Let me look.\n\n<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris", "nested": {"s": "a } \\" ]"}}}\n'
    "</tool_call>\n<tool_call>\n"
    '{"arguments": {}, "name": "now"}\n</tool_call>'
)
FENCED = '```json\n{\n  "name": "get_weather",\n  "arguments": {\n    "city": "Paris"\n  }\n}\n```'
OUTPUTS = [
    (F.HERMES, HERMES_TWO),
    (F.HERMES, FENCED),
    (
        F.HERMES,
        '{"name": "now", "arguments": {}}\nThen <tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>',
    ),
    (F.HERMES, '```json\n{"name": "not_offered", "arguments": {}}\n```'),
    (F.HERMES, "Just text, with a <tool but no call <tool_call later? no."),
    (F.HERMES, '<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}\n</tool_call>'),
    (F.HERMES, '<tool_call>\n{"nam": "x"}\n</tool_call> then text'),
    (F.HERMES, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa'),  # cut off
    (
        F.LLAMA3_JSON,
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; '
        '{"name": "now", "parameters": {}}',
    ),
    (F.LLAMA3_JSON, '{"type": "function", "name": "now", "parameters": {}}\n'),
    (F.LLAMA3_JSON, '{"name": "unknown_tool", "parameters": {}}'),
    (F.LLAMA3_JSON, 'The JSON is {"name": "now"}.'),
    (
        F.MISTRAL,
        'Sure. [TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1b2c3d4e"}, '
        '{"name": "now", "arguments": {}}]',
    ),
    (F.MISTRAL, '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]now[ARGS]{}'),
    (F.MISTRAL, "[TOOL_CALLS] what?"),
    (
        F.GENERIC,
        '```json\n{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}\n```\nDone.',
    ),
    (F.GENERIC, '[{"type": "function", "function": {"name": "now", "arguments": "{}"}}]'),
    (F.GENERIC, '{"name": "get_weather", "parameters": {"city": "Rome"}}'),
    (F.GENERIC, '{"answer": 42}'),
    (F.GENERIC, "```python\nprint(1)\n```"),
    (F.NONE, HERMES_TWO),
]


@pytest.mark.parametrize(("fmt", "text"), OUTPUTS)
@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(0, 10_000), max_size=12))
def test_any_cutting_of_the_output_gives_the_same_events(
    fmt: ToolCallFormat, text: str, cuts: list[int]
) -> None:
    whole = normalized(run(fmt, [text]))
    assert normalized(run(fmt, cut(text, cuts))) == whole
    # and one character at a time, the finest cutting there is
    assert normalized(run(fmt, list(text))) == whole


@pytest.mark.parametrize(("fmt", "text"), OUTPUTS)
def test_fragments_once_sent_are_the_arguments_exactly(fmt: ToolCallFormat, text: str) -> None:
    events = run(fmt, list(text))
    begins = [e for e in events if isinstance(e, ToolCallBegin)]
    assert [b.index for b in begins] == list(range(len(begins)))
    for begin in begins:
        first_args = next(
            (i for i, e in enumerate(events) if isinstance(e, ToolCallArgs) and e.index == begin.index), None
        )
        assert first_args is None or events.index(begin) < first_args  # the name comes first, once
    for event in events:
        if isinstance(event, ContentDelta):
            # once a call was found, its syntax never shows up as content
            assert (
                fmt is F.NONE
                or not begins
                or not ("<tool_call>" in event.text or "[TOOL_CALLS]" in event.text)
            )


def test_hermes_calls_parse_into_names_and_json_arguments() -> None:
    content, calls = parse_tool_calls(HERMES_TWO, F.HERMES)
    assert content == "Let me look."
    assert calls == [("get_weather", '{"city": "Paris", "nested": {"s": "a } \\" ]"}}'), ("now", "{}")]
    assert json.loads(calls[0][1])["nested"]["s"] == 'a } " ]'


def test_arguments_stream_as_they_arrive() -> None:
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    parser = ToolCallParser(F.HERMES, make_id=lambda: "id")
    seen: list[OutputEvent] = []
    for char in text:
        seen += parser.feed(char)
        if '"Par' in "".join(e.fragment for e in seen if isinstance(e, ToolCallArgs)):
            break
    assert seen[0] == ToolCallBegin(0, "id", "get_weather")
    assert "".join(e.fragment for e in seen[1:]) == '{"city": "Par'  # before the call is complete


@pytest.mark.parametrize(
    ("fmt", "text", "content", "calls"),
    [
        (
            F.HERMES,
            '<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}\n</tool_call>',
            "",
            [("get_weather", '{"city": "Oslo"}')],
        ),
        (
            F.HERMES,
            '<tool_call>\n{"nam": "x"}\n</tool_call> then text',
            '<tool_call>\n{"nam": "x"}\n</tool_call> then text',
            [],
        ),
        (
            F.HERMES,
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa',
            "",
            [("get_weather", '{"city": "Pa')],
        ),
        (F.HERMES, '<tool_call>\n{"name": "now"}\n</tool_call>', "", [("now", "{}")]),
        (F.HERMES, FENCED, "", [("get_weather", '{"city": "Paris"}')]),  # Qwen2.5-Coder 1.5B writes this
        (F.HERMES, OUTPUTS[2][1], "Then", [("now", "{}"), ("now", "{}")]),
        (F.HERMES, OUTPUTS[3][1], OUTPUTS[3][1], []),  # JSON naming no offered tool is content
        (
            F.HERMES,
            'Text first {"name": "now", "arguments": {}}',
            'Text first {"name": "now", "arguments": {}}',
            [],
        ),
        (F.LLAMA3_JSON, '{"type": "function", "name": "now", "parameters": {}}\n', "", [("now", "{}")]),
        (
            F.LLAMA3_JSON,
            '{"name": "unknown_tool", "parameters": {}}',
            '{"name": "unknown_tool", "parameters": {}}',
            [],
        ),
        (F.LLAMA3_JSON, 'The JSON is {"name": "now"}.', 'The JSON is {"name": "now"}.', []),
        (F.MISTRAL, "[TOOL_CALLS] what?", "[TOOL_CALLS]what?", []),
        (
            F.MISTRAL,
            '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]now[ARGS]{}',
            "",
            [("get_weather", '{"city": "Paris"}'), ("now", "{}")],
        ),
        (
            F.GENERIC,
            '```json\n{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}\n```\nDone.',
            "Done.",
            [("get_weather", '{"city": "Paris"}')],
        ),
        (
            F.GENERIC,
            '[{"type": "function", "function": {"name": "now", "arguments": "{}"}}]',
            "",
            [("now", "{}")],
        ),
        (F.GENERIC, '{"answer": 42}', '{"answer": 42}', []),
        (F.GENERIC, "```python\nprint(1)\n```", "```python\nprint(1)\n```", []),
        (F.NONE, HERMES_TWO, HERMES_TWO, []),
    ],
)
def test_each_format(fmt: ToolCallFormat, text: str, content: str, calls: list[tuple[str, str]]) -> None:
    assert parse_tool_calls(text, fmt, NAMES) == (content, calls)


def test_mistral_list_and_whitespace_between_calls_is_not_content() -> None:
    text = next(t for f, t in OUTPUTS if f is F.MISTRAL)
    assert parse_tool_calls(text, F.MISTRAL) == (
        "Sure.",
        [("get_weather", '{"city": "Paris"}'), ("now", "{}")],
    )
    assert (
        parse_tool_calls(HERMES_TWO.replace("\n<tool_call>", "\n\n  \n<tool_call>"), F.HERMES)[0]
        == "Let me look."
    )


def test_without_tool_names_any_json_call_counts() -> None:
    assert parse_tool_calls('{"name": "x", "parameters": {"a": 1}}', F.LLAMA3_JSON, None)[1] == [
        ("x", '{"a": 1}')
    ]


def test_text_that_may_start_a_call_is_held_back_then_released() -> None:
    parser = ToolCallParser(F.HERMES)
    assert parser.feed("Hello <tool") == [ContentDelta("Hello")]
    assert parser.feed("box> there ") == [ContentDelta(" <toolbox> there")]
    assert parser.finish() == [ContentDelta(" ")]  # no call: trailing space is content


def test_call_ids_look_like_openais() -> None:
    ids = {new_call_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(i.startswith("call_") and len(i) == 29 and i[5:].isalnum() for i in ids)
    begin = ToolCallParser(F.HERMES).feed('<tool_call>{"name": "now", "arguments": {}}</tool_call>')[0]
    assert isinstance(begin, ToolCallBegin) and begin.id.startswith("call_")


# --------------------------------------------------------------------------- near-JSON

# Qwen2.5-Coder 1.5B Instruct (Q4_K_M) through Hearth's API with the openai SDK, its text
# exactly as written (scenario, sampling). Its template shows the call as
# {{"name": <function-name>, "arguments": <args-json-object>}}, and it copies the braces.
QWEN_OUTPUTS = [
    (  # after a tool result, asked nothing new (a langchain ToolMessage round trip); greedy
        '{{"name": "get_weather", "arguments": {"city": "Paris"}}',
        ("get_weather",),
        [("get_weather", '{"city": "Paris"}')],
    ),
    (  # the same, seed 3
        '{{"name": "get_weather", "arguments": {"city": "Paris"}}}',
        ("get_weather",),
        [("get_weather", '{"city": "Paris"}')],
    ),
    (  # "What is the weather in Paris and in Tokyo?", seed 1
        '{{"name": "get_weather", "arguments": {"city": ["Paris", "Tokyo"]}}}',
        ("get_weather",),
        [("get_weather", '{"city": ["Paris", "Tokyo"]}')],
    ),
    (  # "Use the tool to add 17 and 25.", seed 1
        '{{"name": "add", "arguments": {"a": 17, "b": 25}}}',
        ("add",),
        [("add", '{"a": 17, "b": 25}')],
    ),
    (  # two tools, "What time is it in Tokyo, and what is the weather there?", seed 1
        '{{"name": "get_time", "arguments": {"city": "Tokyo"}}}, '
        '{{"name": "get_weather", "arguments": {"city": "Tokyo"}}}',
        ("get_weather", "get_time"),
        [("get_time", '{"city": "Tokyo"}'), ("get_weather", '{"city": "Tokyo"}')],
    ),
    (  # the same question, seed 3: two fenced calls
        '```json\n{\n  "name": "get_time",\n  "arguments": {\n    "city": "Tokyo"\n  }\n}\n```\n\n'
        '```json\n{\n  "name": "get_weather",\n  "arguments": {\n    "city": "Tokyo"\n  }\n}\n```',
        ("get_weather", "get_time"),
        [("get_time", '{"city": "Tokyo"}'), ("get_weather", '{"city": "Tokyo"}')],
    ),
    (  # "What is the weather in Paris?", greedy (parsed before near-JSON too)
        '```json\n{\n  "name": "get_weather",\n  "arguments": {\n    "city": "Paris"\n  }\n}\n```',
        ("get_weather",),
        [("get_weather", '{"city": "Paris"}')],
    ),
    (  # after a tool result, offered two tools, seed 4: a fence with no language
        '```\n{\n  "name": "get_weather",\n  "arguments": {"city": "Paris"}\n}\n```',
        ("get_weather", "get_time"),
        [("get_weather", '{"city": "Paris"}')],
    ),
    (  # after a tool result, greedy, with the prompt cache in another state: a made-up
        # "response" after the arguments, cut off by max_tokens=48
        '```json\n{\n  "name": "get_weather",\n  "arguments": {\n    "city": "Paris"\n  },\n'
        '  "response": {\n    "temperature_c": 21,\n    "sky": "sunny"\n',
        ("get_weather",),
        [("get_weather", '{"city": "Paris"}')],
    ),
    (  # "What is the weather in Paris?", seed 1
        '{\n    "name": "get_weather",\n    "arguments": {\n        "city": "Paris"\n    }\n}',
        ("get_weather",),
        [("get_weather", '{"city": "Paris"}')],
    ),
]


@pytest.mark.parametrize(("text", "names", "calls"), QWEN_OUTPUTS)
@settings(max_examples=30, deadline=None)
@given(cuts=st.lists(st.integers(0, 10_000), max_size=12))
def test_real_qwen_outputs_are_calls_however_they_stream(
    text: str, names: tuple[str, ...], calls: list[tuple[str, str]], cuts: list[int]
) -> None:
    assert parse_tool_calls(text, F.HERMES, names) == ("", calls)
    for pieces in (cut(text, cuts), list(text)):
        events = run(F.HERMES, pieces, names)
        assert not any(isinstance(e, ContentDelta) for e in events)  # nothing leaks as content
        assert [json.loads(a) for _, a in _calls(events)] == [json.loads(a) for _, a in calls]


def _calls(events: list[OutputEvent]) -> list[tuple[str, str]]:
    return collect_output(events)[1]


def test_a_doubled_brace_reply_is_held_back_until_it_resolves() -> None:
    parser = ToolCallParser(F.HERMES, tool_names=("get_weather",), make_id=lambda: "id")
    assert parser.feed('{{"name": "get_weather", "arguments": {"city": "Paris"}}') == []
    assert parser.finish() == [ToolCallBegin(0, "id", "get_weather"), ToolCallArgs(0, '{"city": "Paris"}')]


# Each near-JSON form accepted (docs/API.md lists them), in a <tool_call> block and bare.
WEATHER_PARIS = [("get_weather", '{"city": "Paris"}')]
NEAR_JSON_CALLS = [
    '{{"name": "get_weather", "arguments": {"city": "Paris"}}}',  # doubled braces
    '{{"name": "get_weather", "arguments": {{"city": "Paris"}}}}',  # doubled everywhere
    '{{"name": "get_weather", "arguments": {"city": "Paris"}}',  # doubled, one brace short
    "{'name': 'get_weather', 'arguments': {'city': 'Paris'}}",  # Python's quotes
    '{"name": "get_weather", "arguments": {\'city\': \'Paris\'}}',  # quotes mixed
    '{name: "get_weather", arguments: {city: "Paris"}}',  # bare keys
    '{"name": "get_weather", "arguments": {"city": "Paris",},}',  # trailing commas
    '{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}',  # arguments as a string
    '{"name": "get_weather", "arguments": "{\'city\': \'Paris\'}"}',  # ... of near-JSON
]


@pytest.mark.parametrize("call", NEAR_JSON_CALLS)
def test_near_json_calls_parse_tagged_and_bare(call: str) -> None:
    for text in (f"<tool_call>\n{call}\n</tool_call>", call, f"```json\n{call}\n```"):
        content, calls = parse_tool_calls(text, F.HERMES, NAMES)
        assert (content, [(n, json.loads(a)) for n, a in calls]) == ("", [("get_weather", {"city": "Paris"})])
        events = run(F.HERMES, list(text))
        assert not any(isinstance(e, ContentDelta) for e in events)


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        (  # a missing </tool_call>, then another call
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
            '<tool_call>\n{"name": "now", "arguments": {}}',
            "",
            [*WEATHER_PARIS, ("now", "{}")],
        ),
        (  # near-JSON with a missing </tool_call>, then another call
            "<tool_call>\n{'name': 'get_weather', 'arguments': {'city': 'Paris'}}\n"
            '<tool_call>\n{"name": "now", "arguments": {}}</tool_call>',
            "",
            [*WEATHER_PARIS, ("now", "{}")],
        ),
        (  # a code fence inside the block
            '<tool_call>\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
            "```\n</tool_call>",
            "",
            WEATHER_PARIS,
        ),
        (  # a list of calls in one block
            '<tool_call>\n[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
            '{"name": "now"}]\n</tool_call>',
            "",
            [*WEATHER_PARIS, ("now", "{}")],
        ),
        (  # bare calls one a line, then text
            '{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
            '{"name": "now", "arguments": {}}\nDone.',
            "Done.",
            [*WEATHER_PARIS, ("now", "{}")],
        ),
        (  # Python's literals
            "<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Paris', 'metric': True, 'x': None}}"
            "</tool_call> ok",
            "ok",
            [("get_weather", '{"city": "Paris", "metric": true, "x": null}')],
        ),
        (  # Python's literals in streamed arguments
            '<tool_call>{"name": "get_weather", "arguments": {"city": "True", "metric": True, '
            '"x": None}}</tool_call>',
            "",
            [("get_weather", '{"city": "True", "metric": true, "x": null}')],
        ),
        (  # broken after its name: the call keeps its name, with no arguments
            '<tool_call>\n{"name": "get_weather" "arguments": {}}\n</tool_call>',
            "",
            [("get_weather", "{}")],
        ),
        (  # a trailing comma in streamed arguments is dropped, the rest streams as written
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", }}\n</tool_call>',
            "",
            [("get_weather", '{"city": "Paris" }')],
        ),
    ],
)
def test_near_json_forms(text: str, content: str, calls: list[tuple[str, str]]) -> None:
    assert parse_tool_calls(text, F.HERMES, NAMES) == (content, calls)
    assert normalized(run(F.HERMES, list(text))) == normalized(run(F.HERMES, [text]))


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>\n{'name': 'get_weather', 'arguments': {'city': __import__('os').getcwd()}}</tool_call>",
        "<tool_call>\nget_weather(city='Paris')\n</tool_call>",  # a Python call is not read, let alone run
        "<tool_call>\n{'name': 'get_weather' 'arguments': {}}\n</tool_call>",  # a comma missing
        "<tool_call>\n{'name': 'get_weather', 'arguments': {'city': 'Par\n</tool_call>",  # a string not ended
        "<tool_call>\n{{'name': 'get_weather', 'arguments': {'city': '" + "x" * 40_000 + "'}}}\n</tool_call>",
    ],
)
def test_what_is_not_near_json_stays_content(text: str) -> None:
    content, calls = parse_tool_calls(text, F.HERMES, NAMES)
    assert calls == [] and content == text.strip()


def test_an_apostrophe_in_words_does_not_hold_the_reply_back() -> None:
    parser = ToolCallParser(F.HERMES, tool_names=NAMES)
    assert parser.feed("[I don't know] the weather") == [ContentDelta("[I don't know] the weather")]
    parser = ToolCallParser(F.HERMES, tool_names=NAMES)
    assert parser.feed("{'name': 'now', 'x': '}'") == []  # a quoted '}' does not end it
    assert [type(e) for e in parser.feed("}")] == [ToolCallBegin, ToolCallArgs]


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "get_weather", "arguments": {"city": "Pa',  # its arguments cut: not a call
        '{"name": "get_weather", "arguments": {"n": 12',
        '{"name": "get_weather", "argum',
        '{"name": "get_wea',
        '{"name": "not_offered", "arguments": {}, "x": 1',
    ],
)
def test_a_reply_start_call_cut_before_its_arguments_ended_is_content(text: str) -> None:
    assert parse_tool_calls(text, F.HERMES, NAMES) == (text, [])


def test_near_json_values() -> None:
    assert loads_near_json('{{"a": {"b": [1, 2.5e3, -0,]}}}') == {"a": {"b": [1, 2500.0, 0]}}
    assert loads_near_json("'it\\'s \\u00e9 \\ud83d\\ude00 \"q\"'") == "it's é 😀 \"q\""
    assert loads_near_json("{a_1: False, 'b': null, c: None}") == {"a_1": False, "b": None, "c": None}
    big = json.dumps({"name": "write", "arguments": {"text": "x" * 40_000}})
    assert loads_near_json(big)["arguments"]["text"] == "x" * 40_000  # strict JSON: any size
    for bad in ("{a: x}", "[1 2]", "{'a': 1}}", "'\\x41'", "1 + 1", "{" * 40 + "}" * 40, "x" * 40_000):
        with pytest.raises(ValueError):
            loads_near_json(bad)


# --------------------------------------------------------------------------- reasoning

REASONING_OUTPUTS = [
    ("<think>\nThe user wants x.\n\n</think>\n\nThe answer.", False, ("The user wants x.", "The answer.")),
    ("  <think>a < b</think>b <think>c</think>", False, ("a < b", "b <think>c</think>")),
    (
        "No thinking here. <think>not reasoning</think>",
        False,
        ("", "No thinking here. <think>not reasoning</think>"),
    ),
    ("still thinking </think> done", True, ("still thinking", "done")),
    ("<think>\nrepeated open</think>x", True, ("repeated open", "x")),
    ("thinking that never ends </thi", True, ("thinking that never ends </thi", "")),
    ("<thinking about it", False, ("", "<thinking about it")),
    ("<think></think>", False, ("", "")),
    ("\n\n", False, ("", "\n\n")),
]


@pytest.mark.parametrize(("text", "inside", "expected"), REASONING_OUTPUTS)
@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(0, 10_000), max_size=10))
def test_reasoning_splits_the_same_however_the_output_is_cut(
    text: str, inside: bool, expected: tuple[str, str], cuts: list[int]
) -> None:
    assert split_reasoning(text, inside) == expected
    for pieces in (cut(text, cuts), list(text)):
        splitter = ReasoningSplitter(starts_inside=inside)
        reasoning, content = "", ""
        for piece in pieces:
            r, c = splitter.feed(piece)
            reasoning, content = reasoning + r, content + c
        r, c = splitter.finish()
        assert (reasoning + r, content + c) == expected


@settings(max_examples=200, deadline=None)
@given(
    thought=st.text(alphabet="ab <>/thinkx\n", max_size=30).filter(lambda t: "</think>" not in t),
    answer=st.text(alphabet="ab <>/thinkx\n", max_size=30),
    cuts=st.lists(st.integers(0, 10_000), max_size=8),
)
def test_reasoning_never_leaks_into_the_answer(thought: str, answer: str, cuts: list[int]) -> None:
    text = f"<think>{thought}</think>{answer}"
    splitter = ReasoningSplitter()
    reasoning, content = "", ""
    for piece in cut(text, cuts):
        r, c = splitter.feed(piece)
        reasoning, content = reasoning + r, content + c
    r, c = splitter.finish()
    reasoning, content = reasoning + r, content + c
    assert reasoning == thought.strip()
    assert content == answer.lstrip()


def test_reasoning_is_streamed_not_held_to_the_end() -> None:
    splitter = ReasoningSplitter(starts_inside=True)
    assert splitter.feed("Let me think") == ("Let me think", "")
    assert splitter.feed(" more <") == (" more", "")  # "<" may open "</think>"
    assert splitter.feed("/think>Answer") == ("", "Answer")
    assert not splitter.in_reasoning


# --------------------------------------------------------------------------- forcing calls


@pytest.fixture(scope="module")
def tiny_vocab(tiny_model: Path) -> Iterator[Any]:
    import llama_cpp

    with vocab_only(tiny_model) as model:
        yield llama_cpp.llama_model_get_vocab(model)


CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
NOW = '{"name": "now", "arguments": {}}'


@pytest.mark.parametrize(
    ("fmt", "parallel", "good", "bad"),
    [
        (
            F.HERMES,
            False,
            [f"<tool_call>\n{CALL}\n</tool_call>"],
            [
                f"<tool_call>\n{CALL}\n</tool_call>\n<tool_call>\n{NOW}\n</tool_call>",
                "Hi",
                f"<tool_call>\n{CALL}",
            ],
        ),
        (
            F.HERMES,
            True,
            [f"<tool_call>\n{CALL}\n</tool_call>\n<tool_call>\n{NOW}\n</tool_call>"],
            ['<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>'],
        ),
        (
            F.LLAMA3_JSON,
            True,
            ['{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "now", "parameters": {}}'],
            [CALL],
        ),
        (F.MISTRAL, False, [f"[TOOL_CALLS] [{CALL}]"], [f"[TOOL_CALLS] [{CALL}, {NOW}]", CALL]),
        (F.GENERIC, True, ['{"tool_calls": [' + CALL + ", " + NOW + "]}"], [CALL]),
        (F.GENERIC, False, [CALL, NOW], ['{"name": "other", "arguments": {}}']),
    ],
)
def test_required_tool_choice_forces_the_formats_syntax_and_schemas(
    tiny_vocab: Any, fmt: ToolCallFormat, parallel: bool, good: list[str], bad: list[str]
) -> None:
    grammar = tool_choice_grammar(fmt, TOOLS, "required", parallel)
    assert grammar is not None and grammar.root == "hearth-tool-calls"
    for text in good:
        assert native_accepts(tiny_vocab, grammar, text) == (True, True), text
        assert [name for name, _ in parse_tool_calls(text, fmt, NAMES)[1]]  # and it parses back
    for text in bad:
        assert native_accepts(tiny_vocab, grammar, text) != (True, True), text


def test_a_named_choice_forces_that_function(tiny_vocab: Any) -> None:
    named = {"type": "function", "function": {"name": "now"}}
    for choice in (named, "now"):
        grammar = tool_choice_grammar(F.HERMES, TOOLS, choice, parallel=False)
        assert grammar is not None
        assert native_accepts(tiny_vocab, grammar, f"<tool_call>\n{NOW}\n</tool_call>") == (True, True)
        assert not native_accepts(tiny_vocab, grammar, f"<tool_call>\n{CALL}\n</tool_call>")[0]


def test_tool_choice_that_forces_nothing_or_cannot_be_forced() -> None:
    assert tool_choice_grammar(F.HERMES, TOOLS, "auto") is None
    assert tool_choice_grammar(F.HERMES, TOOLS, "none") is None
    with pytest.raises(InvalidChatRequest, match="'missing', which is not among the tools"):
        tool_choice_grammar(F.HERMES, TOOLS, "missing")
    with pytest.raises(InvalidChatRequest, match="named tool_choice must be"):
        tool_choice_grammar(F.HERMES, TOOLS, {"type": "function"})
    with pytest.raises(InvalidChatRequest, match="no tool-call format"):
        tool_choice_grammar(F.NONE, TOOLS, "required")
    bad_tool = {
        "type": "function",
        "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "nope"}}}},
    }
    with pytest.raises(
        InvalidChatRequest, match="Tool 'f': The JSON schema has an unknown type 'nope' at #/properties/x"
    ):
        tool_choice_grammar(F.HERMES, (bad_tool,), "required")


# --------------------------------------------------------------------------- tools in prompts

TOOL_TEMPLATE = (
    "{% if tools %}<|im_start|>system\nTools:{% for t in tools %}\n{{ t | tojson }}{% endfor %}"
    "<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    '{% for c in m.tool_calls or [] %}<tool_call>{"name": "{{ c.function.name }}", "arguments": '
    "{{ c.function.arguments | tojson }}}</tool_call>{% endfor %}"
    "{% if m.tool_call_id %}[for {{ m.tool_call_id }}]{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CONVERSATION = (
    ChatMessage(Role.USER, "Weather in Paris?"),
    ChatMessage(Role.ASSISTANT, "", tool_calls=(ToolCall("call_1", "get_weather", '{"city": "Paris"}'),)),
    ChatMessage(Role.TOOL, '{"temp": 21}', tool_call_id="call_1", name="get_weather"),
)


def test_a_template_with_tool_support_renders_tools_calls_and_results() -> None:
    text = ChatTemplate(TOOL_TEMPLATE, "llama").render(CONVERSATION, tools=TOOLS).text
    assert json.dumps(WEATHER_TOOL) in text  # tojson as transformers: nothing escaped
    assert '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>' in text
    assert '<|im_start|>tool\n{"temp": 21}[for call_1]<|im_end|>' in text
    assert ChatTemplate(TOOL_TEMPLATE, "llama").render(CONVERSATION[:1]).text.startswith("<|im_start|>user")


def test_a_template_without_tool_support_gets_the_fallback_prompt() -> None:
    template = ChatTemplate(DEFAULT_CHAT_TEMPLATE, "llama")
    assert not template.renders_tools
    text = template.render(CONVERSATION, tools=TOOLS).text
    assert text.startswith("<|im_start|>system\n# Tools") and json.dumps(WEATHER_TOOL) in text
    assert (
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
        "</tool_call><|im_end|>" in text
    )
    assert '<|im_start|>user\n<tool_response>\n{"temp": 21}\n</tool_response><|im_end|>' in text
    # what the fallback asks for is what the Hermes parser reads
    assert parse_tool_calls(text.split("<|im_start|>assistant\n")[1].split("<|im_end|>")[0], F.HERMES)[1]
    # without a template (a built-in format) too
    plain = ChatTemplate(None, "gemma3").render(CONVERSATION, tools=TOOLS).text
    assert "<tool_response>" in plain and "# Tools" in plain


def test_the_fallback_joins_a_system_prompt_and_consecutive_results() -> None:
    from engine.chat.formats import Turn

    turns = [
        Turn(Role.SYSTEM, "Be brief."),
        Turn(Role.TOOL, "1", tool_call_id="a"),
        Turn(Role.TOOL, "2", tool_call_id="b"),
    ]
    out = plain_tool_turns(turns, TOOLS)
    assert out[0].content == "Be brief.\n\n" + tools_system_prompt(TOOLS)
    assert [t.role for t in out] == [Role.SYSTEM, Role.USER]
    assert out[1].content == "<tool_response>\n1\n</tool_response>\n<tool_response>\n2\n</tool_response>"
    assert plain_tool_turns(turns[:1], ()) == turns[:1]


def test_request_tools_are_validated() -> None:
    ChatRequest(messages=CONVERSATION, tools=TOOLS).validate()
    cases = [
        ((WEATHER_TOOL, WEATHER_TOOL), "Two tools are called 'get_weather'"),
        (({"type": "retrieval"},), "Tool 1 must be"),
        (({"type": "function", "function": {"name": ""}},), "function name of 1 to 64"),
        (
            ({"type": "function", "function": {"name": "f", "parameters": []}},),
            "must be a JSON schema object",
        ),
        (
            ({"type": "function", "function": {"name": "f", "description": 3}},),
            "description of tool 'f' must be text",
        ),
        (({"type": "function", "function": {"name": "f", "x": float("nan")}},), "not JSON"),
        (
            tuple({"type": "function", "function": {"name": f"f{i}"}} for i in range(129)),
            "at most 128 tools",
        ),
    ]
    for tools, message in cases:
        with pytest.raises(InvalidChatRequest, match=message):
            ChatRequest(messages=CONVERSATION[:1], tools=tuple(tools)).validate()
    with pytest.raises(InvalidChatRequest, match="raw prompt"):
        ChatRequest(prompt="x", tools=TOOLS).validate()
    with pytest.raises(InvalidChatRequest, match="which call it answers"):
        ChatRequest(messages=(ChatMessage(Role.TOOL, "1"),)).validate()
    with pytest.raises(InvalidChatRequest, match="Only assistant messages can call tools"):
        ChatMessage(Role.USER, "x", tool_calls=(ToolCall("c", "f"),))
    with pytest.raises(InvalidChatRequest, match="name must be 1 to 64"):
        ToolCall("c", "")
    assert ToolCall("c", "f", "not json").parsed_arguments() == "not json"
    assert ToolCall("c", "f", '{"a": 1}').parsed_arguments() == {"a": 1}


@pytest.mark.qwen
def test_qwens_own_template_renders_tools_and_tool_results(qwen_path: Path) -> None:
    import gguf

    source = gguf.GGUFReader(str(qwen_path)).fields["tokenizer.chat_template"].contents()
    template = ChatTemplate(source, "qwen2", eos_token="<|im_end|>")
    text = template.render(CONVERSATION, tools=TOOLS).text
    assert text.startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud.")
    assert "# Tools\n\nYou may call one or more functions" in text
    assert f"<tools>\n{json.dumps(WEATHER_TOOL)}\n{json.dumps(TIME_TOOL)}\n</tools>" in text
    assert (
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
        "</tool_call><|im_end|>" in text
    )
    assert (
        '<|im_start|>user\n<tool_response>\n{"temp": 21}\n</tool_response><|im_end|>\n<|im_start|>assistant\n'
        in text
    )
    traits = chat_traits(template)
    assert traits == ChatTraits(F.HERMES, opens_thinking=False, thinks=False, renders_tools=True)


# --------------------------------------------------------------------------- traits


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (TOOL_TEMPLATE, ChatTraits(F.HERMES, False, False, True)),
        (DEFAULT_CHAT_TEMPLATE, ChatTraits(F.HERMES, False, False, False)),
        (None, ChatTraits(F.HERMES, False, False, False)),
        (
            "{% for m in messages %}{{ m.content }}{% endfor %}"
            "{% if add_generation_prompt %}<｜Assistant｜><think>\n{% endif %}",
            ChatTraits(F.HERMES, True, True, False),
        ),
        (
            "{% for m in messages %}{{ m.content.split('</think>')[-1] }}{% endfor %}"
            "{% if tools %}<tool_call>{% endif %}",
            ChatTraits(F.HERMES, False, True, True),
        ),
        (
            "{% if tools %}<|python_tag|>{% endif %}"
            "{% for m in messages %}{{ m.content }}<|eot_id|>{% endfor %}",
            ChatTraits(F.LLAMA3_JSON, False, False, True),
        ),
        (
            "{% if tools %}[AVAILABLE_TOOLS]{% endif %}"
            "{% for m in messages %}[TOOL_CALLS]{{ m.content }}{% endfor %}",
            ChatTraits(F.MISTRAL, False, False, True),
        ),
        (
            "{% if tools %}{{ tools | tojson }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}",
            ChatTraits(F.GENERIC, False, False, True),
        ),
    ],
)
def test_traits_are_read_from_the_template(template: str | None, expected: ChatTraits) -> None:
    assert chat_traits(ChatTemplate(template, "llama")) == expected


def test_a_thinking_model_gets_lazy_grammars_and_a_splitter_that_starts_inside() -> None:
    grammar = Grammar('root ::= "a"')
    thinking = ChatTraits(F.HERMES, opens_thinking=True, thinks=True)
    assert thinking.constrain(grammar).lazy_triggers == ("</think>",)
    assert ChatTraits().constrain(grammar) is grammar
    assert thinking.reasoning_splitter().feed("hm</think>ok") == ("hm", "ok")
    assert ChatTraits().reasoning_splitter().feed("hm</think>ok") == ("", "hm</think>ok")
