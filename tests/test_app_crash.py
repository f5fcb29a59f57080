"""Kill a real Hearth window process with SIGKILL while it streams replies, 20 times.

Each run starts `hearth --load MODEL --send TEXT` offscreen on the same data folder; a
looping tiny model writes a long reply that the app saves at least every half second.
After each kill, the database must be intact, every reply that was complete before must
be exactly as it was, and recovery must leave nothing "streaming".
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

from engine.tiny_models import TinyTextSpec, write_tiny_text_model
from tests.conftest import SCRIPT
from tests.test_store_crash import check_database_after_kill

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

KILLS = 20


def _snapshot(db: Path) -> dict[int, str]:
    """Complete messages: id -> sha256 of the text (read-only, beside the live writer)."""
    if not db.exists():
        return {}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        rows = conn.execute("SELECT id, text FROM messages WHERE state = 'complete'").fetchall()
    except sqlite3.OperationalError:  # schema not created yet
        return {}
    finally:
        conn.close()
    return {message_id: hashlib.sha256(text.encode()).hexdigest() for message_id, text in rows}


def _streaming_started(db: Path) -> bool:
    if not db.exists():
        return False
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        row = conn.execute(
            "SELECT count(*) FROM messages WHERE state = 'streaming' AND text != ''"
        ).fetchone()
        return bool(row and row[0])
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


@pytest.fixture(scope="module")
def slow_looping_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A looping scripted model big enough that a 2,048-token reply takes seconds."""
    spec = TinyTextSpec(
        n_embd=256, n_layer=8, n_head=4, n_head_kv=4, n_ff=1024, script=SCRIPT[:-1], script_loops=True
    )
    return write_tiny_text_model(tmp_path_factory.mktemp("crash") / "slow-looping.gguf", spec)


def test_sigkill_of_the_app_while_streaming_loses_nothing(tmp_path: Path, slow_looping_model: Path) -> None:
    looping_model = slow_looping_model
    data = tmp_path / "data"
    db = data / "hearth.sqlite3"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    rng = random.Random(20261130)
    completed: dict[int, str] = {}
    interrupted_total = 0
    killed_mid_stream = 0
    for run in range(KILLS):
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "--data-dir", str(data), "--models-dir", str(tmp_path / "models"),
             "--load", str(looping_model), "--send", f"run {run}: tell me everything"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while not _streaming_started(db) and time.monotonic() < deadline:
                assert process.poll() is None, f"Hearth exited early (run {run}, code {process.returncode})"
                time.sleep(0.02)
            time.sleep(rng.uniform(0.0, 0.6))
            completed.update(_snapshot(db))
            killed_mid_stream += _streaming_started(db)
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(10)
        interrupted_total += check_database_after_kill(db, completed.items())
    assert len(completed) >= KILLS, "every run's user message at least was complete"
    assert killed_mid_stream >= KILLS // 2, "most kills should land while a reply streams"
    assert interrupted_total >= KILLS // 2
