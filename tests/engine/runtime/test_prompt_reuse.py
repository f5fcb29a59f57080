"""The prompt measured for the composer is reused at admission when nothing changed
(engine/runtime/prompt_builder.py): the conversation is rendered and tokenized once, and a
request that differs in anything its prompt depends on is built again."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import engine.runtime.prompt_builder as prompt_builder
from engine.chat import ChatMessage
from engine.loaded_model import Engine
from engine.requests.request import ChatRequest
from engine.sampling.params import GREEDY
from tests.conftest import plan_for

TIMEOUT = 60


def test_a_measured_prompt_is_not_built_again_at_admission(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    renders: list[int] = []
    real = prompt_builder.tokenize_conversation

    def counting(*args, **kwargs):  # on the executor thread: render + tokenize of one prompt
        renders.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(prompt_builder, "tokenize_conversation", counting)
    model = Engine.load(plan_for(tiny_model, ctx=512, parallel=1)).wait_ready(TIMEOUT)
    try:
        draft = ChatRequest(messages=(ChatMessage("user", "hello there"),), sampling=GREEDY, max_tokens=3)
        size = model.measure_prompt(draft).result(TIMEOUT)
        assert len(renders) == 1
        # Sent as the window sends it: a new request (its own id) with the same conversation.
        sent = ChatRequest(messages=draft.messages, sampling=GREEDY, max_tokens=3)
        completion = model.submit(sent).wait(TIMEOUT)
        assert len(renders) == 1, "the measured prompt was rendered again at admission"
        assert completion.usage.prompt_tokens == size.tokens

        changed = replace(sent, messages=(ChatMessage("user", "hello there!"),))
        model.submit(changed).wait(TIMEOUT)
        assert len(renders) == 2
        for other in (
            replace(changed, assistant_prefix="Well"),
            replace(changed, stop=("x",)),
            replace(changed, tools=({"type": "function", "function": {"name": "f"}},)),
        ):
            model.measure_prompt(other).result(TIMEOUT)
        assert len(renders) == 5  # each differs in what its prompt depends on
    finally:
        model.unload()
