"""The wire format of remote replies, pure: a ChatRequest as a chat-completions body, a
streamed chunk's parts (thinking apart, usage, llama-server's timings), the stats."""

from __future__ import annotations

import pytest
from openai.types.chat import ChatCompletionChunk

from engine import ChatMessage, ChatRequest, SamplingParams, StopReason
from engine.remote.wire import chat_body, chunk_parts, stop_reason, timings


def chunk(delta: dict, finish: str | None = None, **extra: object) -> ChatCompletionChunk:
    return ChatCompletionChunk.model_validate({
        "id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra,
    })  # fmt: skip


def test_the_body_sends_standard_fields_and_llama_cpp_ones_only_when_they_matter() -> None:
    neutral = SamplingParams(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0, seed=7)
    request = ChatRequest(
        messages=(ChatMessage("system", "Be brief."), ChatMessage("user", "hi")),
        sampling=neutral, max_tokens=32, stop=("END",),
    )  # fmt: skip
    body = chat_body(request, "qwen")
    assert body["model"] == "qwen" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["seed"], body["stop"]) == (
        32, 0.0, 1.0, 7, ["END"],
    )  # fmt: skip
    assert "extra_body" not in body  # a strict server is not sent what it may refuse for nothing
    tuned = chat_body(ChatRequest(messages=request.messages, sampling=SamplingParams()), "qwen")
    assert tuned["extra_body"] == {"top_k": 40, "min_p": 0.05, "repeat_penalty": 1.1}


def test_a_continued_reply_is_sent_as_a_final_assistant_message() -> None:
    request = ChatRequest(messages=(ChatMessage("user", "count"),), assistant_prefix="1, 2, 3")
    assert chat_body(request, "m")["messages"][-1] == {"role": "assistant", "content": "1, 2, 3"}


def test_chunks_give_content_thinking_finish_usage_and_timings() -> None:
    assert chunk_parts(chunk({"content": "Hel"})).content == "Hel"
    assert chunk_parts(chunk({"reasoning_content": "hmm"})).reasoning == "hmm"
    last = chunk_parts(chunk({}, "length"))
    assert last.finish_reason == "length" and stop_reason(last.finish_reason) is StopReason.LENGTH
    assert stop_reason("stop") is StopReason.STOP_TOKEN
    usage = ChatCompletionChunk.model_validate({
        "id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17,
                  "prompt_tokens_details": {"cached_tokens": 8}},
        "timings": {"predicted_per_second": 41.5, "predicted_ms": 120.0, "prompt_per_second": 300.0},
    })  # fmt: skip
    parts = chunk_parts(usage)
    assert (parts.usage.prompt_tokens, parts.usage.cached_tokens, parts.usage.completion_tokens) == (12, 8, 5)
    t = timings(parts.timings, ttft=0.25, streamed_s=1.0, completion_tokens=5)
    assert (t.ttft, t.decode_tokens_per_second, t.decode_seconds, t.prefill_tokens_per_second) == (
        0.25, 41.5, 0.12, 300.0,
    )  # fmt: skip


def test_without_server_timings_the_rate_is_measured_here() -> None:
    t = timings(None, ttft=0.5, streamed_s=2.0, completion_tokens=50)
    assert (t.ttft, t.decode_tokens_per_second, t.decode_seconds) == (0.5, 25.0, 2.0)


def test_a_hearth_server_s_queue_time_is_queued_not_time_to_first_token() -> None:
    t = timings({"queued_ms": 1500.0, "ttft_ms": 200.0}, ttft=1.75, streamed_s=1.0, completion_tokens=10)
    assert (t.queued, t.ttft) == (1.5, pytest.approx(0.25))
    # Never more than what was measured here (clocks of two machines, rounding).
    t = timings({"queued_ms": 5000.0}, ttft=1.0, streamed_s=1.0, completion_tokens=10)
    assert (t.queued, t.ttft) == (1.0, 0.0)
