"""The executor with tiny models: continuous batching, prefix reuse, events, failures."""

from __future__ import annotations

import gc
import os
import threading
import time
from pathlib import Path

import psutil
import pytest

import engine.runtime.active_request as active_request_module
from engine.base.errors import (
    Cancelled,
    EngineError,
    ImageRejected,
    InvalidChatRequest,
    LoadFailed,
    Overloaded,
)
from engine.chat import ChatMessage
from engine.loaded_model import Engine, LoadedModel
from engine.planner import LoadPhase
from engine.requests.completion import StopReason
from engine.requests.events import Completed, DecodeFailed, Prefill, Queued, Started, TextDelta
from engine.requests.request import ChatRequest, PromptTooLong
from engine.requests.stats import SlotState
from engine.sampling.params import GREEDY, SamplingParams
from tests.conftest import SCRIPT_TEXT, plan_for

TIMEOUT = 60


def load(path: Path, ctx: int = 1024, parallel: int = 4, **kwargs: object) -> LoadedModel:
    return Engine.load(plan_for(path, ctx=ctx, parallel=parallel), **kwargs).wait_ready(TIMEOUT)  # type: ignore[arg-type]


def chat(text: str, **kwargs: object) -> ChatRequest:
    return ChatRequest(messages=(ChatMessage("user", text),), sampling=GREEDY, **kwargs)  # type: ignore[arg-type]


@pytest.fixture()
def tiny(tiny_model: Path):
    model = load(tiny_model)
    yield model
    model.unload()


@pytest.fixture()
def scripted(scripted_model: Path):
    model = load(scripted_model)
    yield model
    model.unload()


@pytest.fixture()
def looping(looping_model: Path):
    model = load(looping_model)
    yield model
    model.unload()


def slow_down(model: LoadedModel, seconds: float) -> None:
    """Make every decode take a while so tests can act in the middle of a request."""
    executor = model._executor
    original = executor._decode

    def slow(batch):
        time.sleep(seconds)
        return original(batch)

    executor._decode = slow  # type: ignore[method-assign]


# -- batching and events -------------------------------------------------------------


def test_eight_requests_on_four_sequences_complete_with_events_in_order(tiny: LoadedModel) -> None:
    handles = [tiny.submit(chat(f"Story {i}: once upon a time", max_tokens=24 + i)) for i in range(8)]
    for i, handle in enumerate(handles):
        events = list(handle.events(timeout=TIMEOUT))
        assert isinstance(events[0], Queued)
        assert isinstance(events[-1], Completed)
        kinds = [type(e) for e in events]
        started = kinds.index(Started)
        assert all(k is Prefill for k in kinds[1:started])
        assert all(k is TextDelta for k in kinds[started + 1 : -1])
        prefills = [e for e in events if isinstance(e, Prefill)]
        assert [p.completed for p in prefills] == sorted(p.completed for p in prefills)
        assert prefills[-1].completed == prefills[-1].total
        completion = events[-1].completion
        assert completion.stop_reason in (StopReason.LENGTH, StopReason.STOP_TOKEN, StopReason.STOP_STRING)
        assert completion.usage.completion_tokens <= 24 + i
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == completion.text
        assert completion.timings.ttft > 0
    stats = tiny.stats()
    assert stats.completed_requests == 8
    assert stats.active_requests == 0
    assert len(stats.sequences) == 4


def test_scripted_model_says_exactly_its_script(scripted: LoadedModel) -> None:
    completion = scripted.submit(chat("hello")).wait(TIMEOUT)
    assert completion.text == SCRIPT_TEXT
    assert completion.stop_reason is StopReason.STOP_TOKEN
    assert completion.usage.completion_tokens == 9


