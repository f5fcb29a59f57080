"""Grammars, log-probabilities, penalties and tools in the running engine (tiny models).

Scripted models say exactly their script, so a grammar's effect is exact: where the grammar
agrees the output is unchanged and the vocabulary is never filtered; where it disagrees,
the filtered greedy choice is the lowest-id allowed token (all others tie). Grammar
requests share batches with plain ones, and speculative drafts are cut where the grammar
rejects them, with the same output.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import engine.runtime.active_request as active_request_module
import engine.runtime.token_sampler as token_sampler_module
from engine.base.errors import InvalidChatRequest
from engine.chat import (
    ChatMessage,
    ChatTraits,
    ContentDelta,
    ToolCallArgs,
    ToolCallBegin,
    ToolCallFormat,
    ToolCallParser,
    tool_choice_grammar,
)
from engine.devtools.tiny_models import TinyTextSpec, write_tiny_text_model
from engine.loaded_model import Engine, LoadedModel
from engine.requests.completion import StopReason
from engine.requests.events import Completed, Failed, TextDelta
from engine.requests.request import ChatRequest
from engine.runtime.token_sampler import GrammarStuck, SamplerHost
from engine.sampling.grammar import Grammar, grammar_from_json_schema
from engine.sampling.params import GREEDY, SamplingParams
from engine.speculation.policy import SpeculationConfig, SpeculationMode
from tests.conftest import plan_for
from tests.engine.chat.test_chat import vocab_only

TIMEOUT = 60
ABCD = ("a", "b", "c", "d")
LOOKUP = SpeculationConfig(SpeculationMode.PROMPT_LOOKUP, max_draft=6, min_draft=1, adaptive=False)


def load(path: Path, speculation: SpeculationConfig | None = None, parallel: int = 4) -> LoadedModel:
    request: dict[str, object] = {"max_draft": speculation.max_draft} if speculation else {}
    plan = plan_for(path, ctx=1024, parallel=parallel, **request)
    return Engine.load(plan, speculation=speculation).wait_ready(TIMEOUT)


def raw(prompt: str = "hello", grammar: Grammar | None = None, **kwargs: Any) -> ChatRequest:
    sampling = kwargs.pop("sampling", GREEDY)
    if grammar is not None:
        sampling = SamplingParams(**{**sampling.__dict__, "grammar": grammar})
    return ChatRequest(
        prompt=prompt, sampling=sampling, cache=False, max_tokens=kwargs.pop("max_tokens", 32), **kwargs
    )


@pytest.fixture(scope="module")
def abcd_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Says "abcd", then ends (EOS)."""
    return write_tiny_text_model(tmp_path_factory.mktemp("g") / "abcd.gguf", TinyTextSpec(script=ABCD))


@pytest.fixture(scope="module")
def abcd(abcd_model: Path) -> Iterator[LoadedModel]:
    model = load(abcd_model)
    yield model
    model.unload()


