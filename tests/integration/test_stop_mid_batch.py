"""Stop does not wait for the batch: a cancel aborts the running llama_decode (Gemma 3 270M,
a prompt of several 512-token batches, one thread so each batch takes a while), and what
the batch was computing for others is done again, with the same result."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from engine.chat import ChatMessage
from engine.loaded_model import Engine, LoadedModel
from engine.requests.completion import StopReason
from engine.requests.events import Completed, Prefill
from engine.requests.request import ChatRequest
from engine.sampling.params import GREEDY
from tests.conftest import plan_for

TIMEOUT = 300
LONG = "The quick brown fox jumps over the lazy dog. " * 250  # ~2,500 tokens: five batches


def ask(text: str, tokens: int = 16) -> ChatRequest:
    return ChatRequest(messages=(ChatMessage("user", text),), sampling=GREEDY, max_tokens=tokens, cache=False)


@pytest.fixture(scope="module")
def gemma(gemma_path: Path):
    model = Engine.load(plan_for(gemma_path, ctx=4096, parallel=2, threads=1)).wait_ready(TIMEOUT)
    yield model
    model.unload()


def test_stop_in_the_middle_of_a_prompt_batch_is_immediate(
    gemma: LoadedModel, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="hearth.llama")
    reference = gemma.submit(ask("Name three colours.")).wait(TIMEOUT).text
    handle = gemma.submit(ask(LONG))
    started = batch_s = stop_s = None
    cancelled = 0.0
    for event in handle.events(timeout=TIMEOUT):
        if isinstance(event, Prefill) and event.completed == 0:
            started = time.perf_counter()
        elif isinstance(event, Prefill) and batch_s is None and 0 < event.completed < event.total:
            assert started is not None and event.completed <= 512  # exactly one batch so far
            batch_s = time.perf_counter() - started  # one batch, as long as the next one
            time.sleep(batch_s / 4)  # well inside the next batch
            cancelled = time.perf_counter()
            handle.cancel()
        elif isinstance(event, Completed):
            stop_s = time.perf_counter() - cancelled
            assert event.completion.stop_reason is StopReason.CANCELLED
    assert batch_s is not None and stop_s is not None
    # Waiting for the batch would take the three quarters of it that were left.
    assert stop_s < batch_s / 3, (stop_s, batch_s)
    # The cache was left as it was: the same question gets the same answer.
    assert gemma.submit(ask("Name three colours.")).wait(TIMEOUT).text == reference
    assert gemma.stats().active_requests == 0
    # A Stop is not an error: nothing of llama.cpp's "failed to decode" reaches the log.
    said = [r.getMessage() for r in caplog.records if r.name == "hearth.llama"]
    assert not [t for t in said if "fail" in t or "removing memory" in t], said


def test_a_batch_aborted_for_one_request_is_redone_for_the_others(gemma: LoadedModel) -> None:
    other_prompt = "Say something about foxes. " + LONG
    reference = gemma.submit(ask(other_prompt)).wait(TIMEOUT).text
    other = gemma.submit(ask(other_prompt))
    victim = gemma.submit(ask(LONG))
    for event in victim.events(timeout=TIMEOUT):
        if isinstance(event, Prefill) and 0 < event.completed < event.total:
            time.sleep(0.2)  # inside a batch both prompts share
            victim.cancel()
        elif isinstance(event, Completed):
            assert event.completion.stop_reason is StopReason.CANCELLED
    done = other.wait(TIMEOUT)
    assert done.stop_reason is StopReason.LENGTH and done.text == reference
