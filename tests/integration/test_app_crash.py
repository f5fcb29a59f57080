"""Kill a real Hearth window process with SIGKILL, 20 times, on a random schedule.

Each run starts `hearth --load MODEL --send TEXT` offscreen on the same data folder. Most
runs load a looping tiny model that writes a long reply (saved at least every half second)
and are killed mid-stream; every fourth loads a model whose reply finishes, and is killed
after it did. After each kill, the database must be intact, every message that was complete
before (finished replies included) must be exactly as it was, and recovery must leave
nothing "streaming". The schedule is drawn anew each run: the seed is printed, and
HEARTH_CRASH_SEED=<seed> replays it.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.devtools.tiny_models import TinyTextSpec, write_tiny_text_model
from tests.conftest import SCRIPT
from tests.integration.test_store_crash import check_database_after_kill

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

# 12 kills at random points (3 of them after a finished reply) cover start-up, streaming and
# idle; each costs a whole app start (~4 s on two cores), and the suite must stay under 15 min.
KILLS = 12


def _query(db: Path, sql: str) -> list[tuple] | None:
    """The rows of ``sql``, read-only beside the live writer; None before the schema exists."""
    if not db.exists():
        return None
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:  # schema not created yet
        return None
    finally:
        conn.close()


def _snapshot(db: Path) -> dict[int, str]:
    """Complete messages: id -> sha256 of the text."""
    rows = _query(db, "SELECT id, text FROM messages WHERE state = 'complete'") or []
    return {message_id: hashlib.sha256(text.encode()).hexdigest() for message_id, text in rows}


def _finished_replies(db: Path) -> int:
    rows = _query(
        db, "SELECT count(*) FROM messages WHERE role = 'assistant' AND state = 'complete' AND text != ''"
    )
    return int(rows[0][0]) if rows else 0


def _streaming_started(db: Path) -> bool:
    rows = _query(db, "SELECT count(*) FROM messages WHERE state = 'streaming' AND text != ''")
    return bool(rows and rows[0][0])


@pytest.fixture(scope="module")
def slow_looping_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A looping scripted model big enough that a 2,048-token reply takes seconds."""
    spec = TinyTextSpec(
        n_embd=256, n_layer=8, n_head=4, n_head_kv=4, n_ff=1024, script=SCRIPT[:-1], script_loops=True
    )
    return write_tiny_text_model(tmp_path_factory.mktemp("crash") / "slow-looping.gguf", spec)


@pytest.fixture(scope="module")
def finishing_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Says the script once and stops: its replies complete."""
    return write_tiny_text_model(
        tmp_path_factory.mktemp("crash") / "finishing.gguf", TinyTextSpec(script=SCRIPT)
    )


def test_sigkill_of_the_app_loses_nothing(
    tmp_path: Path, slow_looping_model: Path, finishing_model: Path
) -> None:
    data = tmp_path / "data"
    db = data / "hearth.sqlite3"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    seed = int(os.environ.get("HEARTH_CRASH_SEED") or random.randrange(1 << 31))
    print(f"\nSIGKILL schedule seed: {seed} (replay with HEARTH_CRASH_SEED={seed})")
    rng = random.Random(seed)
    completed: dict[int, str] = {}
    interrupted_total = 0
    killed_mid_stream = 0
    finishing_runs = 0
    for run in range(KILLS):
        finishes = run % 4 == 3
        model = finishing_model if finishes else slow_looping_model
        replies_before = _finished_replies(db)
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "--data-dir", str(data), "--models-dir", str(tmp_path / "models"),
             "--load", str(model), "--send", f"run {run}: tell me everything"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60

            def ready(before: int = replies_before, finishes: bool = finishes) -> bool:
                return _finished_replies(db) > before if finishes else _streaming_started(db)

            while not ready() and time.monotonic() < deadline:
                assert process.poll() is None, f"Hearth exited early (run {run}, code {process.returncode})"
                time.sleep(0.02)
            assert ready(), f"run {run} never got that far (seed {seed})"
            finishing_runs += finishes
            time.sleep(rng.uniform(0.0, 0.6))
            completed.update(_snapshot(db))
            killed_mid_stream += _streaming_started(db)
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(10)
        interrupted_total += check_database_after_kill(db, completed.items())
    assert len(completed) >= KILLS, "every run's user message at least was complete"
    assert _finished_replies(db) >= finishing_runs == KILLS // 4, "finished replies survive every later kill"
    assert killed_mid_stream >= KILLS // 2, "most kills should land while a reply streams"
    assert interrupted_total >= KILLS // 2