@pytest.fixture()
def filtered(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How often each finished request's grammar rejected the chain's token (in the order
    the requests ended)."""
    seen: list[int] = []
    original = token_sampler_module.TokenSampler.free

    def free(self: token_sampler_module.TokenSampler) -> None:
        if self.chain is not None:
            seen.append(self.filtered)
        original(self)

    monkeypatch.setattr(token_sampler_module.TokenSampler, "free", free)
    return seen


def batches(model: LoadedModel) -> list[set[int]]:
    """The sequences of every decode from now on."""
    executor = model._executor
    seen: list[set[int]] = []
    original = executor._decode

    def decode(batch: Any) -> int:
        seen.append({int(s) for s in batch.seq_id[: batch.n_tokens]})
        return original(batch)

    executor._decode = decode  # type: ignore[method-assign]
    return seen


# --------------------------------------------------------------------------- exact grammars


def test_a_grammar_that_agrees_changes_nothing_and_filters_nothing(
    abcd: LoadedModel, filtered: list[int]
) -> None:
    plain = abcd.submit(raw()).wait(TIMEOUT)
    constrained = abcd.submit(raw(grammar=Grammar('root ::= "abcd"'))).wait(TIMEOUT)
    assert plain.text == constrained.text == "abcd"
    assert plain.tokens == constrained.tokens
    assert constrained.stop_reason is StopReason.STOP_TOKEN
    assert filtered == [0, 0]  # the chain's token was checked, the vocabulary never filtered


def test_a_grammar_that_disagrees_forces_its_text(abcd: LoadedModel, filtered: list[int]) -> None:
    completion = abcd.submit(raw(grammar=Grammar('root ::= "ab" "x" "cd"'))).wait(TIMEOUT)
    assert completion.text == "abxcd"
    assert completion.stop_reason is StopReason.STOP_TOKEN  # end-of-generation once complete
    # filtered at "x", at "c" and "d" (after a byte token the model says "a" again), at the end
    assert filtered == [4]


def test_grammar_and_plain_requests_decode_in_the_same_batches(
    abcd: LoadedModel, filtered: list[int]
) -> None:
    seen = batches(abcd)
    requests = [
        raw(),
        raw(grammar=Grammar('root ::= "ab" "x" "cd"')),
        raw(grammar=Grammar('root ::= "abcd"')),
        raw(grammar=Grammar('root ::= [a-z] "q"')),
    ]
    handles = [abcd.submit(r) for r in requests]
    texts = [h.wait(TIMEOUT).text for h in handles]
    assert texts == ["abcd", "abxcd", "abcd", "aq"]
    assert max(len(s) for s in seen) == 4  # all four in one llama_decode
    assert sorted(filtered) == [0, 0, 2, 4]


def test_a_lazy_grammar_starts_after_its_trigger(tmp_path: Path) -> None:
    model = load(write_tiny_text_model(tmp_path / "xy.gguf", TinyTextSpec(script=("x", "y", *ABCD))))
    try:
        lazy = Grammar('root ::= "ab" "q"', lazy_triggers=("xy",))  # the trigger spans two tokens
        assert model.submit(raw(grammar=lazy)).wait(TIMEOUT).text == "xyabq"
        eager = Grammar('root ::= "ab" "q"')
        assert model.submit(raw(grammar=eager)).wait(TIMEOUT).text == "abq"
        never = Grammar('root ::= "q"', lazy_triggers=("zz",))
        assert model.submit(raw(grammar=never)).wait(TIMEOUT).text == "xyabcd"
    finally:
        model.unload()


def test_text_after_the_trigger_in_the_same_token_is_the_grammars(tmp_path: Path) -> None:
    model = load(write_tiny_text_model(tmp_path / "bca.gguf", TinyTextSpec(script=("b", "ca", "d"))))
    try:
        agrees = Grammar('root ::= "a" "d"', lazy_triggers=("bc",))  # "ca" completes "bc", then "a"
        assert model.submit(raw(grammar=agrees)).wait(TIMEOUT).text == "bcad"
        events = list(
            model.submit(raw(grammar=Grammar('root ::= "q"', lazy_triggers=("bc",)))).events(TIMEOUT)
        )
        assert isinstance(events[-1], Failed) and isinstance(events[-1].error, GrammarStuck)
    finally:
        model.unload()


def test_a_grammar_with_no_way_on_fails_its_request_only(abcd: LoadedModel) -> None:
    stuck = abcd.submit(raw(grammar=Grammar('root ::= "a" "\\x00"')))  # no token is a NUL
    plain = abcd.submit(raw())
    with pytest.raises(GrammarStuck, match="allows no token"):
        stuck.wait(TIMEOUT)
    assert plain.wait(TIMEOUT).text == "abcd"
    assert abcd.submit(raw(grammar=Grammar('root ::= "abcd"'))).wait(TIMEOUT).text == "abcd"


def test_a_grammar_llama_cpp_cannot_parse_is_refused_at_admission(abcd: LoadedModel) -> None:
    handle = abcd.submit(raw(grammar=Grammar("root ::= <notonetoken>")))  # valid GBNF, not one token
    with pytest.raises(InvalidChatRequest, match="could not parse the grammar"):
        handle.wait(TIMEOUT)
    with pytest.raises(InvalidChatRequest, match="is used but never defined"):
        abcd.submit(raw(grammar=Grammar("root ::= x")))  # refused before queueing
    assert abcd.stats().active_requests == 0


# --------------------------------------------------------------------------- speculation


@pytest.fixture(scope="module")
def abcd_loop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Says "abcd" over and over."""
    path = tmp_path_factory.mktemp("g") / "loop.gguf"
    return write_tiny_text_model(path, TinyTextSpec(script=ABCD, script_loops=True))


def test_drafts_the_grammar_rejects_are_cut_and_the_output_is_the_same(
    abcd_loop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    grammar = Grammar('root ::= "abcdabcdab" "x" [a-d]* "y"?')
    model = load(abcd_loop, LOOKUP)
    try:
        plain = model.submit(raw(grammar=grammar, max_tokens=40, speculate=False)).wait(TIMEOUT)
        cut = model.submit(raw(grammar=grammar, max_tokens=40)).wait(TIMEOUT)
        monkeypatch.setattr(
            token_sampler_module.TokenSampler, "cut_drafts", lambda self, drafts: tuple(drafts)
        )
        uncut = model.submit(raw(grammar=grammar, max_tokens=40)).wait(TIMEOUT)
        free = model.submit(raw(max_tokens=40)).wait(TIMEOUT)
    finally:
        model.unload()
    assert plain.text.startswith("abcdabcdabxabcd") and len(plain.tokens) == 40
    assert cut.tokens == plain.tokens == uncut.tokens  # verified with the request's own sampler
    assert cut.drafted > 0 and cut.accepted > 0
    assert uncut.drafted - uncut.accepted > cut.drafted - cut.accepted  # rejected drafts were decoded
    assert free.text.startswith("abcdabcdabcd")


def test_cut_drafts_stops_at_the_first_token_the_grammar_rejects(abcd_model: Path) -> None:
    import llama_cpp as ll

    from engine.chat import token_to_piece, tokenize

    with vocab_only(abcd_model) as model:
        vocab = ll.llama_model_get_vocab(model)
        host = SamplerHost(
            ll,
            None,
            vocab,
            ll.llama_vocab_n_tokens(vocab),
            lambda t: token_to_piece(vocab, t, False),
            lambda b: tokenize(vocab, b, add_special=False, parse_special=False),
        )

        def ids(text: str) -> tuple[int, ...]:
            return tuple(host.spell(text.encode()))  # "a", not SentencePiece's " a"

        sampler = host.sampler(SamplingParams(grammar=Grammar('root ::= "abc" [x]+')))
        try:
            a, b, c, x = (ids(t)[0] for t in ("a", "b", "c", "x"))
            assert sampler.cut_drafts((a, b, c, x, x)) == (a, b, c, x, x)
            assert sampler.cut_drafts((a, b, a, c)) == (a, b)
            assert sampler.cut_drafts((b,)) == ()
            assert sampler.cut_drafts((a, b, c, 2)) == (a, b, c)  # EOS before the grammar is complete
            assert sampler.cut_drafts(()) == ()
            assert sampler.allows(a) and not sampler.allows(b)  # the grammar itself did not move
        finally:
            sampler.free()

        lazy = host.sampler(SamplingParams(grammar=Grammar('root ::= "{}"', lazy_triggers=("</think>",))))
        try:
            assert lazy.cut_drafts((ids("x")[0],)) == (ids("x")[0],)  # not started: nothing to check
            lazy.observe_text("thinking </think>  \n")  # whitespace after the trigger is skipped
            assert lazy.grammar_active and lazy.allows(ids("{")[0]) and not lazy.allows(ids("x")[0])
        finally:
            lazy.free()
        started = host.sampler(SamplingParams(grammar=Grammar('root ::= "{}"', lazy_triggers=("</think>",))))
        try:
            started.observe_text("</think>{")
            assert started.allows(ids("}")[0]) and not started.allows(ids("{")[0])
            with pytest.raises(GrammarStuck):
                host.sampler(
                    SamplingParams(grammar=Grammar('root ::= "{}"', lazy_triggers=("!",)))
                ).observe_text("!x")
        finally:
            started.free()


# --------------------------------------------------------------------------- log-probabilities


def reference_logits(path: Path, prompt: str) -> np.ndarray:
    """The model's logits after ``prompt``, computed here with llama.cpp directly."""
    import llama_cpp as ll

    from engine.chat import tokenize
    from engine.native.backend import require_backend

    require_backend()
    params = ll.llama_model_default_params()
    params.n_gpu_layers = 0
    model = ll.llama_model_load_from_file(str(path).encode(), params)
    ctx_params = ll.llama_context_default_params()
    ctx_params.n_ctx = 256
    ctx = ll.llama_init_from_model(model, ctx_params)
    try:
        vocab = ll.llama_model_get_vocab(model)
        tokens = tokenize(vocab, prompt, add_special=True, parse_special=True)
        array = (ll.llama_token * len(tokens))(*tokens)
        assert ll.llama_decode(ctx, ll.llama_batch_get_one(array, len(tokens))) == 0
        n_vocab = ll.llama_vocab_n_tokens(vocab)
        return np.ctypeslib.as_array(ll.llama_get_logits_ith(ctx, -1), shape=(n_vocab,)).astype(np.float64)
    finally:
        ll.llama_free(ctx)
        ll.llama_model_free(model)


def test_logprobs_are_the_models_log_softmax(tiny_model: Path) -> None:
    logits = reference_logits(tiny_model, "hello world")
    expected = logits - (logits.max() + math.log(np.exp(logits - logits.max()).sum()))
    model = load(tiny_model)
    try:
        greedy = model.submit(
            raw("hello world", sampling=SamplingParams(**{**GREEDY.__dict__, "logprobs": 5}))
        )
        hot = SamplingParams(temperature=1.5, top_k=3, seed=11, presence_penalty=1.0, logprobs=5)
        sampled = model.submit(raw("hello world", sampling=hot))
        first, other = greedy.wait(TIMEOUT), sampled.wait(TIMEOUT)
    finally:
        model.unload()
    lp = first.logprobs[0]
    token = first.tokens[0]
    assert token == int(np.argmax(logits))
    assert lp.logprob == pytest.approx(expected[token], abs=1e-4)
    best = np.argsort(-expected)[:5]
    assert [t.logprob for t in lp.top] == pytest.approx(list(expected[best]), abs=1e-4)
    assert lp.top[0].bytes == lp.bytes and lp.token == lp.bytes.decode("utf-8", errors="replace")
    # the model's own distribution: temperature, top-k and penalties do not change it
    assert [t.logprob for t in other.logprobs[0].top] == pytest.approx([t.logprob for t in lp.top], abs=1e-5)
    assert other.logprobs[0].logprob == pytest.approx(expected[other.tokens[0]], abs=1e-4)


def test_logprobs_travel_with_the_deltas_one_per_token(
    abcd: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(active_request_module, "DELTA_INTERVAL", 0.0)
    sampling = SamplingParams(**{**GREEDY.__dict__, "logprobs": 2})
    for stop in ((), ("cd",)):
        events = list(abcd.submit(raw(sampling=sampling, stop=stop)).events(TIMEOUT))
        completion = events[-1].completion  # type: ignore[union-attr]
        deltas = [e for e in events if isinstance(e, TextDelta)]
        assert [lp for d in deltas for lp in d.logprobs] == list(completion.logprobs)
        assert len(completion.logprobs) == len(completion.tokens)
        assert "".join(d.text for d in deltas) == completion.text == ("abcd" if not stop else "ab")
        assert [lp.token for lp in completion.logprobs] == list("abcd"[: len(completion.tokens)])
        for lp in completion.logprobs:  # the script's token is nearly certain, two others tie
            assert lp.logprob == pytest.approx(0.0, abs=1e-6)
            assert lp.top[0].token == lp.token and len(lp.top) == 2
            assert lp.top[1].logprob < -50
    plain = abcd.submit(raw()).wait(TIMEOUT)
    assert plain.logprobs == () and all(not d.logprobs for d in [TextDelta("x")])


def test_the_text_delta_signal_carries_the_logprobs(abcd: LoadedModel) -> None:
    from PySide6.QtCore import Qt

    received: list[TextDelta] = []
    sampling = SamplingParams(**{**GREEDY.__dict__, "logprobs": 1})
    handle = abcd.submit(
        raw(sampling=sampling),
        connect=lambda h: h.text_delta.connect(received.append, Qt.ConnectionType.DirectConnection),
    )
    completion = handle.wait(TIMEOUT)
    assert [lp for delta in received for lp in delta.logprobs] == list(completion.logprobs)
    assert "".join(delta.text for delta in received) == "abcd"


def test_zero_top_logprobs_is_just_the_tokens_own(abcd: LoadedModel) -> None:
    completion = abcd.submit(raw(sampling=SamplingParams(**{**GREEDY.__dict__, "logprobs": 0}))).wait(TIMEOUT)
    assert [lp.top for lp in completion.logprobs] == [()] * 4


# --------------------------------------------------------------------------- penalties


def test_frequency_and_presence_penalties_reach_llama_cpp(tiny_model: Path) -> None:
    model = load(tiny_model)
    try:
        prompts = ["once upon a time", "the quick brown fox"]
        plain = [model.submit(raw(p, max_tokens=48)).wait(TIMEOUT).tokens for p in prompts]
        penalized = []
        for p in prompts:
            sampling = SamplingParams(
                **{**GREEDY.__dict__, "frequency_penalty": 2.0, "presence_penalty": 2.0}
            )
            penalized.append(model.submit(raw(p, max_tokens=48, sampling=sampling)).wait(TIMEOUT).tokens)
        again = model.submit(raw(prompts[0], max_tokens=48, sampling=sampling)).wait(TIMEOUT).tokens
    finally:
        model.unload()
    assert penalized != plain
    assert again == penalized[0]  # still deterministic
    assert sum(len(set(t)) for t in penalized) > sum(len(set(t)) for t in plain)  # fewer repeats


# --------------------------------------------------------------------------- structure on a random model

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "pattern": "^[a-z]{1,12}$"},
                "days": {"enum": [1, 2, 3]},
            },
            "required": ["city", "days"],
        },
    },
}


