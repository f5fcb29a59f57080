"""The embedder giving way to a generating chat: waiting between decodes, bounded waits, fewer
threads where cores are spare, and the real embedder calling the hook before every decode."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.documents.index import DocumentIndex
from engine.documents.yielding import MAX_WAIT_S, POLL_S, CourteousEmbedder, Courtesy, CourtesyStats


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def __call__(self) -> float:
        return self.now


class Threads:
    def __init__(self, n: int = 2) -> None:
        self.n_threads = n
        self.calls: list[int] = []

    def set_threads(self, n: int) -> None:
        self.calls.append(n)
        self.n_threads = n


def busy_for(answers: int) -> Any:
    """True for the first ``answers`` questions, then False."""
    asked = iter(range(answers))
    return lambda: next(asked, None) is not None


def courtesy(busy: Any, clock: FakeClock, **kwargs: Any) -> Courtesy:
    return Courtesy(busy, sleep=clock.sleep, clock=clock, **kwargs)


def test_defaults_are_a_short_poll_and_a_bounded_wait() -> None:
    assert 0 < POLL_S <= 0.1
    assert MAX_WAIT_S == 30.0


def test_no_chat_generating_means_no_wait() -> None:
    clock = FakeClock()
    c = courtesy(lambda: False, clock)
    for _ in range(5):
        c.before_decode(Threads())
    assert clock.sleeps == []
    assert c.stats() == CourtesyStats(waits=0, seconds_waited=0.0, forced=0, shared=0)


def test_waits_while_the_chat_generates_then_goes_on() -> None:
    clock = FakeClock()
    # The first question finds the chat generating, then it says so twice more while waiting.
    c = courtesy(busy_for(3), clock, poll_s=0.05)
    threads = Threads()
    c.before_decode(threads)
    assert clock.sleeps == [0.05, 0.05]
    assert threads.calls == []  # waiting, not sharing
    stats = c.stats()
    assert (stats.waits, stats.forced, stats.shared) == (1, 0, 0)
    assert stats.seconds_waited == pytest.approx(0.10)
    c.before_decode(threads)  # the chat is done: straight through
    assert len(clock.sleeps) == 2 and c.stats().waits == 1


def test_a_chat_that_never_stops_lets_one_decode_through_per_max_wait() -> None:
    clock = FakeClock()
    c = courtesy(lambda: True, clock, poll_s=1.0, max_wait_s=5.0)
    c.before_decode(Threads())
    assert clock.now == pytest.approx(5.0)
    c.before_decode(Threads())
    assert clock.now == pytest.approx(10.0)
    stats = c.stats()
    assert (stats.waits, stats.forced) == (2, 2)
    assert stats.seconds_waited == pytest.approx(10.0)


def test_without_a_bound_it_waits_for_the_chat_however_long() -> None:
    clock = FakeClock()
    c = courtesy(busy_for(1001), clock, poll_s=1.0, max_wait_s=None)
    c.before_decode(Threads())
    assert clock.now == pytest.approx(1000.0)
    assert c.stats().forced == 0


def test_with_spare_cores_it_lowers_its_threads_instead_and_restores_them() -> None:
    clock = FakeClock()
    answers = iter([True, True, False, True])
    c = courtesy(lambda: next(answers), clock, threads_while_busy=1)
    threads = Threads(4)
    c.before_decode(threads)  # chat starts: 4 -> 1
    c.before_decode(threads)  # still: no second call
    assert threads.calls == [1]
    c.before_decode(threads)  # chat done: back to its own 4
    assert threads.calls == [1, 4] and threads.n_threads == 4
    c.before_decode(threads)
    assert threads.calls == [1, 4, 1]
    assert clock.sleeps == []
    assert c.stats().shared == 3


def test_threads_while_busy_equal_to_its_own_changes_nothing() -> None:
    c = courtesy(lambda: True, FakeClock(), threads_while_busy=2)
    threads = Threads(2)
    c.before_decode(threads)
    assert threads.calls == []


@pytest.mark.parametrize(
    "kwargs",
    [{"threads_while_busy": 0}, {"poll_s": 0.0}, {"poll_s": -1.0}],
    ids=["threads", "poll0", "poll-"],
)
def test_rejects_settings_that_cannot_work(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Courtesy(lambda: False, **kwargs)


# -- with the real embedder --------------------------------------------------------------------


def long_texts(embedder: Any, n: int, tokens: int) -> list[str]:
    words = [
        "the",
        "river",
        "town",
        "kept",
        "its",
        "ferry",
        "running",
        "through",
        "the",
        "long",
        "wet",
        "winter",
    ]
    texts = []
    for i in range(n):
        out: list[str] = [f"text{i}"]
        while embedder.count_tokens(" ".join(out)) < tokens:
            out.append(words[len(out) % len(words)])
        texts.append(" ".join(out))
    return texts


def test_the_embedder_asks_before_every_decode_and_its_vectors_do_not_change(embedder: Any) -> None:
    # Three texts of ~400 tokens: no two fit one 512-token decode, so three decodes.
    texts = long_texts(embedder, 3, 400)
    calls: list[float] = []

    def busy() -> bool:
        calls.append(time.monotonic())
        return False

    polite = CourteousEmbedder(embedder, Courtesy(busy))
    assert (polite.name, polite.dim, polite.window) == (embedder.name, embedder.dim, embedder.window)
    assert polite.count_tokens(texts[0]) == embedder.count_tokens(texts[0])
    vectors = polite.embed(texts)
    assert len(calls) == 3
    np.testing.assert_allclose(vectors, embedder.embed(texts), atol=1e-6)


def test_an_index_run_waits_for_the_chat_to_finish(embedder: Any, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("The ferry crossed the river twice a day.\n", encoding="utf-8")
    generating = threading.Event()
    generating.set()
    c = Courtesy(generating.is_set, poll_s=0.01)
    stopper = threading.Timer(0.4, generating.clear)
    stopper.start()
    started = time.monotonic()
    with DocumentIndex(tmp_path / "documents.sqlite3") as index:
        index.create_collection("c")
        report = index.index_paths("c", [folder], CourteousEmbedder(embedder, c))
    took = time.monotonic() - started
    stopper.join()
    assert report.chunks_embedded == 1
    assert took >= 0.35
    stats = c.stats()
    assert stats.waits == 1 and stats.forced == 0 and stats.seconds_waited >= 0.3
