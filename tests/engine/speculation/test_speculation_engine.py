"""Speculative decoding inside the shared batch: same greedy output, fewer decodes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.base.errors import EngineError
from engine.catalog import inspect_model
from engine.chat import ChatMessage
from engine.devtools.tiny_models import TinyTextSpec, write_tiny_text_model
from engine.loaded_model import Engine, LoadedModel
from engine.planner import LoadPhase
from engine.requests.completion import StopReason
from engine.requests.events import TextDelta
from engine.requests.request import ChatRequest
from engine.sampling.params import GREEDY, SamplingParams
from engine.speculation.policy import DraftCostModel, SpeculationConfig, SpeculationMode
from tests.conftest import plan_for

TIMEOUT = 60
LOOKUP = SpeculationConfig(SpeculationMode.PROMPT_LOOKUP, max_draft=6, min_draft=1, adaptive=False)
PROMPTS = [
    "alpha beta gamma alpha beta gamma alpha beta",
    "one two three four one two three four one two",
    "the cat sat on the mat and the cat sat on the",
]


def load(path: Path, speculation: SpeculationConfig | None = None, draft: Path | None = None) -> LoadedModel:
    if draft and speculation is None:
        speculation = SpeculationConfig(SpeculationMode.DRAFT_MODEL, draft_path=draft, adaptive=False)
    request: dict[str, object] = {"draft": inspect_model(draft)} if draft else {}
    if speculation is not None and speculation.enabled:
        request["max_draft"] = speculation.max_draft
    plan = plan_for(path, ctx=1024, parallel=4, **request)
    return Engine.load(plan, speculation=speculation).wait_ready(TIMEOUT)


def greedy(prompt: str, max_tokens: int = 48, **kwargs: object) -> ChatRequest:
    return ChatRequest(prompt=prompt, sampling=GREEDY, max_tokens=max_tokens, cache=False, **kwargs)  # type: ignore[arg-type]


def outputs(model: LoadedModel, **kwargs: object) -> list[tuple[int, ...]]:
    handles = [model.submit(greedy(p, **kwargs)) for p in PROMPTS]
    return [h.wait(TIMEOUT).tokens for h in handles]


@pytest.fixture(scope="module")
def reference(tiny_model: Path) -> list[tuple[int, ...]]:
    model = load(tiny_model)
    try:
        return outputs(model)
    finally:
        model.unload()


def test_prompt_lookup_gives_identical_greedy_output(tiny_model: Path, reference) -> None:
    model = load(tiny_model, LOOKUP)
    try:
        assert outputs(model) == reference
        stats = model.stats()
        assert stats.drafted_tokens > 0
    finally:
        model.unload()


def test_draft_model_gives_identical_greedy_output(tiny_model: Path, reference) -> None:
    model = load(tiny_model, draft=tiny_model)  # its own draft: every draft is accepted
    try:
        assert LoadPhase.DRAFT in model.plan.phases
        assert outputs(model) == reference
        stats = model.stats()
        assert stats.drafted_tokens > 0
        assert stats.accepted_tokens == stats.drafted_tokens
    finally:
        model.unload()


def test_speculation_accepts_most_drafts_on_a_repetitive_model(looping_model: Path) -> None:
    model = load(looping_model, LOOKUP)
    try:
        completion = model.submit(greedy("go", max_tokens=120)).wait(TIMEOUT)
        assert completion.usage.completion_tokens == 120
        assert completion.accepted > 0.8 * completion.drafted > 0
        assert model.stats().ticks < 60  # far fewer decodes than tokens
    finally:
        model.unload()


def test_requests_with_and_without_speculation_share_a_batch(looping_model: Path) -> None:
    model = load(looping_model, LOOKUP)
    try:
        spec = model.submit(greedy("go", max_tokens=60))
        plain = model.submit(greedy("go", max_tokens=60, speculate=False))
        a, b = spec.wait(TIMEOUT), plain.wait(TIMEOUT)
        assert a.tokens == b.tokens
        assert a.drafted > 0 and b.drafted == 0
    finally:
        model.unload()


def test_max_tokens_inside_an_accepted_run_never_overshoots(looping_model: Path) -> None:
    model = load(
        looping_model,
        SpeculationConfig(SpeculationMode.PROMPT_LOOKUP, max_draft=8, min_draft=1, adaptive=False),
    )
    try:
        for limit in (13, 29, 41):
            completion = model.submit(greedy("go", max_tokens=limit)).wait(TIMEOUT)
            assert completion.usage.completion_tokens == limit
            assert completion.stop_reason is StopReason.LENGTH
    finally:
        model.unload()


def test_stop_string_inside_an_accepted_run(looping_model: Path) -> None:
    model = load(looping_model, LOOKUP)
    try:
        plain = model.submit(greedy("go", max_tokens=60, speculate=False)).wait(TIMEOUT)
        cut = plain.text.index("cd", 20)  # somewhere deep into a run of accepted drafts
        stopped = model.submit(greedy("go", max_tokens=60, stop=("cd",))).wait(TIMEOUT)
        assert stopped.stop_reason is StopReason.STOP_STRING
        assert stopped.text == plain.text[: plain.text.index("cd")]
        assert cut > 0
    finally:
        model.unload()


def test_cancel_in_the_middle_of_verified_runs(looping_model: Path) -> None:
    model = load(looping_model, LOOKUP)
    try:
        executor = model._executor
        original = executor._decode

        def slow(batch):
            time.sleep(0.01)
            return original(batch)

        executor._decode = slow  # type: ignore[method-assign]
        victim = model.submit(greedy("go", max_tokens=5000))
        other = model.submit(greedy("go", max_tokens=40))
        for event in victim.events(timeout=TIMEOUT):
            if isinstance(event, TextDelta):
                victim.cancel()
        assert victim.wait(TIMEOUT).stop_reason is StopReason.CANCELLED
        assert other.wait(TIMEOUT).usage.completion_tokens == 40
    finally:
        model.unload()


def test_sampled_requests_still_speculate_consistently(looping_model: Path) -> None:
    model = load(looping_model, LOOKUP)
    try:
        params = SamplingParams(temperature=0.7, seed=7)
        a = model.submit(ChatRequest(prompt="go", sampling=params, max_tokens=40, cache=False)).wait(TIMEOUT)
        b = model.submit(
            ChatRequest(prompt="go", sampling=params, max_tokens=40, cache=False, speculate=False)
        ).wait(TIMEOUT)
        assert a.usage.completion_tokens == b.usage.completion_tokens == 40
    finally:
        model.unload()


def test_incompatible_draft_is_refused_before_anything_native(
    qtbot, tmp_path: Path, tiny_model: Path
) -> None:
    other = write_tiny_text_model(tmp_path / "other-vocab.gguf", TinyTextSpec(n_extra_words=100))
    plan = plan_for(tiny_model, draft=inspect_model(other))
    model = Engine.load(plan, start=False)
    started: list[LoadPhase] = []
    model.phase_started.connect(started.append)
    with qtbot.waitSignal(model.load_failed, timeout=TIMEOUT * 1000) as failure:
        model.start()
    assert "vocabulary" in failure.args[0].message
    qtbot.wait(50)
    assert started == [LoadPhase.VALIDATE]  # the weights were never touched
    with pytest.raises(EngineError, match="vocabulary"):
        model.wait_ready(TIMEOUT)


def test_chat_messages_speculate_too(looping_model: Path) -> None:
    model = load(looping_model, LOOKUP)
    try:
        request = ChatRequest(messages=(ChatMessage("user", "hi"),), sampling=GREEDY, max_tokens=30)
        completion = model.submit(request).wait(TIMEOUT)
        assert completion.drafted > 0
    finally:
        model.unload()


# Row costs measured on Gemma 3 270M on a 2-core CPU (1 row 11 ms, 9 rows 57 ms) and a
# GPU-like machine where extra rows are almost free: fixed, so the tests do not depend on
# how fast this machine happens to be.
CPU_COSTS = DraftCostModel.measured({1: 11.3, 2: 23.1, 3: 27.7, 5: 44.9, 9: 57.1}, max_draft=8)
CHEAP_ROWS = DraftCostModel(tuple(1.0 + 0.05 * n for n in range(9)))


def test_adaptive_drafting_stops_when_drafts_do_not_pay(tiny_model: Path, reference) -> None:
    """Random text: lookup drafts are mostly wrong, so the adaptive policy backs off."""
    spec = SpeculationConfig(SpeculationMode.PROMPT_LOOKUP, max_draft=8, min_draft=1)
    model = load(tiny_model, spec)
    model._executor._speculator.costs = CPU_COSTS
    try:
        assert outputs(model) == reference
        stats = model.stats()
        assert stats.drafted_tokens <= 3 * 48, "drafting should back off on mispredictions"
    finally:
        model.unload()


def test_adaptive_drafting_keeps_going_when_drafts_are_accepted(looping_model: Path) -> None:
    model = load(looping_model, SpeculationConfig(SpeculationMode.PROMPT_LOOKUP, max_draft=8, min_draft=1))
    try:
        for costs in (CHEAP_ROWS, CPU_COSTS):
            model._executor._speculator.costs = costs
            completion = model.submit(greedy("go", max_tokens=200)).wait(TIMEOUT)
            assert completion.accepted > 100
    finally:
        model.unload()


def test_long_drafts_on_four_sequences_stay_inside_the_reserved_logit_rows(looping_model: Path) -> None:
    """n_outputs_max is 4 x (1 + 16) here; llama.cpp aborts on a batch asking for more, so
    every batch is checked before it reaches llama_decode, and drafts were really long."""
    spec = SpeculationConfig(SpeculationMode.PROMPT_LOOKUP, max_draft=16, min_draft=1, adaptive=False)
    model = load(looping_model, spec)
    try:
        executor = model._executor
        native = executor._native
        assert native is not None and native.n_outputs == 4 * 17
        assert executor.plan.params.n_outputs_max == 4 * 17
        original = executor._decode
        outputs: list[int] = []

        def counting(batch):
            outputs.append(batch.n_outputs)
            return original(batch)

        executor._decode = counting  # type: ignore[method-assign]
        handles = [model.submit(greedy("go", max_tokens=300)) for _ in range(4)]
        completions = [h.wait(TIMEOUT) for h in handles]
        assert all(c.usage.completion_tokens == 300 for c in completions)
        assert max(outputs) <= native.n_outputs
        assert max(outputs) > 4 * 4, "the drafts should have been long enough to test the bound"
    finally:
        model.unload()


def test_speculation_the_plan_did_not_reserve_is_refused(looping_model: Path) -> None:
    plan = plan_for(looping_model, ctx=1024, parallel=2)  # no draft rows reserved
    model = Engine.load(plan, speculation=LOOKUP)
    with pytest.raises(EngineError, match="Plan again with speculation"):
        model.wait_ready(TIMEOUT)


# A CPU where a draft model cannot pay: verifying 2 drafts costs 1.86x a decode, each draft
# 0.54x (Qwen2.5-Coder 1.5B with its 0.5B on 2 cores, benchmarks/results/draft_costs.json).
SLOW_PAIR = DraftCostModel.measured(
    {1: 1.0, 2: 1.56, 3: 1.86, 5: 2.32, 9: 3.54}, max_draft=8, draft_cost=0.54
)


def test_a_draft_model_that_cannot_pay_is_let_go_at_warm_up(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never slower with a draft than without: it neither prefills nor holds memory."""
    from engine.runtime.loader import ModelLoader

    monkeypatch.setattr(ModelLoader, "_measure_draft_costs", lambda self, token: SLOW_PAIR)
    spec = SpeculationConfig(SpeculationMode.DRAFT_MODEL, draft_path=tiny_model)
    model = load(tiny_model, spec, draft=tiny_model)
    try:
        stats = model.stats()
        assert stats.drafting_with == ""
        assert stats.draft_note.startswith(f"Not drafting with {tiny_model.name}: on this machine")
        assert "1.86x" in stats.draft_note and "0.54x" in stats.draft_note and "\n" not in stats.draft_note
        completion = model.submit(greedy(PROMPTS[0])).wait(TIMEOUT)
        assert completion.usage.completion_tokens == 48 or completion.stop_reason.value == "stop"
        assert model.stats().drafted_tokens == 0
    finally:
        model.unload()


def test_a_draft_model_that_can_pay_is_kept(tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.runtime.loader import ModelLoader

    monkeypatch.setattr(ModelLoader, "_measure_draft_costs", lambda self, token: CHEAP_ROWS)
    spec = SpeculationConfig(SpeculationMode.DRAFT_MODEL, draft_path=tiny_model)
    model = load(tiny_model, spec, draft=tiny_model)
    try:
        stats = model.stats()
        assert (stats.drafting_with, stats.draft_note) == (tiny_model.name, "")
    finally:
        model.unload()


def test_the_best_acceptance_decides_whether_a_pair_can_pay() -> None:
    assert not SLOW_PAIR.pays_at(0.9, limit=8)
    assert SLOW_PAIR.pays_at(1.0, limit=8)  # a perfect draft would pay even here
    assert CHEAP_ROWS.pays_at(0.9, limit=8)