def test_forced_outputs_parse_on_a_random_model_beside_plain_requests(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(active_request_module, "DELTA_INTERVAL", 0.0)
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}},
        "required": ["n", "ok"],
    }
    tool_grammar = tool_choice_grammar(ToolCallFormat.HERMES, (WEATHER,), "required", parallel=False)
    assert tool_grammar is not None
    model = load(tiny_model)
    try:
        alone = [model.submit(raw(p, max_tokens=24)).wait(TIMEOUT).tokens for p in ("one", "two")]
        seen = batches(model)
        handles = [
            model.submit(raw("one", max_tokens=24)),
            model.submit(raw("json please", grammar=grammar_from_json_schema(schema), max_tokens=200)),
            model.submit(raw("call a tool", grammar=tool_grammar, max_tokens=200)),
            model.submit(raw("two", max_tokens=24)),
        ]
        events = [list(h.events(TIMEOUT)) for h in handles]
    finally:
        model.unload()
    completions = [e[-1].completion for e in events if isinstance(e[-1], Completed)]
    assert len(completions) == 4
    assert [completions[0].tokens, completions[3].tokens] == alone  # the grammars changed nobody else
    assert max(len(s) for s in seen) == 4
    data = json.loads(completions[1].text)
    assert set(data) == {"n", "ok"} and isinstance(data["n"], int) and isinstance(data["ok"], bool)
    assert completions[1].stop_reason is StopReason.STOP_TOKEN
    parser = ToolCallParser(ToolCallFormat.HERMES, make_id=lambda: "call_1")
    parsed = [
        event for delta in events[2] if isinstance(delta, TextDelta) for event in parser.feed(delta.text)
    ]
    parsed += parser.finish()
    assert [e for e in parsed if isinstance(e, ContentDelta)] == []
    assert [e for e in parsed if isinstance(e, ToolCallBegin)] == [ToolCallBegin(0, "call_1", "get_weather")]
    arguments = json.loads("".join(e.fragment for e in parsed if isinstance(e, ToolCallArgs)))
    assert (
        isinstance(arguments["city"], str) and len(arguments["city"]) <= 12 and arguments["days"] in (1, 2, 3)
    )


