"""Every bad input gets a 400 (or 404/405/413) in OpenAI's error shape with a one-line
message naming what is wrong, and nothing a client sends stops the server or the engine."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import openai
import pytest

from app.api import ServerConfig
from tests.api_support import ServerThread, load
from tests.conftest import SCRIPT_TEXT

HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def server(scripted_model: Path):
    model = load(scripted_model, parallel=2)
    with ServerThread(lambda: model) as server:
        yield server
    model.unload()


def assert_error(status: int, body: dict, expected_status: int, *, param: str | None = None,
                 says: str = "", kind: str = "invalid_request_error") -> str:  # fmt: skip
    assert status == expected_status, body
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == kind
    message = error["message"]
    assert isinstance(message, str) and message and "\n" not in message and len(message) < 300
    if param is not None:
        assert error["param"] == param, error
    assert says.lower() in message.lower(), message
    return message


def chat(server: ServerThread, **fields: object) -> tuple[int, dict]:
    return server.post_json("/v1/chat/completions", {"messages": HELLO, **fields})


BAD_FIELDS = [
    ({"temperature": "hot"}, "temperature", "must be a number"),
    ({"temperature": -1}, "temperature", "between 0 and 5"),
    ({"temperature": 6}, "temperature", "between 0 and 5"),
    ({"top_p": 1.5}, "top_p", "at most 1"),
    ({"top_k": -1}, "top_k", "at least 0"),
    ({"top_k": 2.5}, "top_k", "integer"),
    ({"min_p": 2}, "min_p", "at least 0 and below 1"),
    ({"min_p": 1.0}, "min_p", "at least 0 and below 1"),  # SamplingParams.validate's range too
    ({"seed": 2**32 - 1}, "seed", "at most 4294967294"),  # llama.cpp's "random": not a seed
    ({"seed": -2}, "seed", "at least -1"),
    ({"repeat_penalty": 0}, "repeat_penalty", "above 0"),
    ({"seed": "x"}, "seed", "integer"),
    ({"seed": 1e30}, "seed", "at most"),
    ({"max_tokens": -5}, "max_tokens", "at least 1"),
    ({"max_tokens": 0}, "max_tokens", "at least 1"),
    ({"max_tokens": True}, "max_tokens", "not a boolean"),
    ({"max_tokens": 1e30}, "max_tokens", "at most 2147483647"),
    ({"max_completion_tokens": "10"}, "max_completion_tokens", "integer"),
    ({"stop": 5}, "stop", "string or an array"),
    ({"stop": [""]}, "stop", "empty"),
    ({"stop": ["x"] * 17}, "stop", "at most 16"),
    ({"n": 2}, "n", "must be 1"),
    ({"stream": "yes"}, "stream", "boolean"),
    ({"stream": True, "stream_options": []}, "stream_options", "object"),
    ({"mirostat": 2, "typical_p": 0.5}, "mirostat", "Unsupported fields: 'mirostat', 'typical_p'"),
    ({"presence_penalty": -2.5}, "presence_penalty", "between -2 and 2"),
    ({"frequency_penalty": 3}, "frequency_penalty", "between -2 and 2"),
    ({"logprobs": "yes"}, "logprobs", "boolean"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs", "at most 20"),
    ({"top_logprobs": 3}, "top_logprobs", "logprobs"),
    ({"tools": [{"type": "function"}]}, "tools[0]", "must be"),
    ({"tools": [{"type": "function", "function": {"name": "f", "description": 3}}]}, "tools",
     "description of tool 'f'"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "sometimes"},
     "tool_choice", "none, auto, required or a function"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}],
      "tool_choice": {"type": "function", "function": {"name": "g"}}}, "tool_choice", "g"),
    ({"functions": [{"name": "f"}]}, "functions", "tools"),
    ({"function_call": "auto"}, "function_call", "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice", "tools"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": 3}}},
     "response_format.json_schema.schema", "JSON schema"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x",
      "schema": {"type": "object", "properties": {"a": {"type": "strange"}}}}}},
     "response_format.json_schema.schema", "strange"),
    ({"response_format": {"type": "json_object"}, "tools": [{"type": "function", "function": {"name": "f"}}]},
     "response_format", "cannot be combined"),
    ({"response_format": {"type": "yaml"}}, "response_format", "text, json_object or json_schema"),
    ({"logit_bias": {"50256": -100}}, "logit_bias", "not supported"),
    ({"modalities": ["text", "audio"]}, "modalities", "text"),
    ({"model": 5}, "model", "string"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "param", "says"), BAD_FIELDS, ids=[c[1] + str(i) for i, c in enumerate(BAD_FIELDS)]
)
def test_a_bad_field_is_a_400_naming_it(server: ServerThread, fields: dict, param: str, says: str) -> None:
    status, body = chat(server, **fields)
    assert_error(status, body, 400, param=param, says=says)


REMOTE = {"type": "image_url", "image_url": {"url": "https://x.example/cat.png"}}
INLINE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
BAD_MESSAGES = [
    (None, "messages", "array"),
    ("hello", "messages", "array"),
    ([], "messages", "at least one"),
    (["hello"], "messages[0]", "object"),
    ([{"content": "hi"}], "messages[0].role", "one of"),
    ([{"role": "wizard", "content": "hi"}], "messages[0].role", "Unknown role 'wizard'"),
    ([{"role": "user", "content": 5}], "messages[0].content", "string or an array"),
    ([{"role": "user"}], "messages[0].content", "required"),
    ([{"role": "user", "content": [{"type": "audio"}]}], "messages[0].content[0].type", "'image_url'"),
    ([{"role": "user", "content": [{"type": "text", "text": 1}]}], "messages[0].content[0].text", "string"),
    ([{"role": "user", "content": [REMOTE]}],
     "messages[0].content[0].image_url.url", "never fetches from the network"),
    ([{"role": "user", "content": [INLINE]}],
     "messages[0].content", "no vision projector"),
    ([{"role": "user", "content": "hi"}, {"role": "tool", "content": "42"}],
     "messages[1].tool_call_id", "must name the call"),
    ([{"role": "user", "content": "hi"}, {"role": "function", "content": "42", "name": "f"}],
     "messages[1].role", "use role 'tool'"),
    ([{"role": "user", "content": "hi", "tool_calls": [{"function": {"name": "f"}}]}],
     "messages[0].tool_calls", "only assistant messages"),
    ([{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": ""}}]}],
     "messages[0].tool_calls[0].function.name", "function's name"),
    ([{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": 3}}]}],
     "messages[0].tool_calls[0].function.arguments", "JSON string"),
]  # fmt: skip


@pytest.mark.parametrize(("messages", "param", "says"), BAD_MESSAGES, ids=[c[1] for c in BAD_MESSAGES])
def test_bad_messages_are_a_400_naming_the_message(
    server: ServerThread, messages: object, param: str, says: str
) -> None:
    status, body = server.post_json("/v1/chat/completions", {"messages": messages})
    assert_error(status, body, 400, param=param, says=says)


BAD_BODIES = [
    (b"{not json", "not valid JSON"),
    (b"[1, 2]", "must be a JSON object"),
    (b"", "empty"),
    (b"\xff\xfe{}", "UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"messages": [], "seed": ' + b"9" * 5000 + b"}", "not valid JSON"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}', "temperature"),
]


@pytest.mark.parametrize(("raw", "says"), BAD_BODIES, ids=[s for _, s in BAD_BODIES])
def test_a_malformed_body_is_a_400(server: ServerThread, raw: bytes, says: str) -> None:
    status, _, payload = server.request("POST", "/v1/chat/completions", raw)
    assert_error(status, json.loads(payload), 400, says=says)


def test_completions_refuse_what_they_cannot_do(server: ServerThread) -> None:
    for fields, param in (
        ({"prompt": [1, 2, 3]}, "prompt"),
        ({"prompt": ["a", "b"]}, "prompt"),
        ({"prompt": None}, "prompt"),
        ({"prompt": "x", "suffix": "y"}, "suffix"),
        ({"prompt": "x", "echo": True}, "echo"),
        ({"prompt": "x", "best_of": 3}, "best_of"),
        ({"prompt": "x", "logprobs": 6}, "logprobs"),
        ({"prompt": "x", "messages": HELLO}, "messages"),
    ):
        status, body = server.post_json("/v1/completions", fields)
        assert_error(status, body, 400, param=param)


def test_unknown_paths_and_methods_answer_in_the_same_shape(server: ServerThread) -> None:
    status, _, payload = server.request("POST", "/v1/audio/speech", {"input": "x"})
    assert_error(status, json.loads(payload), 404, says="Unknown endpoint", kind="not_found_error")
    status, _, payload = server.request("GET", "/v1/chat/completions")
    assert_error(status, json.loads(payload), 405, says="does not take GET")


def test_the_sdk_raises_bad_request_with_the_message(server: ServerThread) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        server.client().chat.completions.create(model="m", messages=HELLO, n=3)
    assert "must be 1" in caught.value.message
    assert caught.value.body["param"] == "n"  # type: ignore[index]


def test_ignored_fields_change_nothing(server: ServerThread) -> None:
    status, body = chat(server, temperature=0, repeat_penalty=1.0, user="alice", metadata={"a": "b"},
                        store=False, parallel_tool_calls=False, tool_choice="none", presence_penalty=0,
                        response_format={"type": "text"}, cache_prompt=True)  # fmt: skip
    assert status == 200, body
    assert body["choices"][0]["message"]["content"] == SCRIPT_TEXT


def test_the_server_still_serves_after_every_bad_request(server: ServerThread) -> None:
    status, body = chat(server, temperature=0, repeat_penalty=1.0)
    assert status == 200 and body["choices"][0]["message"]["content"] == SCRIPT_TEXT


def raw_exchange(port: int, head: bytes, body: bytes) -> bytes:
    """Send a request's head and (part of) its body, then read one response (the server
    answers before the body is complete; the socket stays open for writing, as a client's
    does while it uploads)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head + body)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                return answer
            answer += chunk
        headers, _, rest = answer.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)content-length: *(\d+)", headers).group(1))
        while len(rest) < length and (chunk := sock.recv(65536)):
            rest += chunk
    return headers + b"\r\n\r\n" + rest


