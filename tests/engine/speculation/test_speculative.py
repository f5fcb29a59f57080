"""engine.speculation.policy: prompt lookup, verification, the vocabulary check, the draft model."""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.base.errors import Cancelled, EngineError, InvalidModelFile
from engine.catalog import inspect_model, read_token_table
from engine.devtools import tiny_models
from engine.devtools.tiny_models import TinyTextSpec, write_tiny_text_model
from engine.planner import LlamaParams
from engine.speculation.draft_model import DraftModel, DraftRequest, IncompatibleDraft, check_draft_compatible
from engine.speculation.policy import (
    AcceptedRun,
    InvalidSpeculation,
    LookupIndex,
    PromptLookup,
    SpeculationConfig,
    SpeculationMode,
    accept_run,
    draft_limit,
    verify_rows,
)
from tests.conftest import plan_for

# --------------------------------------------------------------------------- configuration


def test_config_defaults_and_switch() -> None:
    config = SpeculationConfig()
    assert config.mode is SpeculationMode.OFF and not config.enabled
    assert (config.max_draft, config.min_draft, config.ngram_min, config.ngram_max) == (16, 2, 2, 4)
    lookup = SpeculationConfig(SpeculationMode.PROMPT_LOOKUP, ngram_min=2, ngram_max=3)
    assert lookup.enabled and lookup.prompt_lookup() == PromptLookup(2, 3)
    draft = SpeculationConfig(SpeculationMode.DRAFT_MODEL, "small.gguf")  # type: ignore[arg-type]
    assert draft.draft_path == Path("small.gguf")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.max_draft = 4  # type: ignore[misc]


@pytest.mark.parametrize(
    "options",
    [
        {"max_draft": 0},
        {"max_draft": 33},
        {"max_draft": 4, "min_draft": 5},
        {"min_draft": 0},
        {"ngram_min": 0},
        {"ngram_min": 3, "ngram_max": 2},
        {"ngram_max": 17},
        {"p_min": 1.0},
        {"p_min": -0.1},
        {"mode": SpeculationMode.DRAFT_MODEL},
        {"mode": SpeculationMode.PROMPT_LOOKUP, "draft_path": Path("x.gguf")},
    ],
)
def test_config_rejects(options: dict[str, Any]) -> None:
    with pytest.raises(InvalidSpeculation) as caught:
        SpeculationConfig(**options)
    assert isinstance(caught.value, EngineError) and caught.value.message


def test_config_parse() -> None:
    assert SpeculationConfig.parse("off") == SpeculationConfig()
    assert SpeculationConfig.parse("lookup").mode is SpeculationMode.PROMPT_LOOKUP
    parsed = SpeculationConfig.parse("draft:/models/small.gguf", max_draft=4)
    assert parsed.mode is SpeculationMode.DRAFT_MODEL
    assert parsed.draft_path == Path("/models/small.gguf") and parsed.max_draft == 4
    # --draft-max 1 alone must work: the default minimum follows it down.
    assert SpeculationConfig.parse("lookup", max_draft=1).min_draft == 1
    with pytest.raises(InvalidSpeculation):
        SpeculationConfig.parse("lookup", max_draft=2, min_draft=3)
    with pytest.raises(InvalidSpeculation, match="draft:PATH"):
        SpeculationConfig.parse("draft:")
    with pytest.raises(InvalidSpeculation, match="Unknown"):
        SpeculationConfig.parse("medusa")


@pytest.mark.parametrize(
    ("max_draft", "n_past", "n_ctx_seq", "tokens_left", "expected"),
    [
        (8, 10, 256, 100, 8),
        (8, 250, 256, 100, 5),  # drafts at 251..255, the last cell
        (8, 255, 256, 100, 0),  # the pending token takes the last cell
        (8, 10, 256, 4, 3),  # at most 4 more tokens: 3 drafts + the bonus
        (8, 10, 256, 1, 0),
        (8, 10, 256, 0, 0),
    ],
)
def test_draft_limit(max_draft: int, n_past: int, n_ctx_seq: int, tokens_left: int, expected: int) -> None:
    assert draft_limit(max_draft, n_past, n_ctx_seq, tokens_left) == expected


