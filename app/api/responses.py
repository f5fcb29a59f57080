"""The JSON bodies the server answers with, in OpenAI's shapes (and llama-server's
``timings`` beside them)."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from app.api.mapping import Endpoint
from app.api.output import OutputShaper, Piece, PieceKind
from engine import Completion, StopReason

_FINISH = {
    StopReason.STOP_TOKEN: "stop",
    StopReason.STOP_STRING: "stop",
    StopReason.LENGTH: "length",
    StopReason.CONTEXT_FULL: "length",
    StopReason.CANCELLED: "stop",
}


def finish_reason(reason: StopReason) -> str:
    return _FINISH[reason]


def usage(completion: Completion) -> dict[str, Any]:
    u = completion.usage
    return {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
    }


def timings(completion: Completion) -> dict[str, Any]:
    """llama-server's ``timings`` object, from the engine's own measurements, with Hearth's
    own two: ``queued_ms`` (waiting for a free sequence) and ``ttft_ms`` (from admission to
    the first token: the two add up to what the client waited)."""
    t, u = completion.timings, completion.usage
    return {
        "cache_n": u.cached_tokens,
        "prompt_n": max(0, u.prompt_tokens - u.cached_tokens),
        "prompt_ms": round(t.prefill_seconds * 1000, 3),
        "prompt_per_second": round(t.prefill_tokens_per_second, 2),
        "predicted_n": u.completion_tokens,
        "predicted_ms": round(t.decode_seconds * 1000, 3),
        "predicted_per_second": round(t.decode_tokens_per_second, 2),
        "queued_ms": round(t.queued * 1000, 3),
        "ttft_ms": round(t.ttft * 1000, 3),
    }


def piece_delta(piece: Piece) -> dict[str, Any]:
    """One piece of the answer as a chat chunk's ``delta``."""
    if piece.kind is PieceKind.CONTENT:
        return {"content": piece.text}
    if piece.kind is PieceKind.REASONING:
        return {"reasoning_content": piece.text}
    if piece.kind is PieceKind.CALL_BEGIN:  # id, type and name: in the call's first delta only
        call = {"index": piece.index, "id": piece.call_id, "type": "function",
                "function": {"name": piece.name, "arguments": ""}}  # fmt: skip
    else:
        call = {"index": piece.index, "function": {"arguments": piece.text}}
    return {"tool_calls": [call]}


def assistant_message(shaper: OutputShaper) -> dict[str, Any]:
    """The whole answer as the message of a (non-streamed) chat completion."""
    content = "".join(shaper.content)
    message: dict[str, Any] = {"role": "assistant", "content": content or (None if shaper.calls else "")}
    if shaper.reasoning:
        message["reasoning_content"] = "".join(shaper.reasoning)
    if shaper.calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": "".join(c.arguments)}}
            for c in shaper.calls
        ]
    return message


@dataclass(frozen=True)
class ResponseIds:
    """What every chunk of one response repeats."""

    endpoint: Endpoint
    model: str
    id: str = ""
    created: int = field(default_factory=lambda: int(time.time()))

    def __post_init__(self) -> None:
        if not self.id:
            prefix = "chatcmpl" if self.endpoint is Endpoint.CHAT else "cmpl"
            object.__setattr__(self, "id", f"{prefix}-{secrets.token_hex(12)}")

    def _head(self, obj: str) -> dict[str, Any]:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model,
                "system_fingerprint": "hearth"}  # fmt: skip

    # -- whole responses ----------------------------------------------------------

    def chat_completion(
        self, completion: Completion, shaper: OutputShaper, logprobs: dict[str, Any] | None
    ) -> dict[str, Any]:
        body = self._head("chat.completion")
        reason = shaper.finish_reason(completion.stop_reason)
        body["choices"] = [
            {"index": 0, "message": assistant_message(shaper), "logprobs": logprobs, "finish_reason": reason}
        ]
        body["usage"] = usage(completion)
        body["timings"] = timings(completion)
        return body

    def text_completion(self, completion: Completion, logprobs: dict[str, Any] | None) -> dict[str, Any]:
        body = self._head("text_completion")
        reason = finish_reason(completion.stop_reason)
        choice = {"index": 0, "text": completion.text, "logprobs": logprobs, "finish_reason": reason}
        body["choices"] = [choice]
        body["usage"] = usage(completion)
        body["timings"] = timings(completion)
        return body

    # -- stream chunks -------------------------------------------------------------

    def chat_chunk(
        self,
        delta: dict[str, Any],
        reason: str | None = None,
        *,
        logprobs: dict[str, Any] | None = None,
        with_usage: bool = False,
    ) -> dict[str, Any]:
        """``with_usage``: the client asked for a usage chunk, so every other chunk says
        ``"usage": null`` (OpenAI's shape)."""
        body = self._head("chat.completion.chunk")
        body["choices"] = [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": reason}]
        if with_usage:
            body["usage"] = None
        return body

    def text_chunk(
        self,
        text: str,
        reason: str | None = None,
        *,
        logprobs: dict[str, Any] | None = None,
        with_usage: bool = False,
    ) -> dict[str, Any]:
        body = self._head("text_completion")
        body["choices"] = [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": reason}]
        if with_usage:
            body["usage"] = None
        return body

    def usage_chunk(self, completion: Completion) -> dict[str, Any]:
        obj = "chat.completion.chunk" if self.endpoint is Endpoint.CHAT else "text_completion"
        body = self._head(obj)
        body["choices"] = []
        body["usage"] = usage(completion)
        body["timings"] = timings(completion)
        return body
