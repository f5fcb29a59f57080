"""Nothing lost, the hard way: SIGKILL a process that is writing a long streaming reply,
20 times at random moments, and check the database after every kill."""

from __future__ import annotations

import hashlib
import os
import queue
import random
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from app.store.history import MessageState, Store

WRITER = Path(__file__).resolve().parent / "crash_writer.py"
KILLS = 20


def check_database_after_kill(db_path: Path, completed: Iterable[tuple[int, str]]) -> int:
    """What must hold after a hard kill of any process writing the store: the database is
    intact, every message the process reported finished (id, sha256 of its text) is there
    with exactly that text, every image row has its file, versions still form a tree, and
    startup recovery leaves no reply streaming. Returns how many replies recovery marked
    interrupted."""
    raw = sqlite3.connect(db_path)  # recovers the WAL, as the app's next start does
    try:
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert raw.execute("PRAGMA foreign_key_check").fetchall() == []
        # Versions stay a tree: a parent in the same conversation, one version shown of each.
        assert raw.execute(
            "SELECT count(*) FROM messages c JOIN messages p ON p.id = c.parent_id"
            " WHERE p.conversation_id != c.conversation_id"
        ).fetchone() == (0,)
        assert (
            raw.execute(
                "SELECT parent_id FROM messages WHERE active"
                " GROUP BY parent_id, conversation_id HAVING count(*) > 1"
            ).fetchall()
            == []
        )
        rows = {
            message_id: (text, state)
            for message_id, text, state in raw.execute("SELECT id, text, state FROM messages")
        }
        for message_id, digest in completed:
            assert message_id in rows, f"completed message {message_id} is missing"
            text, state = rows[message_id]
            assert state == MessageState.COMPLETE.value, f"message {message_id} is {state}"
            assert hashlib.sha256(text.encode()).hexdigest() == digest, f"message {message_id} changed"
        images = db_path.parent / "images"
        for sha256, file in raw.execute("SELECT DISTINCT sha256, file FROM message_images"):
            path = images / file
            assert path.is_file(), f"image {file} is missing"
            assert hashlib.sha256(path.read_bytes()).hexdigest() == sha256, f"image {file} is damaged"
        if raw.execute("SELECT 1 FROM sqlite_schema WHERE name = 'message_fts'").fetchone():
            raw.execute("INSERT INTO message_fts (message_fts) VALUES ('integrity-check')")
    finally:
        raw.close()

    with Store(db_path) as store:
        interrupted = store.mark_interrupted_replies()
        streaming = store._conn.execute("SELECT count(*) FROM messages WHERE state = 'streaming'")
        assert streaming.fetchone()[0] == 0
    return interrupted


def _read_lines(stream, lines: queue.Queue[str]) -> None:
    # A thread, not select(): pipes cannot be selected on Windows.
    for line in stream:
        lines.put(line)


@pytest.mark.slow
def test_sigkill_while_streaming_loses_nothing(tmp_path: Path) -> None:
    db_path = tmp_path / "hearth.sqlite3"
    seed = int(os.environ.get("HEARTH_CRASH_SEED") or random.randrange(1 << 31))
    print(f"\nstore SIGKILL schedule seed: {seed} (replay with HEARTH_CRASH_SEED={seed})")
    rng = random.Random(seed)
    completed: dict[int, str] = {}
    interrupted_total = 0
    started = time.monotonic()

    for kill in range(KILLS):
        writer = subprocess.Popen(
            [sys.executable, str(WRITER), str(db_path), str(seed + kill)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=_read_lines, args=(writer.stdout, lines), daemon=True)
        reader.start()
        try:
            first = lines.get(timeout=30)
        except queue.Empty:
            first = ""
        if first != "ready\n":
            writer.kill()
            _, errors = writer.communicate()
            pytest.fail(f"writer did not start (kill {kill}): {first!r} {errors}")

        time.sleep(rng.uniform(0.05, 0.4))
        if writer.poll() is not None:  # it must die by the kill, not by an error of its own
            pytest.fail(f"writer exited by itself (kill {kill}): {writer.stderr.read()}")
        writer.kill()  # SIGKILL on POSIX: no handlers, no atexit, no flushing of anything
        writer.wait()
        reader.join(timeout=10)
        assert writer.returncode != 0
        while not lines.empty():
            line = lines.get()
            if line.startswith("completed ") and line.endswith("\n"):  # a whole line only
                _, message_id, digest = line.split()
                completed[int(message_id)] = digest
        writer.stderr.close()

        interrupted_total += check_database_after_kill(db_path, completed.items())

    # The kills really landed while replies were streaming and messages were finishing.
    assert interrupted_total >= KILLS // 4, interrupted_total
    assert len(completed) >= KILLS, len(completed)
    print(
        f"{KILLS} kills in {time.monotonic() - started:.1f} s: {len(completed)} completed messages intact,"
        f" {interrupted_total} replies recovered as interrupted"
    )