# --------------------------------------------------------------------------- markers, traits, tools


def test_marker_tokens_are_written_out_other_control_tokens_are_not(tmp_path: Path) -> None:
    spec = TinyTextSpec(
        script=("<think>", "a", "[X]", "</think>", "b"), control_tokens=("<think>", "</think>", "[X]")
    )
    model = load(write_tiny_text_model(tmp_path / "think.gguf", spec))
    try:
        completion = model.submit(raw()).wait(TIMEOUT)
        traits = model.chat_traits
    finally:
        model.unload()
    assert completion.text == "<think>a</think>b"
    assert ChatTraits().reasoning_splitter().feed(completion.text) == ("a", "b")
    assert traits == ChatTraits(
        ToolCallFormat.HERMES, opens_thinking=False, thinks=False, renders_tools=False
    )


def test_tools_reach_the_prompt_of_a_template_without_tool_support(abcd: LoadedModel) -> None:
    question = (ChatMessage("user", "Weather in Paris?"),)
    without = abcd.measure_prompt(ChatRequest(messages=question)).result(TIMEOUT)
    with_tools = abcd.measure_prompt(ChatRequest(messages=question, tools=(WEATHER,))).result(TIMEOUT)
    assert with_tools.tokens > without.tokens + 40  # the fallback system prompt lists the tool
    completion = abcd.submit(ChatRequest(messages=question, tools=(WEATHER,), sampling=GREEDY)).wait(TIMEOUT)
    assert completion.text == "abcd"