def test_a_body_over_20_mb_is_refused_with_413(server: ServerThread) -> None:
    assert server.config.max_body_bytes == 20 * 1024 * 1024
    size = 21 * 1024 * 1024
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {size}\r\n\r\n").encode()  # fmt: skip
    answer = raw_exchange(server.port, head, b'{"messages": "' + b"x" * 1000)
    status_line, _, rest = answer.partition(b"\r\n")
    assert b" 413 " in status_line
    body = json.loads(rest.split(b"\r\n\r\n", 1)[1])
    assert_error(413, body, 413, says="larger than 20")


def test_a_chunked_body_over_the_cap_is_refused_too(scripted_model: Path) -> None:
    model = load(scripted_model, parallel=1)
    try:
        with ServerThread(lambda: model, ServerConfig(port=0, max_body_bytes=64 * 1024)) as small:
            chunk = b"x" * 32 * 1024
            body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(4)) + b"0\r\n\r\n"
            head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")  # fmt: skip
            answer = raw_exchange(small.port, head, body)
            assert b" 413 " in answer.split(b"\r\n", 1)[0]
            assert b"larger than 64" in answer
    finally:
        model.unload()


def test_no_model_is_a_503(scripted_model: Path) -> None:
    with ServerThread(lambda: None) as empty:
        status, body = empty.post_json("/v1/chat/completions", {"messages": HELLO})
        assert_error(status, body, 503, says="No model is loaded", kind="unavailable_error")
        status, _, _ = empty.request("GET", "/health")
        assert status == 503
        assert empty.client().models.list().data == []


