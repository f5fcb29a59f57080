"""Log probabilities in OpenAI's two shapes: chat's ``{"content": [...]}`` and the legacy
completions' ``{"tokens", "token_logprobs", "top_logprobs", "text_offset"}``.

The engine's are the model's own distribution at each position (a log-softmax of its
logits, before temperature, penalties and grammars), which is what OpenAI reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine import TokenLogprob


def _entry(token: str, logprob: float, raw: bytes) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(raw)}


def chat_logprobs(tokens: Sequence[TokenLogprob]) -> dict[str, Any]:
    content = [
        {
            **_entry(t.token, t.logprob, t.bytes),
            "top_logprobs": [_entry(a.token, a.logprob, a.bytes) for a in t.top],
        }
        for t in tokens
    ]
    return {"content": content, "refusal": None}


def completion_logprobs(tokens: Sequence[TokenLogprob], with_top: bool, offset: int = 0) -> dict[str, Any]:
    """``offset``: where the first token starts in the text so far (streams continue it)."""
    offsets = []
    for t in tokens:
        offsets.append(offset)
        offset += len(t.token)
    return {
        "tokens": [t.token for t in tokens],
        "token_logprobs": [t.logprob for t in tokens],
        "top_logprobs": [{a.token: a.logprob for a in t.top} for t in tokens] if with_top else None,
        "text_offset": offsets,
    }
