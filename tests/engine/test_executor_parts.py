"""The executor's parts that need no model: its inbox and its serving counters."""

from __future__ import annotations

import pytest

from engine.errors import Overloaded
from engine.executor_commands import Cancel, Inbox, Unload
from engine.requests import SlotState
from engine.scheduler import PromptLayout, SequencePool
from engine.serving_stats import RATE_WINDOW, ActiveSlot, ServingCounters


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
        n_ctx=4096,
        n_ctx_per_sequence=1024,
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


def test_counters_rates_cover_only_the_recent_window() -> None:
    counters = ServingCounters()
    counters.batch_ran(0.0, 100, 1000, 0.5, 0.001)  # falls out of the window
    counters.batch_ran(RATE_WINDOW + 1.0, 4, 0, 0.25, 0.001)
    counters.batch_ran(RATE_WINDOW + 2.0, 4, 0, 0.25, 0.001)
    stats = counters.snapshot(
        None, {}, lambda _seq: 0, n_ctx=0, n_ctx_per_sequence=0, queue_depth=0, drafted=0, accepted=0
    )
    assert stats.decode_tokens_per_second == pytest.approx(8.0)
    assert stats.prefill_tokens_per_second == 0.0
    assert stats.ticks == 3 and stats.batch_fill == 0.25
    assert stats.scheduler_tick_us == pytest.approx(1000.0)