# --------------------------------------------------------------------------- prompt lookup

LOOKUP = PromptLookup(1, 4)


@pytest.mark.parametrize(
    ("history", "max_draft", "min_draft", "expected"),
    [
        # "1 2 3 4 5 | 1 2": the last bigram appeared before, followed by 3 4 5 1 2
        ((1, 2, 3, 4, 5, 1, 2), 8, 1, (3, 4, 5, 1, 2)),
        ((1, 2, 3, 4, 5, 1, 2), 2, 1, (3, 4)),
        ((1, 2, 3, 4, 5, 6), 8, 1, ()),  # nothing repeats
        ((), 8, 1, ()),
        ((7,), 8, 1, ()),
        # the latest earlier occurrence wins: "9 1" at 2 (followed by 5 6) beats "9 1" at 0
        ((9, 1, 4, 9, 1, 5, 6, 9, 1), 8, 1, (5, 6, 9, 1)),
        # the longest n-gram decides: "3 1" last seen before 7; a lone "1" last seen before 8
        ((3, 1, 7, 0, 1, 8, 3, 1), 8, 1, (7, 0, 1, 8, 3, 1)),
        # a match right before the end leaves too little to propose
        ((1, 2, 3, 1, 2, 3), 8, 1, (1, 2, 3)),
        ((5, 5, 5), 8, 1, (5,)),
        ((5, 5, 5), 8, 2, ()),  # fewer than min_draft available
        ((1, 2, 3, 4, 1, 2), 8, 5, ()),  # (3, 4, 1, 2) is shorter than 5
    ],
)
def test_prompt_lookup_examples(
    history: tuple[int, ...], max_draft: int, min_draft: int, expected: tuple[int, ...]
) -> None:
    assert LOOKUP.propose(history, max_draft, min_draft) == expected
    assert LOOKUP.index(history).propose(max_draft, min_draft) == expected


def test_ngram_range_limits_matches() -> None:
    history = (1, 2, 3, 9, 2, 3)
    # With n >= 3 only, "9 2 3" / "2 3 ..." longer grams never matched: nothing.
    assert PromptLookup(3, 4).propose(history, 8) == ()
    assert PromptLookup(3, 4).index(history).propose(8) == ()
    assert PromptLookup(2, 2).propose(history, 8) == (9, 2, 3)
    with pytest.raises(ValueError):
        PromptLookup(0, 2)
    with pytest.raises(ValueError):
        LookupIndex(3, 2)


def test_lookup_index_grows_incrementally() -> None:
    index = LookupIndex(1, 4)
    index.extend([10, 11, 12, 13])
    assert index.propose(4) == ()
    index.extend([10])
    assert index.propose(4) == (11, 12, 13, 10)
    index.extend([11, 12])
    assert index.propose(2) == (13, 10)
    assert len(index) == 7 and index.tokens == (10, 11, 12, 13, 10, 11, 12)


histories = st.lists(st.integers(0, 4), max_size=80)


def _is_real_continuation(
    history: Sequence[int], proposal: Sequence[int], ngram_min: int, ngram_max: int
) -> bool:
    """Some earlier occurrence of a suffix n-gram is followed by exactly ``proposal``."""
    length = len(history)
    for n in range(ngram_min, ngram_max + 1):
        suffix = list(history[length - n :]) if length >= n else None
        for start in range(length - n):
            if (
                suffix is not None
                and list(history[start : start + n]) == suffix
                and list(history[start + n : start + n + len(proposal)]) == list(proposal)
            ):
                return True
    return False


@settings(max_examples=300, deadline=None)
@given(
    history=histories,
    ngrams=st.tuples(st.integers(1, 4), st.integers(0, 3)),
    max_draft=st.integers(1, 10),
    min_draft=st.integers(1, 4),
)
def test_lookup_proposals_are_real_continuations(
    history: list[int], ngrams: tuple[int, int], max_draft: int, min_draft: int
) -> None:
    lookup = PromptLookup(ngrams[0], ngrams[0] + ngrams[1])
    proposal = lookup.propose(history, max_draft, min_draft)
    assert lookup.index(history).propose(max_draft, min_draft) == proposal
    if proposal:
        assert min_draft <= len(proposal) <= max_draft
        assert _is_real_continuation(history, proposal, lookup.ngram_min, lookup.ngram_max)
    else:
        # Nothing proposed: either no suffix n-gram recurs, or the latest match of the
        # longest recurring one leaves fewer than min_draft tokens.
        full = lookup.propose(history, max_draft, 1)
        assert len(full) < min_draft


