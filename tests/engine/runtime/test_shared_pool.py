"""A KV pool the conversations share (LoadRequest.kv_pool → llama.cpp's kv_unified), on a
tiny model: the plan, admission by cells, eviction of cached prefixes before refusal, and a
conversation that outgrows the pool failing alone (engine/runtime/shared_cells.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.loaded_model import Engine
from engine.planner import InvalidLoadRequest
from engine.requests.completion import StopReason
from engine.requests.request import ChatRequest
from engine.runtime.shared_cells import PoolOutgrown
from engine.sampling.params import GREEDY
from tests.conftest import plan_for

TIMEOUT = 120


def prompt(word: str, n: int) -> ChatRequest:
    return ChatRequest(prompt=" ".join([word] * n), sampling=GREEDY, max_tokens=8, ignore_eos=True)


def test_the_plan_shares_one_pool_and_says_so(tiny_model: Path) -> None:
    plan = plan_for(tiny_model, ctx=2048, parallel=8, kv_pool=2048)
    p = plan.params
    assert (p.kv_unified, p.n_ctx, p.n_seq_max, p.n_ctx_seq) == (True, 2048, 8, 2048)
    own_plan = plan_for(tiny_model, ctx=2048, parallel=8)
    own = own_plan.params
    assert (own.kv_unified, own.n_ctx, own.n_ctx_seq) == (False, 8 * 2048, 2048)
    # Eight conversations of up to 2,048 tokens in the KV memory of 2,048 cells, not 8 x.
    assert 8 * plan.memory[0].kv_cache == own_plan.memory[0].kv_cache
    assert any("one pool of 2,048 tokens" in r and "8 conversations share" in r for r in plan.reasons)


def test_the_longest_conversation_is_limited_to_the_pool(tiny_model: Path) -> None:
    plan = plan_for(tiny_model, ctx=4096, parallel=4, kv_pool=1024)
    assert plan.params.n_ctx == 1024 and plan.params.n_ctx_seq == 1024
    assert any("Longest conversation limited to 1,024 tokens" in r for r in plan.reasons)
    with pytest.raises(InvalidLoadRequest, match="Memory for conversations must be at least 256"):
        plan_for(tiny_model, ctx=512, parallel=2, kv_pool=100)


def test_cached_prefixes_are_evicted_for_a_new_prompt(tiny_model: Path) -> None:
    model = Engine.load(plan_for(tiny_model, ctx=512, parallel=4, kv_pool=512)).wait_ready(TIMEOUT)
    try:
        stats = model.stats()
        assert stats.shared_pool and stats.n_ctx == 512 and stats.n_ctx_per_sequence == 512
        first = model.submit(prompt("a", 300)).wait(TIMEOUT)
        assert model.stats().cells_used >= first.usage.prompt_tokens  # its prefix stays cached
        second = model.submit(prompt("b", 300)).wait(TIMEOUT)
        assert second.stop_reason is StopReason.LENGTH
        stats = model.stats()
        assert stats.evicted_prefixes == 1
        assert stats.cells_used <= 512
    finally:
        model.unload()


def test_a_prompt_waits_for_cells_instead_of_overfilling_the_pool(tiny_model: Path) -> None:
    model = Engine.load(plan_for(tiny_model, ctx=512, parallel=4, kv_pool=512)).wait_ready(TIMEOUT)
    try:
        handles = [model.submit(prompt(word, 300)) for word in ("c", "d", "e")]
        completions = [h.wait(TIMEOUT) for h in handles]  # none fails: each waited its turn
        assert all(c.stop_reason is StopReason.LENGTH for c in completions)
        assert all(c.usage.completion_tokens == 8 for c in completions)
    finally:
        model.unload()


def test_a_conversation_outgrowing_the_pool_fails_alone(tiny_model: Path) -> None:
    model = Engine.load(plan_for(tiny_model, ctx=512, parallel=2, kv_pool=512)).wait_ready(TIMEOUT)
    try:
        def ask(word: str, n: int) -> ChatRequest:
            return ChatRequest(prompt=" ".join([word] * n), sampling=GREEDY, max_tokens=340, ignore_eos=True)

        long_ask, short_ask = ask("f", 150), ask("g", 100)
        # Together they need 150 + 100 + 2 x 340 cells of 512: both cannot finish.
        handles = [model.submit(long_ask), model.submit(short_ask)]
        outcomes = []
        for handle in handles:
            try:
                outcomes.append(handle.wait(TIMEOUT))
            except PoolOutgrown as exc:
                outcomes.append(exc)
        failed = [o for o in outcomes if isinstance(o, PoolOutgrown)]
        assert len(failed) == 1
        assert isinstance(outcomes[0], PoolOutgrown), "the larger holder makes way"
        assert "\n" not in failed[0].message and "512 tokens" in failed[0].message
        survivor = outcomes[1]
        assert not isinstance(survivor, PoolOutgrown)
        assert survivor.usage.completion_tokens == 340
        # The model goes on serving.
        assert model.submit(prompt("h", 20)).wait(TIMEOUT).usage.completion_tokens == 8
    finally:
        model.unload()
