"""One test per rule of docs/scheduler-rules.md, plus property tests of the planner."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import scheduler
from engine.scheduler import (
    DEFAULT_COMMAND_QUEUE,
    DEFAULT_N_BATCH,
    DEFAULT_N_UBATCH,
    DEFAULT_PREFILL_QUANTUM,
    SIMILARITY_THRESHOLD,
    ZERO_BOUNDARY,
    BatchCommit,
    BatchPlan,
    BatchPlanner,
    BatchWork,
    Candidate,
    Checkpoint,
    CommitState,
    MediaItem,
    MediaSegment,
    MediaSnap,
    PromptBoundary,
    PromptLayout,
    ReusablePrefix,
    SequencePhase,
    SequencePool,
    SequenceProgress,
    SequenceState,
    SplitsMedia,
    StaleCommit,
    TextRun,
    TextSegment,
    WorkKind,
)

B = PromptBoundary
DECODE, PREFILL, MEDIA = WorkKind.DECODE, WorkKind.PREFILL, WorkKind.MEDIA

# An M-RoPE style image: 16 embeddings advance only 4 positions.
CAT = MediaSegment("image/png:4x4:cat", 16, 4)
DOG = MediaSegment("image/png:4x4:dog", 16, 4)


def text(*tokens: int) -> TextSegment:
    return TextSegment(tokens)


def layout(*segments: TextSegment | MediaSegment) -> PromptLayout:
    return PromptLayout(segments)


def tokens(n: int, start: int = 0) -> PromptLayout:
    return PromptLayout.from_tokens(range(start, start + n))


def acquire(pool: SequencePool, prompt: PromptLayout) -> scheduler.Acquisition:
    acquisition = pool.acquire_matching(prompt)
    assert acquisition is not None
    return acquisition


def pool_with(prefixes: list[PromptLayout | None]) -> SequencePool:
    """A pool where sequence i was released with prefixes[i]; the last one is the most recent."""
    pool = SequencePool(len(prefixes))
    taken = [pool.acquire_lru() for _ in prefixes]
    assert [a.sequence_id for a in taken if a] == list(range(len(prefixes)))[::-1]
    for sequence_id, prefix in enumerate(prefixes):
        pool.release(sequence_id, prefix)
    return pool


# ------------------------------------------------------------------------ the module


def _imports(path: str) -> set[str]:
    imported: set[str] = set()
    for node in ast.walk(ast.parse(Path(path).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    return imported


def test_scheduler_is_pure_imports_neither_llama_cpp_nor_qt_nor_numpy() -> None:
    import engine.base.defaults

    stdlib = {"__future__", "bisect", "collections", "collections.abc", "dataclasses", "enum", "typing"}
    package = Path(scheduler.__file__).parent
    siblings = {f"engine.scheduler.{p.stem}" for p in package.glob("*.py")}
    for module in package.glob("*.py"):
        assert _imports(str(module)) <= stdlib | siblings | {"engine.base.defaults"}, module.name
    assert _imports(engine.base.defaults.__file__) == set(), "the defaults the scheduler reads import nothing"


def test_defaults_of_the_reference() -> None:
    assert (DEFAULT_N_BATCH, DEFAULT_N_UBATCH, DEFAULT_PREFILL_QUANTUM, DEFAULT_COMMAND_QUEUE) == (
        512,
        512,
        512,
        32,
    )
    assert SIMILARITY_THRESHOLD == 0.1
    assert BatchPlanner().prefill_quantum == DEFAULT_PREFILL_QUANTUM


# --------------------------------------------------------------------- prompt layout


def test_position_has_logical_and_native_coordinates_differing_only_after_media() -> None:
    prompt = layout(text(1, 2, 3), CAT, text(4, 5))
    assert prompt.logical_tokens == 3 + 16 + 2
    assert prompt.native_positions == 3 + 4 + 2
    assert prompt.boundary_at(2) == B(2, 2)
    assert prompt.boundary_at(19) == B(19, 7)
    assert prompt.boundary_at(20) == B(20, 8)
    assert prompt.end == B(21, 9)


def test_layout_is_a_list_of_text_and_media_segments_normalised() -> None:
    prompt = layout(text(1), text(), text(2, 3), CAT, text(), CAT, text(4))
    assert prompt.segments == (text(1, 2, 3), CAT, CAT, text(4))
    assert prompt == layout(text(1, 2), text(3), CAT, CAT, text(4))
    assert PromptLayout.from_tokens([1, 2, 3]) == layout(text(1, 2, 3))
    assert PromptLayout().logical_tokens == 0
    assert PromptLayout.from_tokens([]).segments == ()
    assert prompt.media_count == 2
    with pytest.raises(ValueError):
        MediaSegment("image", 0, 0)
    with pytest.raises(TypeError):
        PromptLayout((1, 2))  # type: ignore[arg-type]


def test_media_identity_makes_the_same_picture_match_across_requests() -> None:
    first = layout(text(1), MediaSegment("image/png:4x4:abc", 16, 4), text(2))
    second = layout(text(1), MediaSegment("image/png:4x4:abc", 16, 4), text(2))
    assert first.common_prefix(second) == first.end


def test_common_prefix_text_vs_text_counts_equal_leading_tokens_and_stops_at_first_difference() -> None:
    a = tokens(10)
    b = PromptLayout.from_tokens([0, 1, 2, 99, 4, 5, 6, 7, 8, 9])
    assert a.common_prefix(b) == B(3, 3)
    assert a.common_prefix(tokens(4)) == B(4, 4)  # one is a prefix of the other
    assert a.common_prefix(a) == a.end
    assert a.common_prefix(PromptLayout()) == ZERO_BOUNDARY
    assert a.common_prefix(tokens(10, start=1)) == ZERO_BOUNDARY


def test_common_prefix_of_long_text_finds_a_late_difference() -> None:
    a = tokens(5000)
    late = list(range(5000))
    late[4321] = -1
    assert a.common_prefix(PromptLayout.from_tokens(late)) == B(4321, 4321)


def test_common_prefix_media_vs_media_matches_whole_span_when_identity_and_sizes_are_equal() -> None:
    a = layout(text(1, 2), CAT, text(3, 4))
    b = layout(text(1, 2), CAT, text(3, 9))
    assert a.common_prefix(b) == B(2 + 16 + 1, 2 + 4 + 1)


@pytest.mark.parametrize(
    "other",
    [
        DOG,  # different identity
        MediaSegment(CAT.identity, 17, 4),  # different logical size
        MediaSegment(CAT.identity, 16, 5),  # different native size
    ],
    ids=["identity", "logical-size", "native-size"],
)
def test_common_prefix_media_vs_media_stops_unless_identity_and_both_sizes_are_equal(
    other: MediaSegment,
) -> None:
    a = layout(text(1, 2), CAT, text(3))
    b = layout(text(1, 2), other, text(3))
    assert a.common_prefix(b) == B(2, 2)


def test_common_prefix_text_vs_media_stops() -> None:
    a = layout(text(1, 2), CAT)
    b = layout(text(1, 2, 3))
    assert a.common_prefix(b) == B(2, 2)
    assert b.common_prefix(a) == B(2, 2)
    assert layout(CAT).common_prefix(layout(text(1))) == ZERO_BOUNDARY


def test_common_prefix_stops_when_a_text_run_ends_before_media_on_one_side() -> None:
    a = layout(text(1, 2), CAT)
    b = layout(text(1, 2, 3), CAT)
    assert a.common_prefix(b) == B(2, 2)


def test_cache_boundary_never_splits_media_invalid_for_truncation() -> None:
    prompt = layout(text(1, 2), CAT, text(3))
    assert not prompt.is_boundary(5)
    assert prompt.is_boundary(2) and prompt.is_boundary(18) and prompt.is_boundary(1)
    with pytest.raises(SplitsMedia):
        prompt.boundary_at(5)
    with pytest.raises(SplitsMedia):
        prompt.prefix(10)
    with pytest.raises(ValueError):
        prompt.truncate(B(5, 3))
    assert prompt.prefix(18) == layout(text(1, 2), CAT)
    assert prompt.prefix(2) == layout(text(1, 2))


def test_cache_boundary_inside_media_advances_to_end_of_span_for_checkpoints() -> None:
    prompt = layout(text(1, 2), CAT, text(3))
    assert prompt.boundary_at(5, MediaSnap.END) == B(18, 6)
    assert prompt.boundary_at(5, MediaSnap.START) == B(2, 2)
    assert prompt.boundary_at(2, MediaSnap.END) == B(2, 2)  # at the start: not inside


def test_boundary_outside_the_prompt_is_rejected() -> None:
    prompt = tokens(3)
    assert not prompt.is_boundary(4)
    with pytest.raises(ValueError):
        prompt.boundary_at(-1)
    with pytest.raises(ValueError):
        prompt.truncate(B(2, 3))  # inconsistent native position


def test_extend_records_generated_tokens_after_the_prompt() -> None:
    prompt = layout(text(1), CAT, text(2))
    assert prompt.extend([3, 4]) == layout(text(1), CAT, text(2, 3, 4))
    assert layout(CAT).extend([5]).end == B(17, 5)
    assert prompt.extend([]) is prompt
    assert prompt.concat(layout(DOG)) == layout(text(1), CAT, text(2), DOG)


def test_remaining_after_a_boundary_is_text_runs_and_media_items() -> None:
    prompt = layout(text(1, 2, 3), CAT, text(4, 5), DOG)
    assert prompt.remaining_after(B(1, 1)) == (
        TextRun(B(1, 1), (2, 3)),
        MediaItem(B(3, 3), CAT),
        TextRun(B(19, 7), (4, 5)),
        MediaItem(B(21, 9), DOG),
    )
    assert prompt.remaining_after(B(19, 7))[0] == TextRun(B(19, 7), (4, 5))
    assert prompt.remaining_after(prompt.end) == ()
    with pytest.raises(ValueError):
        prompt.remaining_after(B(5, 3))


segments_strategy = st.lists(
    st.one_of(
        st.lists(st.integers(0, 3), max_size=6).map(lambda t: TextSegment(tuple(t))),
        st.sampled_from([CAT, DOG]),
    ),
    max_size=5,
).map(PromptLayout)


@given(segments_strategy, segments_strategy)
def test_common_prefix_is_symmetric_and_always_a_boundary_of_both(a: PromptLayout, b: PromptLayout) -> None:
    common = a.common_prefix(b)
    assert common == b.common_prefix(a)
    assert a.boundary_at(common.logical_tokens) == common
    assert b.boundary_at(common.logical_tokens) == common
    assert a.truncate(common) == b.truncate(common)


@given(segments_strategy, st.data())
def test_any_boundary_splits_the_layout_into_prefix_and_remaining_work(
    prompt: PromptLayout, data: st.DataObject
) -> None:
    n = data.draw(st.integers(0, prompt.logical_tokens))
    boundary = prompt.boundary_at(n, MediaSnap.START)
    assert prompt.is_boundary(boundary.logical_tokens)
    rebuilt = prompt.truncate(boundary)
    for item in prompt.remaining_after(boundary):
        assert item.start == rebuilt.end
        if isinstance(item, TextRun):
            rebuilt = rebuilt.extend(item.tokens)
        else:
            rebuilt = rebuilt.concat(layout(item.segment))
    assert rebuilt == prompt


# --------------------------------------------------------------------- sequence pool


def test_sequence_ids_are_0_to_n_minus_1() -> None:
    pool = SequencePool(4)
    ids = {acquire(pool, tokens(3)).sequence_id for _ in range(4)}
    assert ids == {0, 1, 2, 3}
    assert pool.counts() == scheduler.PoolCounts(available=0, active=4, quarantined=0)
    with pytest.raises(ValueError):
        SequencePool(0)
    with pytest.raises(ValueError):
        pool.state(4)


def test_an_active_sequence_belongs_to_exactly_one_request() -> None:
    pool = SequencePool(2)
    first, second = acquire(pool, tokens(3)), acquire(pool, tokens(3))
    assert first.sequence_id != second.sequence_id
    assert pool.state(first.sequence_id) is SequenceState.ACTIVE
    pool.release(first.sequence_id)
    with pytest.raises(ValueError):
        pool.release(first.sequence_id)  # released twice


def test_release_puts_sequence_at_front_and_back_is_least_recently_used() -> None:
    pool = SequencePool(3)
    assert pool.available_ids() == (0, 1, 2)
    taken = [pool.acquire_lru() for _ in range(3)]
    assert [a.sequence_id for a in taken if a] == [2, 1, 0]
    pool.release(1)
    pool.release(2)
    pool.release(0)
    assert pool.available_ids() == (0, 2, 1)  # front: most recent; back: LRU
    lru = pool.acquire_lru()
    assert lru is not None and lru.sequence_id == 1


def test_acquire_matching_takes_longest_common_prefix_above_threshold() -> None:
    prompt = tokens(100)
    pool = pool_with([tokens(30), tokens(80), tokens(50), tokens(5, start=500)])
    acquisition = acquire(pool, prompt)
    assert acquisition.sequence_id == 1
    assert acquisition.matched
    assert acquisition.cached == B(80, 80)
    assert acquisition.truncate_from == 80


def test_similarity_exactly_0_1_is_not_a_match() -> None:
    # Sequence 1 (the most recent) shares exactly 10 of 100 tokens: not a match, so the
    # LRU (sequence 0) is taken.
    pool = pool_with([None, tokens(10)])
    acquisition = acquire(pool, tokens(100))
    assert acquisition.sequence_id == 0
    assert not acquisition.matched
    pool = pool_with([None, PromptLayout.from_tokens([0, 1, 2, 3])])
    assert not acquire(pool, tokens(40)).matched  # 4/40 == 0.1 as well


def test_similarity_just_above_threshold_is_a_match() -> None:
    pool = pool_with([None, tokens(11)])
    acquisition = acquire(pool, tokens(100))
    assert acquisition.sequence_id == 1
    assert acquisition.matched and acquisition.cached == B(11, 11)


def test_equal_common_prefixes_tie_break_to_the_more_recently_used() -> None:
    pool = pool_with([tokens(60), tokens(60, start=0).extend([7]), None])
    # Both share 60 tokens with the prompt; sequence 1 was released after sequence 0.
    assert acquire(pool, tokens(100)).sequence_id == 1


def test_without_a_match_the_least_recently_used_sequence_is_taken() -> None:
    pool = pool_with([tokens(5, start=900), tokens(5, start=800), tokens(5, start=700)])
    acquisition = acquire(pool, tokens(100))
    assert acquisition.sequence_id == 0
    assert not acquisition.matched and acquisition.cached == ZERO_BOUNDARY


def test_lru_fallback_still_reuses_the_prefix_it_shares() -> None:
    # Below the threshold the choice is the LRU, but the KV it holds is still valid.
    pool = pool_with([tokens(5), None])
    acquisition = acquire(pool, tokens(100))
    assert acquisition.sequence_id == 0
    assert not acquisition.matched and acquisition.cached == B(5, 5)


def test_empty_prompt_takes_the_lru_sequence() -> None:
    pool = pool_with([tokens(10), tokens(10)])
    acquisition = acquire(pool, PromptLayout())
    assert acquisition.sequence_id == 0
    assert acquisition.cached == ZERO_BOUNDARY


def test_uncached_request_takes_lru_so_the_hottest_prefix_survives() -> None:
    pool = pool_with([tokens(10, start=100), tokens(50)])  # sequence 1 is the hottest
    acquisition = pool.acquire_lru()
    assert acquisition is not None and acquisition.sequence_id == 0
    assert acquisition.cached == ZERO_BOUNDARY and acquisition.truncate_from == 0
    assert pool.prefix(1) == ReusablePrefix(tokens(50))


def test_full_prompt_cached_steps_back_one_token() -> None:
    pool = pool_with([tokens(20)])
    acquisition = acquire(pool, tokens(20))
    assert acquisition.cached == B(19, 19)
    assert acquisition.truncate_from == 19
    pool = pool_with([tokens(1)])
    assert acquire(pool, tokens(1)).cached == ZERO_BOUNDARY


def test_step_back_never_leaves_the_cached_boundary_inside_media() -> None:
    prompt = layout(text(1, 2), CAT)
    pool = pool_with([prompt])
    acquisition = acquire(pool, prompt)
    assert acquisition.cached == B(2, 2)  # the whole image is evaluated again


def test_admission_removes_kv_from_the_cached_native_position() -> None:
    held = layout(text(1, 2), CAT, text(3, 4), DOG)
    prompt = layout(text(1, 2), CAT, text(3, 4, 5))
    pool = pool_with([held])
    acquisition = acquire(pool, prompt)
    assert acquisition.cached == B(20, 8)
    assert acquisition.truncate_from == 8  # native, not logical


def test_acquisition_keeps_the_prefix_and_checkpoints_for_the_recurrent_fallback() -> None:
    held = layout(text(1, 2), CAT, text(3, 4, 5))
    checkpoints = (
        Checkpoint(held.boundary_at(1), "s1"),
        Checkpoint(held.boundary_at(5, MediaSnap.END), "s18"),
        Checkpoint(held.boundary_at(20), "s20"),
    )
    pool = SequencePool(1)
    pool.acquire_lru()
    pool.release(0, ReusablePrefix(held, checkpoints))
    acquisition = acquire(pool, layout(text(1, 2), CAT, text(3, 9)))
    assert acquisition.cached == B(19, 7)
    assert acquisition.prefix is not None
    checkpoint = acquisition.prefix.checkpoint_at_or_before(acquisition.cached)
    assert checkpoint is not None and checkpoint.state == "s18" and checkpoint.boundary == B(18, 6)
    fallback = acquisition.with_cached(checkpoint.boundary)
    assert fallback.truncate_from == 6 and fallback.sequence_id == 0
    assert acquisition.with_cached(ZERO_BOUNDARY).truncate_from == 0
    with pytest.raises(ValueError):
        acquisition.with_cached(B(20, 8))
    assert acquisition.prefix.checkpoint_at_or_before(ZERO_BOUNDARY) is None
    with pytest.raises(ValueError):
        ReusablePrefix(held, (Checkpoint(B(5, 3), None),))  # inside the image


def test_context_reset_invalidates_every_reusable_prefix() -> None:
    pool = pool_with([tokens(50), tokens(60), None])
    busy = acquire(pool, tokens(3, start=900))
    pool.invalidate_all()
    assert all(info.reusable_tokens == 0 for info in pool.snapshot())
    assert not acquire(pool, tokens(60)).matched
    # A sequence that was active during the reset holds no valid KV either.
    pool.release(busy.sequence_id, tokens(60))
    assert pool.prefix(busy.sequence_id) is None


def test_invalidate_one_sequence() -> None:
    pool = pool_with([tokens(50), tokens(50)])
    pool.invalidate(1)
    assert pool.prefix(1) is None and pool.prefix(0) is not None
    active = acquire(pool, tokens(50))
    pool.invalidate(active.sequence_id)
    pool.release(active.sequence_id, tokens(50))
    assert pool.prefix(active.sequence_id) is None


def test_quarantine_retires_a_sequence_id_forever() -> None:
    pool = SequencePool(3)
    failing = acquire(pool, tokens(5))
    pool.quarantine(failing.sequence_id)
    pool.quarantine(failing.sequence_id)  # idempotent
    assert pool.counts() == scheduler.PoolCounts(available=2, active=0, quarantined=1)
    assert pool.capacity == 2 and pool.size == 3
    assert pool.state(failing.sequence_id) is SequenceState.QUARANTINED
    with pytest.raises(ValueError):
        pool.release(failing.sequence_id)
    taken = {acquire(pool, tokens(5)).sequence_id for _ in range(2)}
    assert failing.sequence_id not in taken
    assert pool.acquire_matching(tokens(5)) is None
    pool.release(taken.pop(), tokens(5))
    idle = pool.available_ids()[0]
    pool.quarantine(idle)  # an available one can be retired too
    assert pool.quarantined == 2 and pool.available == 0 and pool.active == 1


def test_no_available_sequence_returns_none() -> None:
    pool = SequencePool(1)
    assert pool.acquire_lru() is not None
    assert pool.acquire_matching(tokens(5)) is None
    assert pool.acquire_lru() is None
    assert pool.acquire_matching(PromptLayout()) is None


def test_release_empty_prefix_records_nothing() -> None:
    pool = SequencePool(1)
    pool.acquire_lru()
    pool.release(0, PromptLayout())
    assert pool.prefix(0) is None


def test_finished_request_returns_its_sequence_with_prompt_and_reply_as_reusable_prefix() -> None:
    # Beats the reference: turn 2 reuses turn 1's prompt *and* reply.
    pool = SequencePool(2)
    turn1 = tokens(30)
    acquisition = acquire(pool, turn1)
    state = SequenceProgress.admit(acquisition.sequence_id, turn1, acquisition.cached)
    progress = {state.sequence_id: state}
    run_to_logits(progress)
    for token in (100, 101, 102):
        state.push(token)
        BatchCommit.stage(BatchPlanner().plan(candidates_of(progress), 8).work, progress).apply(progress)
    # The last sampled token (e.g. end of turn) was never decoded, so it is not in KV.
    pool.release(state.sequence_id, state.reusable_prefix())
    turn2 = turn1.extend([100, 101, 102, 7, 8, 9])
    again = acquire(pool, turn2)
    assert again.sequence_id == acquisition.sequence_id
    assert again.cached == B(33, 33)


# ---------------------------------------------------------------------- batch planner


def ids(plan: BatchPlan) -> list[tuple[int, WorkKind, int]]:
    return [(w.sequence_id, w.kind, w.n_tokens) for w in plan.work]


def test_decode_first_one_row_per_sequence_sorted_by_sequence_id() -> None:
    planner = BatchPlanner(prefill_quantum=4)
    plan = planner.plan(
        [Candidate(3, PREFILL, 10), Candidate(5, DECODE), Candidate(0, PREFILL, 2), Candidate(1, DECODE)],
        capacity=8,
    )
    assert ids(plan)[:2] == [(1, DECODE, 1), (5, DECODE, 1)]
    assert plan.decode_rows == 2 and plan.prefill_rows == 6 and plan.n_rows == 8


def test_decode_rows_only_while_capacity_remains() -> None:
    plan = BatchPlanner().plan([Candidate(i, DECODE) for i in (4, 2, 0, 3)], capacity=2)
    assert ids(plan) == [(0, DECODE, 1), (2, DECODE, 1)]
    assert BatchPlanner().plan([Candidate(0, DECODE)], capacity=0).is_empty


def test_draft_rows_count_against_capacity() -> None:
    plan = BatchPlanner().plan([Candidate(0, DECODE, draft_rows=3), Candidate(1, PREFILL, 100)], capacity=10)
    assert ids(plan) == [(0, DECODE, 4), (1, PREFILL, 6)]


def test_every_pending_row_comes_before_any_draft_row_and_drafts_are_cut_to_fit() -> None:
    candidates = [Candidate(i, DECODE, draft_rows=3) for i in range(4)]
    assert ids(BatchPlanner().plan(candidates, capacity=4)) == [(i, DECODE, 1) for i in range(4)]
    assert ids(BatchPlanner().plan(candidates, capacity=9)) == [
        (0, DECODE, 4),
        (1, DECODE, 3),
        (2, DECODE, 1),
        (3, DECODE, 1),
    ]


def test_prefill_rotation_starts_at_cursor_mod_n_and_advances_by_one_each_tick() -> None:
    planner = BatchPlanner(prefill_quantum=4)
    candidates = [Candidate(i, PREFILL, 100) for i in (7, 2, 5)]  # sorted: 2, 5, 7
    leaders = [planner.plan(candidates, capacity=4).work[0].sequence_id for _ in range(7)]
    assert leaders == [2, 5, 7, 2, 5, 7, 2]


def test_prefill_rotation_skips_nobody_when_sequences_join_or_leave() -> None:
    planner = BatchPlanner(prefill_quantum=1)
    assert planner.plan([Candidate(i, PREFILL, 9) for i in (0, 1, 2)], 1).work[0].sequence_id == 0
    assert planner.plan([Candidate(i, PREFILL, 9) for i in (0, 1, 2)], 1).work[0].sequence_id == 1
    # Sequence 1 finished its prompt and 3 arrived: the turn passes to 2, not back to 0.
    assert planner.plan([Candidate(i, PREFILL, 9) for i in (0, 2, 3)], 1).work[0].sequence_id == 2
    assert planner.plan([Candidate(i, PREFILL, 9) for i in (0, 2, 3)], 1).work[0].sequence_id == 3
    assert planner.plan([Candidate(i, PREFILL, 9) for i in (0, 2, 3)], 1).work[0].sequence_id == 0


def test_prefill_cursor_does_not_advance_when_decodes_take_every_row() -> None:
    planner = BatchPlanner(prefill_quantum=4)
    prefills = [Candidate(1, PREFILL, 50), Candidate(2, PREFILL, 50)]
    assert planner.plan([*prefills, Candidate(0, DECODE)], capacity=1).prefill_rows == 0
    assert planner.plan(prefills, capacity=4).work[0].sequence_id == 1  # still its turn


def test_prefill_quanta_are_round_robin_with_passes_while_capacity_remains() -> None:
    plan = BatchPlanner(prefill_quantum=4).plan(
        [Candidate(0, PREFILL, 10), Candidate(1, PREFILL, 3), Candidate(2, PREFILL, 9)], capacity=20
    )
    # Pass 1: 4, 3, 4; pass 2: 4, -, 4; pass 3: 1 (what is left of the capacity).
    assert ids(plan) == [(0, PREFILL, 9), (1, PREFILL, 3), (2, PREFILL, 8)]


def test_prefill_never_gives_a_sequence_more_than_it_needs() -> None:
    plan = BatchPlanner(prefill_quantum=512).plan([Candidate(0, PREFILL, 3), Candidate(1, PREFILL, 0)], 512)
    assert ids(plan) == [(0, PREFILL, 3)]


def test_a_sequence_appears_once_with_its_rows_contiguous() -> None:
    plan = BatchPlanner(prefill_quantum=1).plan([Candidate(i, PREFILL, 5) for i in range(3)], capacity=12)
    assert ids(plan) == [(0, PREFILL, 4), (1, PREFILL, 4), (2, PREFILL, 4)]


def test_duplicate_or_invalid_candidates_are_rejected() -> None:
    with pytest.raises(ValueError):
        BatchPlanner().plan([Candidate(0, DECODE), Candidate(0, PREFILL, 3)], 8)
    with pytest.raises(ValueError):
        Candidate(0, PREFILL, 3, draft_rows=1)
    with pytest.raises(ValueError):
        Candidate(0, PREFILL, -1)
    with pytest.raises(ValueError):
        BatchPlanner().plan([], -1)
    with pytest.raises(ValueError):
        BatchPlanner(prefill_quantum=0)


def test_media_is_its_own_step_one_per_tick_round_robin_never_in_the_token_batch() -> None:
    planner = BatchPlanner()
    candidates = [
        Candidate(4, MEDIA, 16),
        Candidate(1, MEDIA, 16),
        Candidate(2, DECODE),
        Candidate(3, PREFILL, 5),
    ]
    chosen = []
    for _ in range(3):
        plan = planner.plan(candidates, capacity=512)
        assert all(w.kind is not MEDIA for w in plan.work)
        assert ids(plan) == [(2, DECODE, 1), (3, PREFILL, 5)]
        assert plan.media is not None
        chosen.append(plan.media.sequence_id)
    assert chosen == [1, 4, 1]
    assert planner.plan([Candidate(1, MEDIA, 16)], capacity=0).media == BatchWork(1, MEDIA, 16)


# ---------------------------------------------------------- planner property tests


def candidate_sets(max_sequences: int = 8) -> st.SearchStrategy[list[Candidate]]:
    def build(draw_ids: list[int], data: list[tuple[int, int, int]]) -> list[Candidate]:
        result = []
        for sequence_id, (kind, remaining, drafts) in zip(draw_ids, data, strict=False):
            if kind == 0:
                result.append(Candidate(sequence_id, DECODE, 1, drafts))
            elif kind == 1:
                result.append(Candidate(sequence_id, PREFILL, remaining))
            else:
                result.append(Candidate(sequence_id, MEDIA, remaining))
        return result

    return st.builds(
        build,
        st.lists(st.integers(0, max_sequences - 1), unique=True, max_size=max_sequences),
        st.lists(
            st.tuples(st.integers(0, 2), st.integers(0, 2000), st.integers(0, 6)),
            min_size=max_sequences,
            max_size=max_sequences,
        ),
    )


@settings(max_examples=300, deadline=None)
@given(candidate_sets(), st.integers(0, 1100), st.integers(1, 600))
def test_property_plan_never_exceeds_capacity_never_overfeeds_and_decodes_first(
    candidates: list[Candidate], capacity: int, quantum: int
) -> None:
    plan = BatchPlanner(quantum).plan(candidates, capacity)
    by_id = {c.sequence_id: c for c in candidates}
    assert plan.n_rows <= capacity
    seen = [w.sequence_id for w in plan.work]
    assert len(seen) == len(set(seen))
    kinds = [w.kind for w in plan.work]
    assert kinds == sorted(kinds, key=lambda k: k is not DECODE)  # decodes first
    decode_ids = [w.sequence_id for w in plan.work if w.kind is DECODE]
    assert decode_ids == sorted(decode_ids)
    for work in plan.work:
        candidate = by_id[work.sequence_id]
        assert work.kind is candidate.kind and work.n_tokens >= 1
        if work.kind is DECODE:
            assert work.n_tokens <= 1 + candidate.draft_rows
        else:
            assert work.n_tokens <= candidate.remaining
    n_decodes = sum(c.kind is DECODE for c in candidates)
    assert plan.decode_rows >= min(n_decodes, capacity)  # every decode's pending row first
    needed = sum(c.remaining for c in candidates if c.kind is PREFILL)
    spare = capacity - plan.decode_rows
    assert plan.prefill_rows == min(needed, spare)  # work-conserving
    if any(c.kind is MEDIA for c in candidates):
        assert plan.media is not None and by_id[plan.media.sequence_id].kind is MEDIA
    else:
        assert plan.media is None


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 8),
    st.integers(1, 64),
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 48)), min_size=40, max_size=120),
)
def test_property_no_prefill_sequence_waits_more_than_n_ticks_for_a_quantum(
    n: int, quantum: int, ticks: list[tuple[int, int]]
) -> None:
    """A fixed set of n prefilling sequences, with decodes competing for a random capacity."""
    planner = BatchPlanner(quantum)
    waiting = dict.fromkeys(range(n), 0)
    for decodes, spare in ticks:
        candidates = [Candidate(i, PREFILL, 10_000) for i in range(n)]
        candidates += [Candidate(100 + i, DECODE) for i in range(decodes)]
        plan = planner.plan(candidates, capacity=decodes + spare)
        if spare == 0:
            assert plan.prefill_rows == 0
            continue  # a tick with no room for prefill costs nobody a turn
        served = {w.sequence_id for w in plan.work if w.kind is PREFILL}
        for sequence_id in waiting:
            waiting[sequence_id] = 0 if sequence_id in served else waiting[sequence_id] + 1
            assert waiting[sequence_id] < n


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.integers(1, 32), st.data())
def test_property_no_starvation_while_sequences_join_finish_and_decode(
    pool_size: int, quantum: int, data: st.DataObject
) -> None:
    """Simulate many ticks: prompts arrive, are prefilled, then decode; capacity varies.

    A sequence waiting to prefill gets a quantum within ``pool_size`` ticks that had rows
    to spare for prefill, however the set of candidates changes around it.
    """
    planner = BatchPlanner(quantum)
    prefill: dict[int, int] = {}  # sequence -> tokens left
    decoding: dict[int, int] = {}  # sequence -> tokens left to generate
    waiting: dict[int, int] = {}
    for _ in range(data.draw(st.integers(30, 150), label="ticks")):
        for sequence_id in range(pool_size):
            if sequence_id not in prefill and sequence_id not in decoding and data.draw(st.booleans()):
                prefill[sequence_id] = data.draw(st.integers(1, 200))
                waiting[sequence_id] = 0
        candidates = [Candidate(s, PREFILL, left) for s, left in prefill.items()]
        candidates += [Candidate(s, DECODE, 1, data.draw(st.integers(0, 3))) for s in decoding]
        capacity = data.draw(st.integers(0, 96), label="capacity")
        plan = planner.plan(candidates, capacity)
        assert plan.n_rows <= capacity
        spare = capacity - plan.decode_rows
        served = {w.sequence_id: w.n_tokens for w in plan.work if w.kind is PREFILL}
        for sequence_id in list(prefill):
            if sequence_id in served:
                waiting[sequence_id] = 0
                prefill[sequence_id] -= served[sequence_id]
                assert prefill[sequence_id] >= 0
                if not prefill[sequence_id]:
                    del prefill[sequence_id]
                    decoding[sequence_id] = data.draw(st.integers(1, 5))
            elif spare > 0:
                waiting[sequence_id] += 1
                assert waiting[sequence_id] < pool_size
        for work in plan.work:
            if work.kind is DECODE:
                decoding[work.sequence_id] -= 1
                if not decoding[work.sequence_id]:
                    del decoding[work.sequence_id]


# ----------------------------------------------------------------- progress / commit


def candidates_of(progress: dict[int, SequenceProgress]) -> list[Candidate]:
    return [c for p in progress.values() if (c := p.candidate()) is not None]


def run_to_logits(progress: dict[int, SequenceProgress], capacity: int = 64) -> dict[int, range]:
    """Tick until every sequence has finished its prompt; media steps are 'evaluated' too."""
    planner = BatchPlanner(prefill_quantum=8)
    logits: dict[int, range] = {}
    for _ in range(1000):
        candidates = candidates_of(progress)
        if not candidates:
            return logits
        plan = planner.plan(candidates, capacity)
        logits |= BatchCommit.stage(plan.work, progress).apply(progress)
        if plan.media:
            logits |= BatchCommit.stage_media(plan.media, progress).apply(progress)
    raise AssertionError("prefill did not finish")


def test_sequence_progress_walks_prefill_media_sample_decode() -> None:
    prompt = layout(text(1, 2, 3), CAT, text(4))
    state = SequenceProgress.admit(0, prompt, ZERO_BOUNDARY)
    assert state.phase is SequencePhase.PREFILL and state.candidate() == Candidate(0, PREFILL, 3)
    progress = {0: state}
    BatchCommit.stage([BatchWork(0, PREFILL, 3)], progress).apply(progress)
    assert state.phase is SequencePhase.MEDIA and state.candidate() == Candidate(0, MEDIA, 16)
    assert state.next_item() == MediaItem(B(3, 3), CAT)
    media = BatchCommit.stage_media(BatchWork(0, MEDIA, 16), progress)
    assert media.entries[0].position == 3 and media.n_rows == 0
    assert media.apply(progress) == {}
    assert state.cursor == B(19, 7) and state.candidate() == Candidate(0, PREFILL, 1)
    assert BatchCommit.stage([BatchWork(0, PREFILL, 1)], progress).apply(progress) == {0: range(0, 1)}
    assert state.phase is SequencePhase.SAMPLE and state.candidate() is None and state.next_item() is None
    state.push(42, drafts=[43, 44])
    assert state.candidate() == Candidate(0, DECODE, 1, 2)
    assert state.n_past == 8


def test_admission_rejects_an_empty_prompt_or_a_boundary_that_is_not_reusable() -> None:
    with pytest.raises(ValueError):
        SequenceProgress.admit(0, PromptLayout(), ZERO_BOUNDARY)
    with pytest.raises(ValueError):
        SequenceProgress.admit(0, tokens(4), B(4, 4))  # the last token must be decoded
    with pytest.raises(ValueError):
        SequenceProgress.admit(0, layout(text(1), CAT, text(2)), B(5, 3))


def test_batch_rows_are_consecutive_positions_with_logits_on_prompt_end_and_decode_rows() -> None:
    a = SequenceProgress.admit(0, tokens(5), B(2, 2))
    b = SequenceProgress.admit(1, tokens(3, start=50), ZERO_BOUNDARY)
    c = SequenceProgress.admit(2, tokens(4, start=70), B(1, 1))
    c.cursor = c.prompt.end  # pretend its prompt is in
    c.generated = [9]
    c.push(10, drafts=(11, 12))
    progress = {0: a, 1: b, 2: c}
    plan = BatchPlanner(prefill_quantum=8).plan(candidates_of(progress), 7)
    commit = BatchCommit.stage(plan.work, progress)
    rows = [(r.sequence_id, r.token, r.position, r.logits) for r in commit.rows()]
    assert rows == [
        (2, 10, 5, True),
        (2, 11, 6, True),
        (2, 12, 7, True),
        (0, 2, 2, False),
        (0, 3, 3, False),
        (0, 4, 4, True),  # a's last prompt token
        (1, 50, 0, False),  # b's prompt continues next tick: no logits yet
    ]
    assert commit.n_rows == 7
    assert a.cursor == B(2, 2) and c.pending == 10  # nothing changes before apply
    logits = commit.apply(progress)
    assert logits == {2: range(0, 3), 0: range(5, 6)}
    assert commit.state is CommitState.APPLIED
    assert a.prompt_done and b.cursor == B(1, 1)
    assert c.generated == [9, 10, 11, 12] and c.pending is None and c.n_past == 8


def test_failed_decode_discards_the_commit_and_changes_nothing() -> None:
    state = SequenceProgress.admit(0, tokens(5), ZERO_BOUNDARY)
    progress = {0: state}
    commit = BatchCommit.stage([BatchWork(0, PREFILL, 5)], progress)
    commit.discard()
    assert commit.state is CommitState.DISCARDED and state.cursor == ZERO_BOUNDARY
    with pytest.raises(StaleCommit):
        commit.apply(progress)
    retry = BatchCommit.stage([BatchWork(0, PREFILL, 5)], progress)
    assert retry.apply(progress) == {0: range(4, 5)}
    with pytest.raises(StaleCommit):
        retry.apply(progress)
    with pytest.raises(StaleCommit):
        retry.discard()


def test_a_stale_commit_changes_nothing() -> None:
    a = SequenceProgress.admit(0, tokens(5), ZERO_BOUNDARY)
    b = SequenceProgress.admit(1, tokens(5), ZERO_BOUNDARY)
    progress = {0: a, 1: b}
    first = BatchCommit.stage([BatchWork(0, PREFILL, 2), BatchWork(1, PREFILL, 2)], progress)
    second = BatchCommit.stage([BatchWork(1, PREFILL, 2)], progress)
    second.apply(progress)
    with pytest.raises(StaleCommit):
        first.apply(progress)
    assert a.cursor == ZERO_BOUNDARY and b.cursor == B(2, 2)


def test_staging_rejects_work_a_sequence_does_not_have() -> None:
    state = SequenceProgress.admit(0, layout(text(1, 2), CAT), ZERO_BOUNDARY)
    progress = {0: state}
    with pytest.raises(ValueError):
        BatchCommit.stage([BatchWork(0, PREFILL, 3)], progress)  # crosses into the image
    with pytest.raises(ValueError):
        BatchCommit.stage([BatchWork(0, DECODE, 1)], progress)
    with pytest.raises(ValueError):
        BatchCommit.stage([BatchWork(0, MEDIA, 16)], progress)
    with pytest.raises(ValueError):
        BatchCommit.stage_media(BatchWork(0, MEDIA, 16), progress)  # text is next
    with pytest.raises(ValueError):
        state.push(1)  # still prefilling


def test_media_step_that_ends_the_prompt_asks_for_its_last_logits() -> None:
    state = SequenceProgress.admit(3, layout(text(1), CAT), B(1, 1))
    progress = {3: state}
    assert BatchCommit.stage_media(BatchWork(3, MEDIA, 16), progress).apply(progress) == {3: range(-1, 0)}
    assert state.phase is SequencePhase.SAMPLE


def test_rejected_drafts_are_removed_from_progress_and_kv() -> None:
    state = SequenceProgress.admit(0, tokens(4), ZERO_BOUNDARY)
    progress = {0: state}
    run_to_logits(progress)
    state.push(10, drafts=(11, 12, 13))
    BatchCommit.stage([BatchWork(0, DECODE, 4)], progress).apply(progress)
    assert state.n_past == 8
    # The verifier accepted 11 only: 12 and 13 leave the KV from position 6.
    assert state.discard_rejected(2) == 6
    assert state.generated == [10, 11] and state.phase is SequencePhase.SAMPLE
    assert state.reusable_prefix() == tokens(4).extend([10, 11])
    with pytest.raises(ValueError):
        state.discard_rejected(3)
    state.push(20)
    with pytest.raises(ValueError):
        state.discard_rejected(0)  # only between decode and the next push


def test_drafts_cut_by_the_planner_are_staged_as_a_prefix() -> None:
    state = SequenceProgress.admit(0, tokens(2), ZERO_BOUNDARY)
    progress = {0: state}
    run_to_logits(progress)
    state.push(5, drafts=(6, 7, 8))
    plan = BatchPlanner().plan(candidates_of(progress), capacity=2)
    commit = BatchCommit.stage(plan.work, progress)
    assert commit.entries[0].tokens == (5, 6)
    with pytest.raises(ValueError):
        BatchCommit.stage([BatchWork(0, DECODE, 5)], progress)


def test_reusable_prefix_of_a_request_cancelled_mid_prefill_is_what_reached_kv() -> None:
    state = SequenceProgress.admit(0, layout(text(1, 2, 3), CAT, text(4)), ZERO_BOUNDARY)
    progress = {0: state}
    BatchCommit.stage([BatchWork(0, PREFILL, 2)], progress).apply(progress)
    assert state.reusable_prefix() == layout(text(1, 2))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(segments_strategy.filter(lambda p: p.logical_tokens > 0), min_size=1, max_size=5),
    st.integers(1, 24),
)
def test_property_ticking_prefills_every_prompt_exactly_once_in_order(
    prompts: list[PromptLayout], capacity: int
) -> None:
    progress = {i: SequenceProgress.admit(i, prompt, ZERO_BOUNDARY) for i, prompt in enumerate(prompts)}
    fed: dict[int, list[int]] = {i: [] for i in progress}
    positions: dict[int, list[int]] = {i: [] for i in progress}
    planner = BatchPlanner(prefill_quantum=5)
    logits: dict[int, range] = {}
    for _ in range(500):
        candidates = candidates_of(progress)
        if not candidates:
            break
        plan = planner.plan(candidates, capacity)
        commit = BatchCommit.stage(plan.work, progress)
        assert commit.n_rows <= capacity
        for row in commit.rows():
            fed[row.sequence_id].append(row.token)
            positions[row.sequence_id].append(row.position)
        logits |= commit.apply(progress)
        if plan.media:
            logits |= BatchCommit.stage_media(plan.media, progress).apply(progress)
    assert set(logits) == set(progress)
    for i, prompt in enumerate(prompts):
        assert progress[i].cursor == prompt.end
        text_tokens = [t for seg in prompt.segments if isinstance(seg, TextSegment) for t in seg.tokens]
        assert fed[i] == text_tokens
        expected = [
            item.start.native_position + k
            for item in prompt.remaining_after(ZERO_BOUNDARY)
            if isinstance(item, TextRun)
            for k in range(len(item.tokens))
        ]
        assert positions[i] == expected


# ------------------------------------------------------------------------- admission


@given(
    st.lists(st.integers(0, 3), max_size=300),
    st.lists(st.integers(0, 3), max_size=300),
    st.booleans(),
)
def test_common_token_prefix_matches_a_plain_loop(a: list[int], b: list[int], as_tuple: bool) -> None:
    from engine.scheduler import common_token_prefix

    expected = 0
    while expected < min(len(a), len(b)) and a[expected] == b[expected]:
        expected += 1
    assert common_token_prefix(tuple(a) if as_tuple else a, b) == expected  # list vs tuple too
    assert common_token_prefix(a, a + b) == len(a)


def test_output_rows_never_exceed_the_limit_drafts_are_cut_first() -> None:
    """llama.cpp aborts on a batch with more logit rows than n_outputs_max."""
    candidates = [Candidate(i, DECODE, draft_rows=8) for i in range(4)]
    # 4 sequences x (1 + 2 drafts): what a load with max_draft 2 reserves. The speculator
    # drafts at most 2 per sequence; the planner holds the total even when it is handed more.
    plan = BatchPlanner().plan(candidates, capacity=512, max_outputs=12)
    assert ids(plan) == [(0, DECODE, 9), (1, DECODE, 1), (2, DECODE, 1), (3, DECODE, 1)]
    # A prompt that may finish keeps one output row for its last token.
    plan = BatchPlanner().plan([*candidates[:3], Candidate(3, PREFILL, 100)], capacity=512, max_outputs=8)
    assert plan.decode_rows == 7 and ids(plan)[-1] == (3, PREFILL, 100)
    assert ids(BatchPlanner().plan(candidates, capacity=512, max_outputs=4)) == [
        (i, DECODE, 1) for i in range(4)
    ]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([DECODE, PREFILL]), st.integers(0, 40), st.integers(0, 16)),
        min_size=1,
        max_size=8,
    ),
    st.integers(1, 600),
    st.integers(0, 16),
)
def test_property_outputs_bounded_by_sequences_times_draft_limit(
    work: list[tuple[WorkKind, int, int]], capacity: int, max_draft: int
) -> None:
    """With n_outputs_max = sequences x (1 + max_draft), as Hearth loads, no batch asks for
    more logit rows, however many drafts the candidates bring."""
    candidates = [
        Candidate(i, kind, remaining, draft_rows if kind is DECODE else 0)
        for i, (kind, remaining, draft_rows) in enumerate(work)
    ]
    max_outputs = len(candidates) * (1 + max_draft)
    plan = BatchPlanner().plan(candidates, capacity, max_outputs)
    prefill_items = sum(1 for w in plan.work if w.kind is PREFILL)
    assert plan.decode_rows + prefill_items <= max_outputs
    assert plan.n_rows <= capacity
    # The bound is not bought with tokens: every decode still gets its pending row.
    decoding = [c for c in candidates if c.kind is DECODE]
    assert sum(1 for w in plan.work if w.kind is DECODE) == min(len(decoding), capacity)
