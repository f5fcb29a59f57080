"""A reply's rounds of tool calls (issue 29) live in the message tree: saved at each step,
kept through an interruption, not carried into a regenerated version, migrated onto old
databases."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.store.history import SCHEMA_VERSION, MessageState, NotFound, Store

ROUNDS = '{"rounds": [{"text": "", "calls": []}]}'


def test_rounds_saved_and_kept_when_interrupted(tmp_path: Path) -> None:
    db = tmp_path / "hearth.sqlite3"
    with Store(db) as store:
        conversation = store.create_conversation("t")
        store.add_message(conversation.id, "user", "What time is it?")
        reply = store.begin_reply(conversation.id)
        assert reply.tool_rounds == ""
        store.save_tool_rounds(reply.id, ROUNDS)
    with Store(db) as store:  # as after a crash: the reply reopens interrupted, its calls kept
        assert store.mark_interrupted_replies() == 1
        again = store.get_message(reply.id)
        assert again.state is MessageState.INTERRUPTED
        assert again.tool_rounds == ROUNDS


def test_a_regenerated_version_starts_without_calls(tmp_path: Path) -> None:
    with Store(tmp_path / "hearth.sqlite3") as store:
        conversation = store.create_conversation("t")
        store.add_message(conversation.id, "user", "What time is it?")
        reply = store.begin_reply(conversation.id)
        store.save_tool_rounds(reply.id, ROUNDS)
        store.finish_reply(reply.id, "Noon.")
        second = store.regenerate_reply(reply.id)
        assert second.tool_rounds == ""
        assert store.get_message(reply.id).tool_rounds == ROUNDS  # the first version keeps its own


def test_saving_rounds_for_a_missing_reply_says_so(tmp_path: Path) -> None:
    with Store(tmp_path / "hearth.sqlite3") as store, pytest.raises(NotFound):
        store.save_tool_rounds(12345, ROUNDS)


def test_a_version_5_database_gains_the_column(tmp_path: Path) -> None:
    db = tmp_path / "hearth.sqlite3"
    with Store(db) as store:
        conversation = store.create_conversation("old")
        store.add_message(conversation.id, "user", "hi")
    raw = sqlite3.connect(db)
    raw.execute("ALTER TABLE messages DROP COLUMN tool_rounds")
    raw.execute("PRAGMA user_version = 5")
    raw.commit()
    raw.close()
    with Store(db) as store:
        assert store.schema_version == SCHEMA_VERSION == 6
        (message,) = store.messages(conversation.id)
        assert message.tool_rounds == ""
