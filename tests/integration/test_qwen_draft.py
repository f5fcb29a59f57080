"""The real speculative pair (issue 30): Qwen2.5-Coder 1.5B Instruct drafted by 0.5B Instruct,
both from their registry chunk packages. Greedy output is the same with and without the draft,
the draft is paired with its target by vocabulary, and it actually drafts and gets accepted."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import GREEDY, ChatMessage, ChatRequest, Engine
from engine.catalog import inspect_model
from engine.speculation.policy import SpeculationConfig, SpeculationMode
from tests.conftest import plan_for

TIMEOUT = 300
ASK = "Write a Python function that returns the n-th Fibonacci number, iteratively."


@pytest.mark.qwen
def test_the_draft_changes_nothing_of_a_greedy_reply(qwen_path: Path, qwen_draft_path: Path) -> None:
    draft = inspect_model(qwen_draft_path)
    assert draft.file_size == 491_400_064
    plan = plan_for(qwen_path, ctx=1024, parallel=1, draft=draft, max_draft=4)
    # Always draft (not the adaptive policy): this test is about what verification keeps.
    speculation = SpeculationConfig(
        SpeculationMode.DRAFT_MODEL, draft_path=qwen_draft_path, max_draft=4, min_draft=1, adaptive=False
    )
    model = Engine.load(plan, speculation=speculation).wait_ready(TIMEOUT)
    try:

        def reply(speculate: bool):
            request = ChatRequest(
                messages=(ChatMessage("user", ASK),), sampling=GREEDY, max_tokens=48,
                cache=False, speculate=speculate,
            )  # fmt: skip
            return model.submit(request).wait(TIMEOUT)

        plain, drafted = reply(False), reply(True)
    finally:
        model.unload()
    assert plain.drafted == 0 and drafted.drafted > 0 and drafted.accepted > 0
    rate = drafted.accepted / drafted.drafted
    print(f"drafted {drafted.drafted}, accepted {drafted.accepted} ({rate:.0%})")
    assert drafted.text == plain.text


@pytest.mark.qwen
def test_the_adaptive_policy_times_the_draft_rather_than_counting_its_parameters(
    qwen_path: Path, qwen_draft_path: Path
) -> None:
    """The draft's cost per token is timed at warm-up: Qwen2.5-Coder 0.5B's vocabulary-wide
    output layer makes it cost more than its share of parameters says. Where no draft length
    could pay with that cost, the draft is let go right after (and the note says so)."""
    from engine.devtools.benchmark import on_fresh_thread
    from engine.runtime.loader import LoadHooks, ModelLoader
    from engine.speculation.policy import BEST_DRAFT_ACCEPTANCE

    draft = inspect_model(qwen_draft_path)
    plan = plan_for(qwen_path, ctx=1024, parallel=1, draft=draft, max_draft=4)
    speculation = SpeculationConfig(SpeculationMode.DRAFT_MODEL, draft_path=qwen_draft_path, max_draft=4)
    quiet = LoadHooks(lambda _p: None, lambda _p, _f: None, lambda _p, _s: None, lambda: False)

    def load_and_read() -> float:
        native = ModelLoader(plan, speculation, quiet, model_identity="test").load()
        try:
            costs = native.draft_costs
            assert costs is not None
            pays = costs.pays_at(BEST_DRAFT_ACCEPTANCE, speculation.max_draft, speculation.min_draft)
            assert (native.draft is not None) == pays
            assert (native.draft_note == "") == pays
            return costs.draft_cost
        finally:
            native.free()

    cost = on_fresh_thread(load_and_read)
    by_parameters = draft.parameter_count / plan.model.parameter_count
    assert cost > 0.0 and cost != pytest.approx(by_parameters, rel=1e-6)
    print(f"draft cost {cost:.2f} of a target decode (by parameters {by_parameters:.2f})")