def test_what_a_client_sends_is_logged_printably(server: ServerThread) -> None:
    raw = b'{"messages": [{"role": "\\ud800wizard", "content": "hi"}]}'
    status, _, payload = server.request("POST", "/v1/chat/completions", raw, {"User-Agent": "Ed\xe9itor/1.0"})
    assert status == 400 and "Unknown role" in json.loads(payload)["error"]["message"]
    record = server.call(lambda: server.server.log.records[-1])
    assert record.status == 400
    record.line().encode("utf-8")  # a terminal can print it (hearth serve logs every request)


def test_sampling_400s_name_the_field_through_the_sdk(server: ServerThread) -> None:
    client = server.client()
    for extra, param in (({"min_p": 1.0}, "min_p"), ({"seed": 2**32 - 1}, "seed")):
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="m", messages=HELLO, max_tokens=2, extra_body=extra)
        assert caught.value.body["param"] == param  # type: ignore[index]
    # -1 is "random", as in llama-server; the largest seed is one.
    for seed in (-1, 2**32 - 2):
        reply = client.chat.completions.create(model="m", messages=HELLO, max_tokens=2, seed=seed)
        assert reply.choices[0].message.content


def test_an_engine_refusal_of_a_sampling_field_names_it() -> None:
    from app.api.errors import from_engine_error
    from engine import InvalidChatRequest, SamplingParams

    with pytest.raises(InvalidChatRequest) as caught:
        SamplingParams(min_p=1.0).validate()
    error = from_engine_error(caught.value)
    assert (error.status, error.param) == (400, "min_p")
    assert from_engine_error(InvalidChatRequest("x")).param is None