@settings(max_examples=150, deadline=None)
@given(history=histories, cuts=st.lists(st.integers(0, 80), max_size=6))
def test_lookup_index_chunked_extension_matches_reference(history: list[int], cuts: list[int]) -> None:
    """Extending in arbitrary chunks, proposing after each: always the O(n) reference's answer."""
    index = LookupIndex(1, 3)
    reference = PromptLookup(1, 3)
    bounds = sorted({0, len(history), *(c for c in cuts if c <= len(history))})
    for a, b in itertools.pairwise(bounds):
        index.extend(history[a:b])
        assert index.propose(5, 1) == reference.propose(history[:b], 5, 1)


def test_lookup_index_cost_does_not_grow_with_history() -> None:
    """A 4k-token conversation, 2000 ticks of extend + propose: a dict probe per n-gram size."""
    rng = np.random.default_rng(0)
    prompt = rng.integers(0, 2000, 4096).tolist()
    index = LookupIndex(1, 4, prompt)
    quote = prompt[1000:1400]
    start = time.perf_counter()
    hits = 0
    for token in quote * 5:
        index.extend((token,))
        hits += bool(index.propose(8, 2))
    elapsed = time.perf_counter() - start
    assert hits > 1900  # quoting the prompt: nearly every tick has a proposal
    assert elapsed < 1.0, f"{elapsed:.3f}s for 2000 ticks"


# --------------------------------------------------------------------------- verification


@pytest.mark.parametrize(
    ("draft", "sampled", "expected"),
    [
        ((5, 6, 7), (5, 6, 7, 8), AcceptedRun(3, (5, 6, 7, 8))),  # all accepted + bonus
        ((5, 6, 7), (5, 9), AcceptedRun(1, (5, 9))),  # correction at row 1
        ((5, 6, 7), (4,), AcceptedRun(0, (4,))),  # first draft wrong
        ((5, 6, 7), (5, 9, 1, 1), AcceptedRun(1, (5, 9))),  # rows after a mismatch are ignored
        ((), (3,), AcceptedRun(0, (3,))),  # no drafts: an ordinary decode
    ],
)
def test_accept_run(draft: tuple[int, ...], sampled: tuple[int, ...], expected: AcceptedRun) -> None:
    run = accept_run(draft, sampled)
    assert run == expected
    assert run.rejected(len(draft)) == len(draft) - run.accepted
    accepted, tokens = run  # a plain tuple for callers that unpack
    assert tokens[:accepted] == tuple(draft[:accepted])


@pytest.mark.parametrize(("draft", "sampled"), [((5, 6), (5, 6)), ((5, 6), (5,)), ((5,), ())])
def test_accept_run_needs_enough_rows(draft: tuple[int, ...], sampled: tuple[int, ...]) -> None:
    with pytest.raises(ValueError):
        accept_run(draft, sampled)


@settings(max_examples=200, deadline=None)
@given(
    draft=st.lists(st.integers(0, 3), max_size=8), target=st.lists(st.integers(0, 3), min_size=9, max_size=9)
)
def test_verify_rows_samples_only_until_the_first_mismatch(draft: list[int], target: list[int]) -> None:
    calls: list[int] = []

    def sample(row: int) -> int:
        calls.append(row)
        return target[row]

    run = verify_rows(draft, sample)
    assert run == accept_run(draft, target)
    assert calls == list(range(len(run.tokens)))  # in order, none past the correction
    assert 1 <= len(run.tokens) == run.accepted + 1 <= len(draft) + 1


# --------------------------------------------------------------------------- vocabulary check


