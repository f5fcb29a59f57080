"""The default chat model answers a first "Hello" sensibly (issue 15's first complaint)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.chat import ChatMessage
from engine.loaded_model import Engine
from engine.requests.completion import StopReason
from engine.requests.request import ChatRequest
from engine.sampling.params import GREEDY
from tests.conftest import plan_for

pytestmark = pytest.mark.qwen


def test_a_first_hello_gets_a_short_sensible_answer(qwen_path: Path) -> None:
    model = Engine.load(plan_for(qwen_path, ctx=2048, parallel=1)).wait_ready(300)
    try:
        request = ChatRequest(
            messages=(ChatMessage("user", "Hello! Who are you? Answer in one sentence."),),
            sampling=GREEDY,
            max_tokens=96,
        )
        completion = model.submit(request).wait(300)
    finally:
        model.unload()
    text = completion.text
    assert completion.stop_reason is StopReason.STOP_TOKEN, text  # it ends its turn by itself
    assert "Qwen" in text or "assistant" in text.lower(), text
    assert "<|im" not in text and "user" not in text.lower().split(), text