def test_multibyte_characters_are_never_split_across_deltas(
    scripted: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(active_request_module, "DELTA_INTERVAL", 0.0)  # one delta per token
    handle = scripted.submit(chat("hello"))
    deltas = [e.text for e in handle.events(timeout=TIMEOUT) if isinstance(e, TextDelta)]
    assert deltas == ["é", " a", "b", "你", "c", "d"]


def test_each_delta_names_the_text_of_each_of_its_tokens(scripted: LoadedModel) -> None:
    handle = scripted.submit(chat("hello"))
    deltas = [e for e in handle.events(timeout=TIMEOUT) if isinstance(e, TextDelta)]
    pieces = [piece for delta in deltas for piece in delta.pieces]
    assert all("".join(d.pieces) == d.text for d in deltas)
    # One per token; the bytes of a character are held (""), then it comes whole.
    assert pieces == ["", "é", " a", "b", "", "", "你", "c", "d"]
    assert len(pieces) == handle.completion.usage.completion_tokens


@pytest.mark.parametrize(
    ("stop", "expected"),
    [
        (("b你",), "é a"),  # spans three tokens, starts mid-way through one of them
        (("你c",), "é ab"),
        (("é",), ""),  # at the very start
        (("bx", "cd"), "é ab你"),  # a false start is released, the real one stops
        (("zz",), SCRIPT_TEXT),
    ],
)
def test_stop_strings_split_across_tokens(
    scripted: LoadedModel, monkeypatch: pytest.MonkeyPatch, stop: tuple[str, ...], expected: str
) -> None:
    monkeypatch.setattr(active_request_module, "DELTA_INTERVAL", 0.0)
    handle = scripted.submit(chat("hello", stop=stop))
    events = list(handle.events(timeout=TIMEOUT))
    completion = events[-1].completion
    assert completion.text == expected
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == expected
    reason = StopReason.STOP_TOKEN if expected == SCRIPT_TEXT else StopReason.STOP_STRING
    assert completion.stop_reason is reason


def test_max_tokens_ends_with_length(scripted: LoadedModel) -> None:
    completion = scripted.submit(chat("hello", max_tokens=3)).wait(TIMEOUT)
    assert completion.text == "é a"
    assert completion.stop_reason is StopReason.LENGTH
    assert completion.usage.completion_tokens == 3


def test_deltas_are_coalesced_to_about_30_a_second(looping: LoadedModel) -> None:
    handle = looping.submit(chat("go", max_tokens=400))
    stamps = []
    for event in handle.events(timeout=TIMEOUT):
        if isinstance(event, TextDelta):
            stamps.append(time.perf_counter())
    completion = handle.wait(TIMEOUT)
    assert completion.usage.completion_tokens == 400
    duration = max(stamps[-1] - stamps[0], 1e-3)
    assert len(stamps) <= 2 + duration * 30 * 1.5


@pytest.mark.parametrize(
    ("interval", "expected"), [(0.0, ["é", " a", "b", "你", "c", "d"]), (1.0, [SCRIPT_TEXT])]
)
def test_a_request_sets_its_own_text_interval(
    scripted: LoadedModel, interval: float, expected: list[str]
) -> None:
    """The window asks for text every 0.1 s: the same text in fewer, larger deltas (0: one
    per token; 1 s: the whole short script in the delta at its end)."""
    handle = scripted.submit(chat("hello", text_interval_s=interval))
    deltas = [e.text for e in handle.events(timeout=TIMEOUT) if isinstance(e, TextDelta)]
    assert deltas == expected


@pytest.mark.parametrize("interval", [-0.1, 1.5])
def test_a_text_interval_out_of_range_is_refused(tiny: LoadedModel, interval: float) -> None:
    request = chat("go", text_interval_s=interval)
    with pytest.raises(InvalidChatRequest, match="text interval"):
        tiny.submit(request)


def test_time_waiting_for_a_slot_is_queued_not_time_to_first_token(tiny_model: Path) -> None:
    """With one sequence, a second request waits for the first to end: that wait is its
    ``queued``; its time to first token and its decode rate count from its admission."""
    model = load(tiny_model, ctx=512, parallel=1)
    try:
        slow_down(model, 0.02)  # every tick 20 ms: the first reply takes a second or more
        first = model.submit(chat("The first story", max_tokens=48, ignore_eos=True))
        second = model.submit(chat("The second story", max_tokens=6, ignore_eos=True))
        a, b = first.wait(TIMEOUT), second.wait(TIMEOUT)
        first_took = a.timings.queued + a.timings.ttft + a.timings.decode_seconds
        assert a.timings.queued < 0.1  # a free sequence: admitted at once
        assert first_took > 0.9
        # Submitted together, the second was admitted as the first ended (a tick or two later).
        assert b.timings.queued == pytest.approx(first_took, abs=0.25)
        assert b.timings.ttft < 0.5 < b.timings.queued
        # Five tokens after the first, at the same pace as the first reply's.
        assert b.timings.decode_seconds < 0.5
        assert b.timings.decode_tokens_per_second > 0.5 * a.timings.decode_tokens_per_second
    finally:
        model.unload()


# -- context limits ---------------------------------------------------------------------


def test_context_full_ends_the_request_instead_of_failing(looping_model: Path) -> None:
    model = load(looping_model, ctx=256, parallel=1)
    try:
        completion = model.submit(chat("go", max_tokens=10_000)).wait(TIMEOUT)
        assert completion.stop_reason is StopReason.CONTEXT_FULL
        assert completion.usage.prompt_tokens + completion.usage.completion_tokens == 257
        # The engine keeps serving afterwards.
        assert model.submit(chat("again", max_tokens=4)).wait(TIMEOUT).usage.completion_tokens == 4
    finally:
        model.unload()


def test_prompt_longer_than_the_context_fails_with_a_human_message(tiny_model: Path) -> None:
    model = load(tiny_model, ctx=256, parallel=1)
    try:
        handle = model.submit(chat("word " * 400))
        with pytest.raises(PromptTooLong, match="per conversation"):
            handle.wait(TIMEOUT)
        assert model.submit(chat("short", max_tokens=2)).wait(TIMEOUT).usage.completion_tokens <= 2
    finally:
        model.unload()


# -- prefix reuse ------------------------------------------------------------------------


def test_prefix_reuse_when_prompts_share_a_prefix(tiny: LoadedModel) -> None:
    first = tiny.submit(chat("The quick brown fox jumps over the lazy dog", max_tokens=8)).wait(TIMEOUT)
    assert first.usage.cached_tokens == 0
    again = tiny.submit(chat("The quick brown fox jumps over the lazy dog", max_tokens=8)).wait(TIMEOUT)
    # Everything but the last prompt token, which is decoded again for its logits.
    assert again.usage.cached_tokens == again.usage.prompt_tokens - 1
    stats = tiny.stats()
    assert stats.prefix_hits >= 1
    assert stats.tokens_reused >= again.usage.cached_tokens


def test_no_reuse_when_prompts_share_nothing(tiny: LoadedModel) -> None:
    tiny.submit(ChatRequest(prompt="xyz xyz xyz xyz", sampling=GREEDY, max_tokens=4)).wait(TIMEOUT)
    other = tiny.submit(ChatRequest(prompt="qqq rrr sss", sampling=GREEDY, max_tokens=4)).wait(TIMEOUT)
    # Both start with BOS only; "qqq" differs right after it.
    assert other.usage.cached_tokens <= 1


def test_reply_is_kept_as_reusable_prefix_for_the_next_turn(scripted: LoadedModel) -> None:
    turn1 = chat("hello")
    reply = scripted.submit(turn1).wait(TIMEOUT)
    turn2 = ChatRequest(
        messages=(
            ChatMessage("user", "hello"),
            reply.as_message(),
            ChatMessage("user", "and now?"),
        ),
        sampling=GREEDY,
    )
    completion = scripted.submit(turn2).wait(TIMEOUT)
    # The whole first turn, prompt and reply, came from cache.
    assert completion.usage.cached_tokens >= reply.usage.prompt_tokens + reply.usage.completion_tokens
    # Re-tokenizing the reply's text instead would not match ("c" "d" becomes "cd").
    retokenized = ChatRequest(
        messages=(
            ChatMessage("user", "hello"),
            ChatMessage("assistant", reply.text),
            ChatMessage("user", "?"),
        ),
        sampling=GREEDY,
        cache=False,
    )
    assert scripted.submit(retokenized).wait(TIMEOUT).usage.prompt_tokens < completion.usage.prompt_tokens


def test_request_without_cache_does_not_reuse(tiny: LoadedModel) -> None:
    tiny.submit(chat("cache me please", max_tokens=4)).wait(TIMEOUT)
    completion = tiny.submit(chat("cache me please", max_tokens=4, cache=False)).wait(TIMEOUT)
    assert completion.usage.cached_tokens == 0


# -- cancellation, overload, failures -------------------------------------------------------


def test_cancel_during_prefill(tiny_model: Path) -> None:
    model = load(tiny_model, ctx=4096, parallel=1)
    try:
        slow_down(model, 0.05)
        handle = model.submit(chat("word " * 1500, max_tokens=4))
        for event in handle.events(timeout=TIMEOUT):
            if isinstance(event, Prefill) and 0 < event.completed < event.total:
                handle.cancel()
            if isinstance(event, Completed):
                assert event.completion.stop_reason is StopReason.CANCELLED
                assert event.completion.usage.completion_tokens == 0
        assert model.stats().active_requests == 0
    finally:
        model.unload()


def test_cancel_during_decode_leaves_other_requests_alone(looping: LoadedModel) -> None:
    slow_down(looping, 0.005)
    victim = looping.submit(chat("go on", max_tokens=5000))
    bystander = looping.submit(chat("go on too", max_tokens=40))
    for event in victim.events(timeout=TIMEOUT):
        if isinstance(event, TextDelta):
            victim.cancel()
    cancelled = victim.wait(TIMEOUT)
    assert cancelled.stop_reason is StopReason.CANCELLED
    assert 0 < cancelled.usage.completion_tokens < 5000
    done = bystander.wait(TIMEOUT)
    assert done.stop_reason is StopReason.LENGTH
    assert done.usage.completion_tokens == 40


def test_requests_beyond_the_queue_are_refused_as_overloaded(tiny_model: Path) -> None:
    model = Engine.load(plan_for(tiny_model, ctx=512, parallel=1), queue_capacity=2).wait_ready(TIMEOUT)
    try:
        slow_down(model, 0.02)
        handles = [model.submit(chat("busy", max_tokens=20)) for _ in range(3)]
        with pytest.raises(Overloaded, match="busy"):
            model.submit(chat("one too many"))
        for handle in handles:
            handle.wait(TIMEOUT)
        model.submit(chat("room again", max_tokens=2)).wait(TIMEOUT)
    finally:
        model.unload()


def test_decode_failure_fails_only_that_batch_and_the_engine_keeps_serving(tiny: LoadedModel) -> None:
    executor = tiny._executor
    original = executor._decode
    failures = iter([-1])
    failed: list[int] = []

    def failing_once(batch):
        rc = next(failures, None)
        if rc is not None:
            failed.append(rc)
        return rc if rc is not None else original(batch)

    executor._decode = failing_once  # type: ignore[method-assign]
    broken = tiny.submit(chat("this batch breaks", max_tokens=4))
    with pytest.raises(DecodeFailed, match="failed to evaluate"):
        broken.wait(TIMEOUT)
    assert failed == [-1]
    after = tiny.submit(chat("a request after the failure", max_tokens=4)).wait(TIMEOUT)
    assert after.usage.completion_tokens == 4


# -- a bad request never hurts the others ---------------------------------------------


def conversation(reply_tokens: tuple[int, ...], tokens_model: str, text: str = "again") -> ChatRequest:
    messages = (
        ChatMessage("user", "hi"),
        ChatMessage("assistant", "ab", tokens=reply_tokens, tokens_model=tokens_model),
        ChatMessage("user", text),
    )
    return ChatRequest(messages=messages, sampling=GREEDY, max_tokens=4)


def test_foreign_token_ids_are_refused_alone_while_two_others_stream(looping: LoadedModel) -> None:
    identity = looping._executor.model_identity
    slow_down(looping, 0.005)
    streams = [looping.submit(chat(f"stream {i}", max_tokens=40)) for i in range(2)]
    time.sleep(0.05)
    foreign = looping.submit(conversation((5, 10**6), identity))
    with pytest.raises(InvalidChatRequest, match=r"token id 1000000, which this model does not have"):
        foreign.wait(TIMEOUT)
    for handle in streams:
        done = handle.wait(TIMEOUT)
        assert done.usage.completion_tokens == 40 and done.stop_reason is StopReason.LENGTH
    assert looping.stats().prefix_hits + looping.stats().prefix_misses >= 2


def test_reply_ids_from_another_model_are_retokenized(looping: LoadedModel) -> None:
    identity = looping._executor.model_identity
    text_only = looping.submit(conversation((), "")).wait(TIMEOUT)
    other = looping.submit(conversation((10**6, -3), "another-model")).wait(TIMEOUT)
    assert other.usage.completion_tokens == 4  # the ids were ignored, the text tokenized
    assert other.usage.prompt_tokens == text_only.usage.prompt_tokens
    assert other.model_identity == identity
    # this model's own ids are spliced in ("ab" is at most 2 tokens; these are 5)
    own = looping.submit(conversation((7, 8, 9, 10, 11), identity)).wait(TIMEOUT)
    assert own.usage.prompt_tokens > text_only.usage.prompt_tokens


def test_a_failed_shared_batch_fails_only_the_request_that_breaks_it(looping: LoadedModel) -> None:
    """A decode that fails for one sequence's rows (simulated: any batch holding a marked
    token id) fails that request alone; the streams beside it finish and keep their cache."""
    executor = looping._executor
    original = executor._decode
    marked = executor._native.n_vocab - 1  # a valid id that the looping script never says
    failed_batches: list[int] = []

    def decode(batch):
        if marked in batch.token[: batch.n_tokens].tolist():
            failed_batches.append(batch.n_tokens)
            return -1
        time.sleep(0.005)
        return original(batch)

    executor._decode = decode  # type: ignore[method-assign]
    streams = [looping.submit(chat(f"stream {i}", max_tokens=30)) for i in range(2)]
    time.sleep(0.03)
    culprit = looping.submit(conversation((marked,), executor.model_identity))
    with pytest.raises(DecodeFailed, match="failed to evaluate"):
        culprit.wait(TIMEOUT)
    results = [h.wait(TIMEOUT) for h in streams]
    assert all(r.usage.completion_tokens == 30 for r in results)
    assert len(failed_batches) >= 1
    # the cache survived: the first stream's conversation continues from its cached prefix
    again = looping.submit(chat("stream 0", max_tokens=2)).wait(TIMEOUT)
    assert again.usage.cached_tokens > 0


def test_a_reply_without_cache_frees_its_cells(tiny: LoadedModel) -> None:
    tiny.submit(ChatRequest(prompt="no cache please " * 8, sampling=GREEDY, max_tokens=8, cache=False)).wait(
        TIMEOUT
    )
    stats = tiny.stats()
    assert all(s.cells_used == 0 for s in stats.sequences if s.state is SlotState.EMPTY), stats.sequences


def test_invalid_sampling_is_refused_before_queueing(tiny: LoadedModel) -> None:
    with pytest.raises(EngineError, match="Temperature"):
        tiny.submit(ChatRequest(prompt="x", sampling=SamplingParams(temperature=-1)))


def test_sampling_with_a_seed_is_reproducible(tiny: LoadedModel) -> None:
    params = SamplingParams(temperature=1.0, seed=1234)
    a = tiny.submit(ChatRequest(prompt="seeded", sampling=params, max_tokens=16, cache=False)).wait(TIMEOUT)
    b = tiny.submit(ChatRequest(prompt="seeded", sampling=params, max_tokens=16, cache=False)).wait(TIMEOUT)
    assert a.tokens == b.tokens


def test_stats_show_who_holds_which_sequence(looping: LoadedModel) -> None:
    slow_down(looping, 0.01)
    handle = looping.submit(ChatRequest(prompt="owned", sampling=GREEDY, max_tokens=200, owner="chat-7"))
    for event in handle.events(timeout=TIMEOUT):
        if isinstance(event, TextDelta):
            break
    stats = looping.stats()
    owners = {s.owner: s for s in stats.sequences if s.state is SlotState.ACTIVE}
    assert "chat-7" in owners and owners["chat-7"].cells_used > 0
    handle.cancel()
    handle.wait(TIMEOUT)


def test_batch_fill_and_rates_follow_what_is_decoding(looping: LoadedModel) -> None:
    from engine.runtime.serving_stats import RATE_WINDOW

    slow_down(looping, 0.005)  # ~1000 tokens of context each: streams that outlive the window
    handles = [
        looping.submit(ChatRequest(prompt=f"stream {i}", sampling=GREEDY, owner=f"c{i}")) for i in (1, 2)
    ]
    for handle in handles:
        for event in handle.events(timeout=TIMEOUT):
            if isinstance(event, TextDelta):
                break
    time.sleep(RATE_WINDOW + 0.2)  # every batch in the window has both streams
    busy = looping.stats()
    assert busy.active_requests == 2
    assert busy.batch_fill == pytest.approx(0.5)  # two of the four sequences in every batch
    assert busy.decode_tokens_per_second > 0
    for handle in handles:
        handle.cancel()
        handle.wait(TIMEOUT)
    time.sleep(RATE_WINDOW + 0.2)
    idle = looping.stats()
    assert idle.active_requests == 0
    assert (idle.decode_tokens_per_second, idle.prefill_tokens_per_second, idle.batch_fill) == (0, 0, 0)


# -- loading --------------------------------------------------------------------------------


def test_load_reports_each_phase_in_order(qtbot, tiny_model: Path) -> None:
    model = Engine.load(plan_for(tiny_model), start=False)
    started: list[LoadPhase] = []
    finished: list[tuple[LoadPhase, float]] = []
    model.phase_started.connect(started.append)
    model.phase_finished.connect(lambda phase, seconds: finished.append((phase, seconds)))
    with qtbot.waitSignal(model.ready, timeout=TIMEOUT * 1000):
        model.start()
    qtbot.waitUntil(lambda: len(finished) == len(model.plan.phases))
    assert started == list(model.plan.phases)
    assert [p for p, _ in finished] == list(model.plan.phases)
    assert all(seconds >= 0 for _, seconds in finished)
    model.unload()


def test_a_failed_load_reports_a_typed_error(tmp_path: Path, tiny_model: Path) -> None:
    copy = tmp_path / "soon-broken.gguf"
    copy.write_bytes(tiny_model.read_bytes())
    plan = plan_for(copy)
    copy.write_bytes(b"not a gguf any more")
    with pytest.raises(EngineError) as info:
        Engine.load(plan).wait_ready(TIMEOUT)
    assert info.value.message


def test_cancelled_load(tiny_model: Path) -> None:
    model = Engine.load(plan_for(tiny_model), start=False)
    model.cancel_load()
    model.start()
    with pytest.raises(Cancelled):
        model.wait_ready(TIMEOUT)
    with pytest.raises(LoadFailed):
        model.submit(chat("nobody home"))


def test_unloading_ends_waiting_requests(looping_model: Path) -> None:
    model = load(looping_model, parallel=1)
    slow_down(model, 0.01)
    handles = [model.submit(chat("long", max_tokens=10_000)) for _ in range(3)]
    model.unload()
    for handle in handles:
        with pytest.raises(Cancelled):
            handle.wait(TIMEOUT)


def test_load_and_unload_twenty_times_returns_memory(tiny_model: Path) -> None:
    process = psutil.Process(os.getpid())

    def cycle() -> None:
        model = load(tiny_model)
        model.submit(chat("hi", max_tokens=4)).wait(TIMEOUT)
        model.unload()

    cycle()  # first-use allocations (backend, thread pools) happen once
    gc.collect()
    before = process.memory_info().rss
    # Counted against the threads alive now: tests that ran earlier in this process may have
    # left their own (a hub's pool, a server) and those are not the executor's to stop.
    threads_before = threading.active_count()
    for _ in range(20):
        cycle()
    gc.collect()
    after = process.memory_info().rss
    assert after - before < 16 * 1024 * 1024, f"RSS grew by {(after - before) / 2**20:.1f} MiB"
    assert threading.active_count() <= threads_before + 1, "each load left a thread behind"


def test_an_idle_engine_does_not_spin_the_cpu(tiny: LoadedModel) -> None:
    tiny.submit(chat("warm up", max_tokens=2)).wait(TIMEOUT)
    time.sleep(0.3)  # let OpenMP's worker threads stop spinning after the last decode
    process = psutil.Process(os.getpid())
    before = process.cpu_times()
    time.sleep(1.0)
    after = process.cpu_times()
    busy = (after.user - before.user) + (after.system - before.system)
    assert busy < 0.1, f"{busy:.2f} s of CPU in 1 s of idling"


def test_continue_an_interrupted_reply_from_its_text(scripted: LoadedModel) -> None:
    # The scripted model says the script after any token outside it: a prefix ending in
    # "b" (inside the script) makes it go on from there.
    completion = scripted.submit(chat("hello", assistant_prefix="é ab")).wait(TIMEOUT)
    assert completion.text == "你cd"


def test_stats_remember_whose_prefix_a_cached_sequence_holds(tiny: LoadedModel) -> None:
    tiny.submit(ChatRequest(prompt="remember my owner", sampling=GREEDY, max_tokens=4, owner="chat-9")).wait(
        TIMEOUT
    )
    reusable = [s for s in tiny.stats().sequences if s.state is SlotState.REUSABLE]
    assert [s.owner for s in reusable] == ["chat-9"]
    assert reusable[0].reusable_tokens > 0


# -- measuring a prompt before it is sent ------------------------------------------------------


def test_a_measured_prompt_takes_what_the_sent_prompt_takes(tiny: LoadedModel) -> None:
    request = chat("How many tokens is this message, with its template?", max_tokens=2)
    size = tiny.measure_prompt(request).result(TIMEOUT)
    assert size.limit == tiny.context_per_conversation and size.fits
    assert tiny.stats().cells_used == 0, "measuring runs nothing"
    completion = tiny.submit(request).wait(TIMEOUT)
    assert size.tokens == completion.usage.prompt_tokens


def test_a_prompt_too_long_is_measured_as_not_fitting(tiny: LoadedModel) -> None:
    size = tiny.measure_prompt(chat("word " * 3000)).result(TIMEOUT)
    assert size.tokens > size.limit and not size.fits
    with pytest.raises(PromptTooLong):
        tiny.submit(chat("word " * 3000)).wait(TIMEOUT)


def test_measuring_a_prompt_that_cannot_be_built_is_its_error(tiny: LoadedModel) -> None:
    import io

    from PIL import Image

    from engine.multimodal import load_image

    png = io.BytesIO()
    Image.new("RGB", (8, 8)).save(png, "PNG")
    picture = load_image(png.getvalue(), name="x.png")
    future = tiny.measure_prompt(ChatRequest(messages=(ChatMessage("user", "see", (picture,)),)))
    with pytest.raises(ImageRejected):  # no projector is loaded
        future.result(TIMEOUT)
    assert tiny.submit(chat("still serving", max_tokens=2)).wait(TIMEOUT).text is not None
