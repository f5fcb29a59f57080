"""The numbers under a reply: the wait for a slot apart from the time to first token, and
why a queued reply waits."""

from __future__ import annotations

from app.chat import QueueWait, ReplyStats
from app.conversation.reply_in_flight import ReplyInFlight, ReplyStage, why_waiting
from engine.requests.completion import Completion, StopReason, Timings, Usage


def queued_completion(queued: float, ttft: float = 0.4) -> Completion:
    return Completion(
        "hi",
        StopReason.STOP_TOKEN,
        Usage(prompt_tokens=1_200, cached_tokens=0, completion_tokens=80),
        Timings(
            queued=queued,
            ttft=ttft,
            prefill_seconds=0.35,
            decode_seconds=7.7,
            prefill_tokens_per_second=3_400.0,
            decode_tokens_per_second=10.3,
        ),
    )


def test_a_reply_that_waited_for_a_slot_says_so_before_its_first_token() -> None:
    stats = ReplyStats.from_completion(queued_completion(150.0))
    assert stats.summary() == (
        "waited 2 min 30 s for a slot · 0.40 s to first token · 10.3 tok/s · 1,200 prompt tokens"
        " · end of turn"
    )
    assert stats.details().splitlines()[:3] == [
        "Waited 2 min 30 s for a slot: the model was serving as many conversations as it does at once",
        "Generated 80 tokens at 10.3 tok/s in 7.70 s",
        "First token 0.40 s after it started",
    ]


def test_a_wait_of_a_tick_is_not_on_the_line() -> None:
    stats = ReplyStats.from_completion(queued_completion(0.004))
    assert stats.summary().startswith("0.40 s to first token · 10.3 tok/s")
    assert "waited" not in stats.details()


def test_a_reply_stopped_while_it_waited_says_only_that() -> None:
    never = Completion("", StopReason.CANCELLED, Usage(0, 0, 0), Timings(4.2, 0.0, 0.0, 0.0, 0.0, 0.0))
    assert ReplyStats.from_completion(never).summary() == "waited 4.20 s for a slot · stopped"


def test_stored_stats_round_trip_and_old_ones_lose_the_wait_from_their_first_token() -> None:
    stats = ReplyStats.from_completion(queued_completion(12.0))
    assert ReplyStats.from_dict(stats.to_dict()) == stats
    # Stored before the queue was counted apart: ttft was from submit, the wait inside it.
    old = {k: v for k, v in stats.to_dict().items() if k != "ttft_after_queue"}
    old["ttft"] = 12.4
    restored = ReplyStats.from_dict(old)
    assert (restored.queued, round(restored.ttft, 6)) == (12.0, 0.4)


def test_why_a_reply_waits() -> None:
    assert QueueWait(parallel=1, chats=1).text() == (
        "Waiting: the model serves 1 conversation at a time (parallel = 1) and another chat is replying"
    )
    assert QueueWait(parallel=2, chats=2, ahead=1).text() == (
        "Waiting: the model serves 2 conversations at a time (parallel = 2) and 2 other chats are "
        "replying; 1 more reply waits ahead of this one"
    )
    assert QueueWait(ahead=3).text() == "queued, 3 ahead"
    assert not QueueWait(ahead=3).explained and QueueWait(parallel=1, chats=1).explained


def stream(conversation: int, stage: ReplyStage, queued_at: float | None) -> ReplyInFlight:
    return ReplyInFlight(conversation, 100 + conversation, None, stage=stage, queued_at=queued_at)


def test_a_reason_is_given_only_when_the_window_s_chats_hold_every_slot() -> None:
    writing = stream(1, ReplyStage.WRITING, 1.0)
    first = stream(2, ReplyStage.WAITING, 2.0)
    second = stream(3, ReplyStage.WAITING, 3.0)
    streams = (writing, first, second)
    assert why_waiting(first, streams, parallel=1) == QueueWait(1, 1, 0)
    assert why_waiting(second, streams, parallel=1) == QueueWait(1, 1, 1)
    # A slot the window's chats leave free: it is being admitted (or the local server has
    # it, which is not seen from here): no reason given, the order kept.
    assert why_waiting(first, streams, parallel=2) is None
    assert why_waiting(second, streams, parallel=2) == QueueWait(ahead=1)
    # A remote model says nothing of its slots.
    assert why_waiting(first, streams, parallel=0) is None