def _write_with_vocab(path: Path, monkeypatch: pytest.MonkeyPatch, edit: Any, **spec: Any) -> Path:
    """A tiny model whose vocabulary ``edit(tokens, types)`` changed in place (same size)."""
    original = tiny_models.tiny_vocab

    def patched(
        n_extra_words: int, controls: tuple[str, ...] = (), extra: tuple[str, ...] = ()
    ) -> tuple[list[str], list[float], list[int]]:
        tokens, scores, types = original(n_extra_words, controls, extra)
        edit(tokens, types)
        return tokens, scores, types

    with monkeypatch.context() as m:
        m.setattr(tiny_models, "tiny_vocab", patched)
        return write_tiny_text_model(path, TinyTextSpec(**spec))


@pytest.fixture()
def no_native_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any native model load fails the test: the check must come first."""
    import llama_cpp

    def forbidden(*_args: object) -> None:
        pytest.fail("a model was loaded natively before the vocabulary check")

    monkeypatch.setattr(llama_cpp, "llama_model_load_from_file", forbidden)


def test_the_model_is_its_own_compatible_draft(tiny_model: Path, no_native_load: None) -> None:
    info = inspect_model(tiny_model)
    check_draft_compatible(info, info, tiny_model, tiny_model)


def test_different_vocabulary_size_is_refused(
    tiny_model: Path, tmp_path: Path, params: LlamaParams, no_native_load: None
) -> None:
    small = write_tiny_text_model(tmp_path / "small.gguf", TinyTextSpec(n_extra_words=100, name="Small"))
    target, draft = inspect_model(tiny_model), inspect_model(small)
    with pytest.raises(IncompatibleDraft) as caught:
        check_draft_compatible(target, draft)
    assert caught.value.reason == (
        f"the draft model's vocabulary has {draft.vocab_size} tokens, the model's {target.vocab_size}"
    )
    assert caught.value.message.startswith("Small cannot draft for Tiny Llama: ")
    # DraftModel.load refuses it the same way, before anything native.
    with pytest.raises(IncompatibleDraft):
        DraftModel.load(small, params, target=target)


def test_different_token_strings_are_refused(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_native_load: None
) -> None:
    def rename(tokens: list[str], _types: list[int]) -> None:
        tokens[3] = "<|start|>"

    other = _write_with_vocab(tmp_path / "other.gguf", monkeypatch, rename)
    target, draft = inspect_model(tiny_model), inspect_model(other)
    assert target.vocab_size == draft.vocab_size
    with pytest.raises(IncompatibleDraft) as caught:
        check_draft_compatible(target, draft)
    assert caught.value.reason == "token 3 differs: '<|im_start|>' in the model, '<|start|>' in the draft"
    # Same names: the message says which file is which.
    assert caught.value.message.startswith("other.gguf cannot draft for tiny-llama.gguf")


def test_special_tokens_beyond_the_first_256_are_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_native_load: None
) -> None:
    def control(name: str) -> Any:
        def edit(tokens: list[str], types: list[int]) -> None:
            tokens[-1] = name
            types[-1] = tiny_models.CONTROL_TOKEN_TYPE

        return edit

    a = _write_with_vocab(tmp_path / "a.gguf", monkeypatch, control("<|tool|>"))
    b = _write_with_vocab(tmp_path / "b.gguf", monkeypatch, control("<|call|>"))
    last = inspect_model(a).vocab_size - 1  # type: ignore[operator]
    with pytest.raises(IncompatibleDraft, match=f"token {last} differs: '<|tool|>' in the model"):
        check_draft_compatible(inspect_model(a), inspect_model(b))

    # An ordinary word beyond the first 256 may differ: drafts there are only less often right.
    def word(tokens: list[str], _types: list[int]) -> None:
        tokens[-1] = "zzzz"

    c = _write_with_vocab(tmp_path / "c.gguf", monkeypatch, word)
    d = write_tiny_text_model(tmp_path / "d.gguf", TinyTextSpec())
    check_draft_compatible(inspect_model(d), inspect_model(c))


def test_tokenizer_and_bos_eos_must_match(tiny_model: Path, no_native_load: None) -> None:
    info = inspect_model(tiny_model)
    with pytest.raises(IncompatibleDraft, match="EOS token is 3, the model's 2"):
        check_draft_compatible(info, dataclasses.replace(info, eos_token_id=3))
    with pytest.raises(IncompatibleDraft, match="BOS token is None, the model's 1"):
        check_draft_compatible(info, dataclasses.replace(info, bos_token_id=None))
    with pytest.raises(IncompatibleDraft, match="tokenizer is 'gpt2', the model's 'llama'"):
        check_draft_compatible(info, dataclasses.replace(info, tokenizer_model="gpt2"))


def test_token_table(tiny_model: Path, tmp_path: Path) -> None:
    table = read_token_table(tiny_model)
    tokens, _scores, _types = tiny_models.tiny_vocab(TinyTextSpec().n_extra_words)
    assert table.count == len(tokens)
    assert [table.token(i).decode() for i in (0, 17, table.count - 1)] == [tokens[0], tokens[17], tokens[-1]]
    assert table.special_ids == {"bos": 1, "eos": 2, "unknown": 0}
    assert table.special_tokens() == frozenset({0, 1, 2, 3, 4})
    with pytest.raises(IndexError):
        table.token(table.count)
    not_gguf = tmp_path / "notes.gguf"
    not_gguf.write_bytes(b"hello, this is not a model at all" * 4)
    with pytest.raises(InvalidModelFile, match="not a GGUF"):
        read_token_table(not_gguf)
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(tiny_model.read_bytes()[:5000])
    with pytest.raises(InvalidModelFile, match="incomplete file"):
        read_token_table(truncated)


@pytest.mark.gemma
def test_gemma_vocabulary_is_read_quickly(gemma_path: Path) -> None:
    start = time.perf_counter()
    table = read_token_table(gemma_path)
    assert table.count == 262144
    assert table.special_ids["bos"] == 2 and table.token(2) == b"<bos>"
    info = inspect_model(gemma_path)
    check_draft_compatible(info, info)
    assert time.perf_counter() - start < 2.0


# --------------------------------------------------------------------------- draft model


@pytest.fixture(scope="module")
def params(tiny_dir: Path) -> LlamaParams:
    """Two sequences of 256 cells; n_batch 64 so long histories need chunked prefill."""
    tiny = tiny_dir / "tiny-llama.gguf"
    if not tiny.exists():
        write_tiny_text_model(tiny, TinyTextSpec())
    base = plan_for(tiny, ctx=256, parallel=2).params
    return dataclasses.replace(base, n_batch=64, n_ubatch=64)


@pytest.fixture(scope="module")
def draft(tiny_dir: Path, params: LlamaParams) -> Iterator[DraftModel]:
    tiny = tiny_dir / "tiny-llama.gguf"
    model = DraftModel.load(tiny, params, target=inspect_model(tiny))
    yield model
    model.free()


class Greedy:
    """The target model decoding greedily, one token at a time, on its own context."""

    def __init__(self, path: Path) -> None:
        import llama_cpp as ll

        from engine.native.backend import ensure_backend
        from engine.native.batch import NativeBatch

        ensure_backend()
        self.ll = ll
        mparams = ll.llama_model_default_params()
        mparams.n_gpu_layers = 0
        self.model = ll.llama_model_load_from_file(str(path).encode(), mparams)
        cparams = ll.llama_context_default_params()
        cparams.n_ctx, cparams.n_batch, cparams.n_seq_max = 512, 512, 1
        self.ctx = ll.llama_init_from_model(self.model, cparams)
        self.n_vocab = ll.llama_vocab_n_tokens(ll.llama_model_get_vocab(self.model))
        self.batch = NativeBatch(512)

    def continuation(self, prompt: Sequence[int], n: int) -> list[int]:
        ll = self.ll
        ll.llama_memory_clear(ll.llama_get_memory(self.ctx), True)
        out: list[int] = []
        feed, position = list(prompt), 0
        for _ in range(n):
            self.batch.clear()
            self.batch.add_run(0, position, feed, range(len(feed) - 1, len(feed)))
            assert ll.llama_decode(self.ctx, self.batch.native()) == 0
            position += len(feed)
            logits = np.ctypeslib.as_array(ll.llama_get_logits_ith(self.ctx, len(feed) - 1), (self.n_vocab,))
            out.append(int(logits.argmax()))
            feed = [out[-1]]
        return out

    def free(self) -> None:
        self.ll.llama_free(self.ctx)
        self.ll.llama_model_free(self.model)


@pytest.fixture(scope="module")
def greedy(tiny_dir: Path, draft: DraftModel) -> Iterator[Greedy]:
    oracle = Greedy(tiny_dir / "tiny-llama.gguf")
    yield oracle
    oracle.free()


PROMPT_A = [1, *range(300, 330)]
PROMPT_B = [1, 40, 41, 42, 300, 305]


def _assert_consistent(draft: DraftModel, seq: int) -> None:
    """The draft's own token list and llama.cpp's KV agree on how much is there."""
    assert draft.cells(seq) == len(draft.tokens(seq))


def test_draft_loads_as_its_own_phase(tiny_model: Path, params: LlamaParams) -> None:
    seen: list[float] = []
    model = DraftModel.load(tiny_model, params, progress=lambda f: seen.append(f) or True)
    try:
        assert seen and seen[-1] == 1.0
        assert (model.n_seq, model.n_ctx_seq, model.n_batch) == (2, 256, 64)
        assert model.n_vocab == inspect_model(tiny_model).vocab_size
        assert model.cells(0) == model.cells(1) == 0  # the warm-up left nothing behind
    finally:
        model.free()
        model.free()  # idempotent
    assert not model.loaded


def test_draft_load_can_be_cancelled(tiny_model: Path, params: LlamaParams) -> None:
    with pytest.raises(Cancelled):
        DraftModel.load(tiny_model, params, progress=lambda _f: False)


def test_draft_load_refuses_a_broken_file_before_llama_cpp(
    tmp_path: Path, params: LlamaParams, no_native_load: None
) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 40)
    with pytest.raises(InvalidModelFile):
        DraftModel.load(broken, params)


def test_propose_is_the_targets_greedy_continuation(draft: DraftModel, greedy: Greedy) -> None:
    draft.clear()
    pending_a = greedy.continuation(PROMPT_A, 1)[0]
    pending_b = greedy.continuation(PROMPT_B, 1)[0]
    drafts = draft.propose({0: DraftRequest(PROMPT_A, pending_a, 5), 1: (PROMPT_B, pending_b, 3)})
    assert drafts[0] == tuple(greedy.continuation([*PROMPT_A, pending_a], 5))
    assert drafts[1] == tuple(greedy.continuation([*PROMPT_B, pending_b], 3))
    # The KV holds history + pending + every draft but the last (it was never decoded).
    assert draft.tokens(0) == (*PROMPT_A, pending_a, *drafts[0][:-1])
    assert draft.tokens(1) == (*PROMPT_B, pending_b, *drafts[1][:-1])
    _assert_consistent(draft, 0)
    _assert_consistent(draft, 1)


def test_speculation_rounds_keep_the_draft_in_sync(draft: DraftModel, greedy: Greedy) -> None:
    """Several rounds as the executor would run them, with the draft half right on purpose."""
    draft.clear()
    reference = greedy.continuation(PROMPT_A, 30)
    history = list(PROMPT_A)
    pending = reference[0]
    emitted = [pending]
    rounds = 0
    while len(emitted) < 20:
        proposal = draft.propose({0: (history, pending, 4)})[0]
        assert len(proposal) == 4
        if rounds % 2:  # pretend the target disagreed at the third draft
            proposal = (*proposal[:2], (proposal[2] + 1) % draft.n_vocab, proposal[3])
        truth = reference[len(emitted) : len(emitted) + 5]
        run = accept_run(proposal, truth)
        # The target's KV now holds history + pending + the accepted drafts.
        history = [*history, pending, *proposal[: run.accepted]]
        draft.rollback(0, len(history))
        assert draft.tokens(0) == tuple(history[: len(draft.tokens(0))])
        _assert_consistent(draft, 0)
        pending = run.tokens[-1]
        emitted.extend(run.tokens)
        rounds += 1
    assert emitted[:20] == reference[:20]
    assert rounds < 20  # more than one token per round on average


def test_sync_reuses_the_common_prefix_and_drops_the_rest(draft: DraftModel) -> None:
    draft.clear()
    assert draft.sync(0, PROMPT_A)
    assert draft.tokens(0) == tuple(PROMPT_A) and draft.cells(0) == len(PROMPT_A)
    decodes = draft.decodes
    assert draft.sync(0, PROMPT_A)  # nothing new: no decode at all
    assert draft.decodes == decodes
    diverged = [*PROMPT_A[:10], 77, 78]
    assert draft.sync(0, diverged)
    assert draft.tokens(0) == tuple(diverged) and draft.cells(0) == 12
    assert draft.decodes == decodes + 1  # only the two new tokens were decoded
    assert draft.sync(0, diverged[:5])  # shorter: trimmed, nothing decoded
    assert draft.tokens(0) == tuple(diverged[:5]) and draft.cells(0) == 5
    draft.rollback(0, 2)
    assert draft.tokens(0) == tuple(diverged[:2]) and draft.cells(0) == 2
    draft.rollback(0, 10)  # keeping more than is there changes nothing
    assert draft.cells(0) == 2
    draft.release(0)
    assert draft.tokens(0) == () and draft.cells(0) == 0


def test_long_history_is_prefilled_in_chunks_of_n_batch(draft: DraftModel, greedy: Greedy) -> None:
    """150 + 100 tokens with n_batch 64: five decodes, none over the batch size."""
    draft.clear()
    rng = np.random.default_rng(3)
    long_a = [1, *rng.integers(261, 400, 149).tolist()]
    long_b = [1, *rng.integers(261, 400, 99).tolist()]
    decodes = draft.decodes
    drafts = draft.propose({0: (long_a, 300, 2), 1: (long_b, 301, 2)})
    # 252 rows (both histories + pending tokens) -> 4 chunks, then one draft step.
    assert draft.decodes - decodes == 5
    assert draft.cells(0) == 152 and draft.cells(1) == 102  # + pending + first draft
    assert drafts[0] == tuple(greedy.continuation([*long_a, 300], 2))
    assert drafts[1] == tuple(greedy.continuation([*long_b, 301], 2))


def test_drafts_stop_at_the_end_of_the_context(draft: DraftModel) -> None:
    draft.clear()
    history = [1, *([300] * 250)]  # 251 of 256 cells
    drafts = draft.propose({0: (history, 301, 8)})
    # pending at 251, verification rows at 252..255: four drafts at most.
    assert len(drafts[0]) == 4
    _assert_consistent(draft, 0)
    assert draft.propose({0: ([1] * 255, 301, 8)}) == {0: ()}  # no room for any draft


def test_min_draft_and_p_min(tiny_model: Path, params: LlamaParams) -> None:
    model = DraftModel.load(tiny_model, params, p_min=0.999)
    try:
        # A random-weight model is never that sure of itself: no drafts at all, and the
        # KV still holds exactly what was decoded (history + pending).
        assert model.propose({0: (PROMPT_A, 300, 4)}) == {0: ()}
        assert model.tokens(0) == (*PROMPT_A, 300)
        _assert_consistent(model, 0)
    finally:
        model.free()


def test_min_draft_drops_short_proposals(draft: DraftModel) -> None:
    draft.clear()
    assert draft.propose({0: (PROMPT_A, 300, 1)}, min_draft=2) == {0: ()}
    assert len(draft.propose({0: (PROMPT_A, 300, 2)}, min_draft=2)[0]) == 2


def test_a_failed_draft_decode_gives_no_drafts(draft: DraftModel, monkeypatch: pytest.MonkeyPatch) -> None:
    draft.clear()
    assert draft.sync(1, PROMPT_B)
    with monkeypatch.context() as m:
        m.setattr(draft._ll, "llama_decode", lambda _ctx, _batch: 1)
        assert draft.propose({0: (PROMPT_A, 300, 4), 1: (PROMPT_B, 301, 4)}) == {0: (), 1: ()}
    # Both sequences start over; the next call works again.
    assert draft.tokens(0) == draft.tokens(1) == ()
    assert draft.cells(1) == 0
    assert len(draft.propose({1: (PROMPT_B, 301, 4)})[1]) == 4


# -- how many drafts pay ---------------------------------------------------------------

from engine.speculation.policy import (  # noqa: E402
    ACCEPTANCE_PRIOR,
    DraftCostModel,
    relax_acceptance,
    update_acceptance,
)

# Measured on Gemma 3 270M, 2 CPU threads: one row 11 ms, 9 rows 57 ms.
CPU_COSTS = DraftCostModel.measured({1: 11.3, 2: 23.1, 3: 27.7, 5: 44.9, 9: 57.1}, max_draft=8)


def test_cost_model_interpolates_measured_row_costs() -> None:
    assert CPU_COSTS.row_costs[0] == 1.0
    assert len(CPU_COSTS.row_costs) == 9
    assert CPU_COSTS.row_costs[1] == pytest.approx(23.1 / 11.3)
    assert CPU_COSTS.row_costs[3] == pytest.approx((44.9 + 27.7) / 2 / 11.3)
    assert list(CPU_COSTS.row_costs) == sorted(CPU_COSTS.row_costs)


def test_no_drafts_when_acceptance_is_low_long_drafts_when_high() -> None:
    assert CPU_COSTS.choose(0.3, limit=8) == 0
    assert CPU_COSTS.choose(0.6, limit=8) == 0  # an extra row costs as much as the first here
    assert CPU_COSTS.choose(0.99, limit=8) == 8
    assert CPU_COSTS.choose(0.99, limit=3) == 3


def test_cheap_rows_make_drafting_pay_earlier() -> None:
    gpu_like = DraftCostModel(tuple(1.0 + 0.05 * n for n in range(9)))
    assert gpu_like.choose(0.6, limit=8) > 0
    assert gpu_like.choose(0.6, limit=8, min_draft=9) == 0


def test_a_draft_model_costs_its_own_decodes() -> None:
    free = DraftCostModel(tuple(1.0 + 0.05 * n for n in range(9)))
    same_size = DraftCostModel(free.row_costs, draft_cost=1.0)
    assert free.choose(0.8, 8) > 0
    assert same_size.choose(0.8, 8) == 0


def test_expected_tokens() -> None:
    assert CPU_COSTS.expected_tokens(1.0, 4) == 5
    assert CPU_COSTS.expected_tokens(0.5, 2) == pytest.approx(1.75)


def test_acceptance_estimate_moves_with_verification() -> None:
    p = ACCEPTANCE_PRIOR
    up = update_acceptance(p, drafted=4, accepted=4)
    down = update_acceptance(p, drafted=4, accepted=0)
    assert up > p > down
    assert 0.0 <= update_acceptance(0.0, 3, 0) <= update_acceptance(1.0, 3, 3) <= 1.0
    assert relax_acceptance(0.1) > 0.1 and relax_acceptance(0.95) < 0.95


def test_slow_start_of_draft_length() -> None:
    from engine.speculation.policy import next_draft_cap

    assert next_draft_cap(2, drafted=2, accepted=2, max_draft=8) == 4
    assert next_draft_cap(4, drafted=4, accepted=4, max_draft=8) == 8
    assert next_draft_cap(8, drafted=8, accepted=8, max_draft=8) == 8
    assert next_draft_cap(8, drafted=8, accepted=3, max_draft=8) == 4
    assert next_draft_cap(8, drafted=8, accepted=0, max_draft=8) == 1


def test_the_speculation_policy_is_pure() -> None:
    """Like the scheduler: the policy imports neither llama_cpp nor Qt nor numpy."""
    import ast

    import engine.speculation.policy as policy

    imported: set[str] = set()
    for node in ast.walk(ast.parse(Path(policy.__file__).read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    stdlib = {"__future__", "enum", "math", "collections.abc", "dataclasses", "pathlib", "typing"}
    assert imported <= stdlib | {"engine.base.errors", "engine.base.defaults"}, imported - stdlib
