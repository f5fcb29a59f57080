"""The executor's parts that need no model: its inbox and its serving counters."""

from __future__ import annotations

import pytest

from engine.base.errors import Overloaded
from engine.requests.stats import SlotState
from engine.runtime.commands import Cancel, Inbox, Unload
from engine.runtime.serving_stats import RATE_WINDOW, ActiveSlot, BatchRecord, ServingCounters
from engine.scheduler import PromptLayout, SequencePool


def test_inbox_refuses_past_its_limit_and_counts_releases() -> None:
    inbox = Inbox()
    inbox.reserve(2)
    inbox.reserve(2)
    with pytest.raises(Overloaded, match="2 requests are already waiting"):
        inbox.reserve(2)
    inbox.release()
    inbox.reserve(2)  # a released place is free again


def test_inbox_hands_commands_back_in_order_and_drains() -> None:
    inbox = Inbox()
    assert inbox.get(0) is None
    inbox.put(Cancel(1))
    inbox.put(Cancel(2))
    inbox.put(Unload())
    assert inbox.get(0.01) == Cancel(1)
    assert list(inbox.drain()) == [Cancel(2), Unload()]
    assert inbox.get(0) is None


def test_counters_report_each_sequence_state_and_owner() -> None:
    pool = SequencePool(4)
    counters = ServingCounters()
    busy = pool.acquire_lru()
    kept = pool.acquire_lru()
    assert busy is not None and kept is not None
    pool.release(kept.sequence_id, PromptLayout.from_tokens([1, 2, 3]))
    counters.finished(kept.sequence_id, "conversation 7")
    counters.admitted(0)
    counters.admitted(3)
    stats = counters.snapshot(
        pool,
        {busy.sequence_id: ActiveSlot("conversation 9", 5)},
        lambda seq: 10 * seq,
        now=0.0,
        n_ctx=4096,
        n_ctx_per_sequence=1024,
        n_seq=4,
        queue_depth=2,
        drafted=6,
        accepted=4,
    )
    by_id = {s.sequence_id: s for s in stats.sequences}
    assert by_id[busy.sequence_id].state is SlotState.ACTIVE
    assert by_id[busy.sequence_id].owner == "conversation 9"
    assert by_id[busy.sequence_id].reusable_tokens == 5  # what the request took from the cache
    assert by_id[kept.sequence_id].state is SlotState.REUSABLE
    assert by_id[kept.sequence_id].owner == "conversation 7"
    assert by_id[kept.sequence_id].reusable_tokens == 3
    assert {s.state for s in stats.sequences} == {SlotState.ACTIVE, SlotState.REUSABLE, SlotState.EMPTY}
    assert by_id[2].cells_used == 20
    assert (stats.prefix_hits, stats.prefix_misses, stats.tokens_reused) == (1, 1, 3)
    assert (stats.completed_requests, stats.queue_depth, stats.active_requests) == (1, 2, 1)
    assert (stats.drafted_tokens, stats.accepted_tokens) == (6, 4)


def idle_snapshot(counters: ServingCounters, now: float, n_seq: int = 4):
    return counters.snapshot(
        None,
        {},
        lambda _seq: 0,
        now=now,
        n_ctx=0,
        n_ctx_per_sequence=0,
        n_seq=n_seq,
        queue_depth=0,
        drafted=0,
        accepted=0,
    )


def steady_decoding(counters: ServingCounters, start: float, seconds: float, streams: int) -> float:
    """One decode batch of ``streams`` sequences every 10 ms; returns when the last ended."""
    t = start
    while t < start + seconds - 1e-9:
        counters.batch_ran(BatchRecord(t, t + 0.01, streams, 0, streams), 0.001)
        t += 0.01
    return t


def test_counters_rates_cover_only_the_recent_window() -> None:
    counters = ServingCounters()
    counters.batch_ran(BatchRecord(0.0, 0.5, 100, 1000, 4), 0.001)  # falls out of the window
    end = steady_decoding(counters, 10.0, 1.0, streams=2)
    stats = idle_snapshot(counters, end)
    assert stats.decode_tokens_per_second == pytest.approx(200.0)  # 2 streams × 100 batches/s
    assert stats.prefill_tokens_per_second == 0.0
    assert stats.ticks == 101
    assert stats.scheduler_tick_us == pytest.approx(1000.0)


def test_batch_fill_is_sequences_per_recent_batch_over_the_parallel_sequences() -> None:
    counters = ServingCounters()
    end = steady_decoding(counters, 0.0, 1.0, streams=2)
    # Two streams on four sequences: half, although two rows are a sliver of n_batch.
    assert idle_snapshot(counters, end, n_seq=4).batch_fill == pytest.approx(0.5)
    end = steady_decoding(counters, end, RATE_WINDOW + 0.5, streams=1)
    assert idle_snapshot(counters, end, n_seq=4).batch_fill == pytest.approx(0.25)  # only recent batches
    assert idle_snapshot(counters, end + RATE_WINDOW, n_seq=4).batch_fill == 0.0  # idle: nothing decoded


def test_rates_fall_to_zero_within_a_window_of_the_last_batch() -> None:
    counters = ServingCounters()
    end = steady_decoding(counters, 0.0, 5.0, streams=4)
    busy = idle_snapshot(counters, end).decode_tokens_per_second
    assert busy == pytest.approx(400.0, rel=0.01)
    half = idle_snapshot(counters, end + RATE_WINDOW / 2).decode_tokens_per_second
    assert 0.0 < half < busy  # falling, not holding the last value
    assert idle_snapshot(counters, end + RATE_WINDOW).decode_tokens_per_second == 0.0
    assert idle_snapshot(counters, end + 60.0).decode_tokens_per_second == 0.0


def test_a_burst_after_idle_is_measured_over_its_own_length() -> None:
    counters = ServingCounters()
    counters.batch_ran(BatchRecord(0.0, 0.01, 1, 0, 1), 0.001)
    counters.batch_ran(BatchRecord(30.0, 30.5, 0, 500, 1), 0.001)  # one long prefill, just now
    stats = idle_snapshot(counters, 30.5)
    assert stats.prefill_tokens_per_second == pytest.approx(1000.0)  # 500 tokens in 0.5 s, not / 2 s
    assert stats.decode_tokens_per_second == 0.0
