"""A ChatRequest as an OpenAI chat-completions body, and a streamed chunk's parts back.

Pure: no network, no Qt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.base.errors import InvalidChatRequest
from engine.chat import ChatMessage, Role
from engine.requests.completion import StopReason, Timings, Usage
from engine.requests.request import ChatRequest

_FINISH = {"length": StopReason.LENGTH}  # everything else ("stop", "tool_calls"...) ends a turn


def _message(message: ChatMessage) -> dict[str, Any]:
    body: dict[str, Any] = {"role": message.role.value, "content": message.text}
    if message.role is Role.TOOL and message.tool_call_id:
        body["tool_call_id"] = message.tool_call_id
    if message.name:
        body["name"] = message.name
    return body


def chat_body(request: ChatRequest, model_id: str) -> dict[str, Any]:
    """The keyword arguments of ``client.chat.completions.create``.

    Standard OpenAI fields always; llama.cpp's ``top_k``, ``min_p`` and ``repeat_penalty``
    (read by llama-server, vLLM, Ollama and Hearth) only when they change anything, so a
    strict server is not sent fields it may refuse for nothing. A reply being continued
    (``assistant_prefix``) is sent as a final assistant message, which llama-server and
    Hearth continue.
    """
    if request.prompt is not None:
        raise InvalidChatRequest("A remote model takes chat messages, not a raw prompt.")
    messages = [_message(m) for m in request.messages]
    if request.assistant_prefix:
        messages.append({"role": "assistant", "content": request.assistant_prefix})
    s = request.sampling
    body: dict[str, Any] = {
        "model": model_id,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": request.max_tokens,
        "temperature": s.temperature,
        "top_p": s.top_p,
    }
    if s.seed is not None:
        body["seed"] = s.seed
    if request.stop:
        body["stop"] = list(request.stop)
    if s.frequency_penalty:
        body["frequency_penalty"] = s.frequency_penalty
    if s.presence_penalty:
        body["presence_penalty"] = s.presence_penalty
    extra: dict[str, Any] = {}
    if s.top_k > 0:
        extra["top_k"] = s.top_k
    if s.min_p > 0:
        extra["min_p"] = s.min_p
    if s.repeat_penalty != 1.0:
        extra["repeat_penalty"] = s.repeat_penalty
    if extra:
        body["extra_body"] = extra
    return body


@dataclass(frozen=True)
class ChunkParts:
    """What one streamed chunk carries."""

    reasoning: str = ""
    content: str = ""
    finish_reason: str | None = None
    usage: Usage | None = None
    timings: dict[str, Any] | None = None  # llama-server's (and Hearth's) own measurements


def chunk_parts(chunk: Any) -> ChunkParts:
    """The parts of an SDK ``ChatCompletionChunk`` (its unknown fields kept in model_extra)."""
    reasoning = content = ""
    finish = None
    for choice in chunk.choices or ():
        delta = choice.delta
        if delta is not None:
            content += delta.content or ""
            extra = delta.model_extra or {}
            reasoning += extra.get("reasoning_content") or extra.get("reasoning") or ""
        finish = choice.finish_reason or finish
    usage = None
    if chunk.usage is not None:
        details = chunk.usage.prompt_tokens_details
        cached = (details.cached_tokens or 0) if details is not None else 0
        usage = Usage(chunk.usage.prompt_tokens or 0, cached, chunk.usage.completion_tokens or 0)
    timings = (chunk.model_extra or {}).get("timings")
    return ChunkParts(reasoning, content, finish, usage, timings if isinstance(timings, dict) else None)


def stop_reason(finish_reason: str | None) -> StopReason:
    return _FINISH.get(finish_reason or "", StopReason.STOP_TOKEN)


def timings(
    reported: dict[str, Any] | None, ttft: float, streamed_s: float, completion_tokens: int
) -> Timings:
    """The server's own rates where it reports them (llama-server's ``timings``), else rates
    from what arrived here; ``ttft`` is measured here (what the user waited), less the time
    a Hearth server says the request waited for a free sequence (its ``queued_ms``), which
    is ``queued``."""
    r = reported or {}

    def number(key: str) -> float:
        value = r.get(key)
        return float(value) if isinstance(value, (int, float)) else 0.0

    decode_s = number("predicted_ms") / 1000 or streamed_s
    measured = completion_tokens / streamed_s if streamed_s > 0 else 0.0
    decode_rate = number("predicted_per_second") or measured
    queued = min(max(0.0, number("queued_ms") / 1000), ttft)
    return Timings(
        queued=queued,
        ttft=ttft - queued,
        prefill_seconds=number("prompt_ms") / 1000,
        decode_seconds=decode_s,
        prefill_tokens_per_second=number("prompt_per_second"),
        decode_tokens_per_second=decode_rate,
    )
