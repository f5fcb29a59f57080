"""The JSON bodies the server answers with, in OpenAI's shapes (and llama-server's
``timings`` beside them)."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from app.api.mapping import Endpoint
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
    """llama-server's ``timings`` object, from the engine's own measurements."""
    t, u = completion.timings, completion.usage
    return {
        "cache_n": u.cached_tokens,
        "prompt_n": max(0, u.prompt_tokens - u.cached_tokens),
        "prompt_ms": round(t.prefill_seconds * 1000, 3),
        "prompt_per_second": round(t.prefill_tokens_per_second, 2),
        "predicted_n": u.completion_tokens,
        "predicted_ms": round(t.decode_seconds * 1000, 3),
        "predicted_per_second": round(t.decode_tokens_per_second, 2),
        "ttft_ms": round(t.ttft * 1000, 3),
    }


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

    def completion(self, completion: Completion) -> dict[str, Any]:
        reason = finish_reason(completion.stop_reason)
        if self.endpoint is Endpoint.CHAT:
            message = {"role": "assistant", "content": completion.text}
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": reason}
            body = self._head("chat.completion")
        else:
            choice = {"index": 0, "text": completion.text, "logprobs": None, "finish_reason": reason}
            body = self._head("text_completion")
        body["choices"] = [choice]
        body["usage"] = usage(completion)
        body["timings"] = timings(completion)
        return body

    # -- stream chunks -------------------------------------------------------------

    def chunk(self, text: str | None, reason: str | None = None, *, first: bool = False,
              with_usage: bool = False) -> dict[str, Any]:  # fmt: skip
        """One SSE chunk: ``text`` (None: no content), the finish reason on the last one.
        ``with_usage``: the client asked for a usage chunk, so every other chunk says
        ``"usage": null`` (OpenAI's shape)."""
        if self.endpoint is Endpoint.CHAT:
            delta: dict[str, Any] = {"role": "assistant", "content": text or ""} if first else {}
            if text is not None and not first:
                delta["content"] = text
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
            body = self._head("chat.completion.chunk")
        else:
            choice = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": reason}
            body = self._head("text_completion")
        body["choices"] = [choice]
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
