"""The chat history store: schema and migrations, CRUD, search, images, recovery."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import statistics
import time
from array import array
from pathlib import Path

import pytest

import app.store.migrations as store_migrations
from app.store.history import (
    MIGRATIONS,
    SCHEMA_VERSION,
    DatabaseTooNew,
    DatabaseUnreadable,
    MessageState,
    MigrationFailed,
    NotFound,
    ReplyModel,
    Store,
)
from engine.base.errors import EngineError
from engine.chat import ChatMessage, Role
from engine.requests.completion import StopReason

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00fake png body" * 8
JPEG = b"\xff\xd8\xff\xe0" + b"\x01fake jpeg body" * 8


class Clock:
    """A clock the test moves by hand (ordering and purge ages without sleeping)."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.fixture()
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "hearth.sqlite3"


@pytest.fixture()
def clock() -> Clock:
    return Clock()


@pytest.fixture()
def store(db_path: Path, clock: Clock):
    with Store(db_path, clock=clock) as opened:
        yield opened


def image_files(store: Store) -> list[Path]:
    return sorted(p for p in store.images_dir.rglob("*") if p.is_file())


# ---------------------------------------------------------------- schema, migrations


def test_new_database_has_schema_wal_and_no_backup(db_path: Path) -> None:
    with Store(db_path) as store:
        assert store.schema_version == SCHEMA_VERSION
        assert store.journal_mode == "wal"
        assert store.backup_path is None  # nothing to back up in a new database
    raw = sqlite3.connect(db_path)
    tables = {row[0] for row in raw.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
    assert {"conversations", "messages", "message_images", "settings"} <= tables
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # persistent in the file
    raw.close()
    assert not list(db_path.parent.glob("*.bak"))


def test_version_0_database_with_content_is_backed_up_then_migrated(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    raw = sqlite3.connect(db_path)
    raw.execute("CREATE TABLE notes (text TEXT)")
    raw.execute("INSERT INTO notes VALUES ('kept')")
    raw.commit()
    raw.close()

    with Store(db_path) as store:
        assert store.schema_version == SCHEMA_VERSION
        backup = db_path.with_name("hearth.sqlite3.v0.bak")
        assert store.backup_path == backup
    copy = sqlite3.connect(backup)
    assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert copy.execute("PRAGMA user_version").fetchone()[0] == 0
    assert copy.execute("SELECT text FROM notes").fetchall() == [("kept",)]
    copy.close()


def _make_version_1(db_path: Path) -> sqlite3.Connection:
    """A version-1 database built by hand, its last commit still in the WAL: the returned
    connection stays open so nothing checkpoints it into the main file."""
    db_path.parent.mkdir(parents=True, exist_ok=True)
    raw = sqlite3.connect(db_path, isolation_level=None)
    raw.execute("PRAGMA journal_mode = WAL")
    raw.execute("PRAGMA wal_autocheckpoint = 0")
    raw.execute("BEGIN")
    MIGRATIONS[0](raw)
    raw.execute("PRAGMA user_version = 1")
    raw.execute("COMMIT")
    raw.execute("INSERT INTO conversations (title, created, updated) VALUES ('from version 1', 1.0, 1.0)")
    raw.execute(
        "INSERT INTO messages (conversation_id, position, role, text, state, created, updated)"
        " VALUES (1, 0, 'user', 'hello from v1', 'complete', 1.0, 1.0)"
    )
    assert Path(f"{db_path}-wal").stat().st_size > 0
    return raw


def _add_pinned_column(conn: sqlite3.Connection) -> None:
    conn.execute("ALTER TABLE conversations ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0")


def test_version_1_database_is_backed_up_with_its_wal_then_migrated(db_path: Path) -> None:
    raw = _make_version_1(db_path)
    try:
        with Store(db_path, migrations=(*MIGRATIONS, _add_pinned_column)) as store:
            assert store.schema_version == SCHEMA_VERSION + 1
            assert [c.title for c in store.list_conversations()] == ["from version 1"]
            assert [m.text for m in store.messages(1)] == ["hello from v1"]
            assert store.backup_path == db_path.with_name("hearth.sqlite3.v1.bak")
    finally:
        raw.close()
    migrated = sqlite3.connect(db_path)
    assert migrated.execute("SELECT pinned FROM conversations").fetchall() == [(0,)]
    migrated.close()

    copy = sqlite3.connect(db_path.with_name("hearth.sqlite3.v1.bak"))
    assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert copy.execute("PRAGMA user_version").fetchone()[0] == 1
    # The rows that were only in the WAL made it into the backup.
    assert copy.execute("SELECT text FROM messages").fetchall() == [("hello from v1",)]
    columns = {row[1] for row in copy.execute("PRAGMA table_info(conversations)")}
    assert "pinned" not in columns
    copy.close()


def _make_version_2(db_path: Path) -> None:
    """A version-2 database as Hearth 2 left it: its schema and search index made by the
    version-2 code (migrations are append-only), its rows as that version wrote them."""
    Store(db_path, migrations=MIGRATIONS[:2]).close()
    sha = hashlib.sha256(PNG).hexdigest()
    image = db_path.parent / "images" / sha[:2] / f"{sha}.png"
    image.parent.mkdir(parents=True)
    image.write_bytes(PNG)
    raw = sqlite3.connect(db_path)
    raw.execute("PRAGMA foreign_keys = ON")
    raw.execute("INSERT INTO conversations (title, created, updated) VALUES ('from version 2', 1.0, 4.0)")
    rows = [
        ("user", "what is in this picture?", "complete", None, None),
        ("assistant", "a lighthouse", "complete", array("i", [5, 6]).tobytes(), "model-a"),
        ("user", "and at night?", "complete", None, None),
        ("assistant", "its light, turn", "interrupted", None, None),
    ]
    for position, (role, text, state, tokens, tokens_model) in enumerate(rows):
        raw.execute(
            "INSERT INTO messages (conversation_id, position, role, text, state, tokens, tokens_model,"
            " created, updated) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?)",
            (position, role, text, state, tokens, tokens_model, 1.0 + position, 1.0 + position),
        )
    raw.execute(
        "INSERT INTO message_images (message_id, position, sha256, identity, mime, size, file)"
        " VALUES (1, 0, ?, ?, 'image/png', ?, ?)",
        (sha, sha, len(PNG), f"{sha[:2]}/{sha}.png"),
    )
    raw.commit()
    raw.close()


def test_version_2_database_keeps_its_messages_as_one_path_with_a_backup(db_path: Path) -> None:
    _make_version_2(db_path)
    with Store(db_path) as store:
        assert store.schema_version == SCHEMA_VERSION
        assert store.backup_path == db_path.with_name("hearth.sqlite3.v2.bak")
        shown = store.messages(1)
        assert [m.text for m in shown] == [
            "what is in this picture?",
            "a lighthouse",
            "and at night?",
            "its light, turn",
        ]
        assert [m.parent_id for m in shown] == [None, *(m.id for m in shown[:-1])]
        assert all((m.version, m.version_count) == (1, 1) for m in shown)
        assert len(shown[0].images) == 1 and shown[0].images[0].read_bytes() == PNG  # not cascaded away
        assert shown[1].tokens == (5, 6) and shown[1].tokens_model == "model-a"
        assert shown[3].state is MessageState.INTERRUPTED
        # Who wrote the old replies was never recorded: none is made up.
        assert all(m.model is None and m.sampling == {} for m in shown)
        assert [c.id for c in store.search("lighthouse")] == [1]  # the index survived
        again = store.regenerate_reply(shown[3].id, ReplyModel("Tiny", "/m/tiny.gguf", "F32"))
        assert [m.id for m in store.messages(1)] == [*(m.id for m in shown[:3]), again.id]
        assert store.versions(again.id).ids == (shown[3].id, again.id)
    copy = sqlite3.connect(db_path.with_name("hearth.sqlite3.v2.bak"))
    assert copy.execute("PRAGMA user_version").fetchone()[0] == 2
    assert copy.execute("SELECT count(*) FROM messages").fetchone()[0] == 4
    assert "parent_id" not in {row[1] for row in copy.execute("PRAGMA table_info(messages)")}
    copy.close()


def test_failed_migration_leaves_the_database_at_its_version(db_path: Path) -> None:
    _make_version_1(db_path).close()

    reached: list[bool] = []

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE conversations ADD COLUMN pinned INTEGER")
        reached.append(True)  # half the migration ran: the next statement is the fault
        conn.execute("ALTER TABLE no_such_table ADD COLUMN x INTEGER")

    with pytest.raises(MigrationFailed) as failure:
        Store(db_path, migrations=(*MIGRATIONS, broken))
    assert reached == [True]
    assert isinstance(failure.value, EngineError)
    assert "hearth.sqlite3.v1.bak" in failure.value.message
    with Store(db_path) as store:  # the current app still opens it, untouched
        assert store.schema_version == SCHEMA_VERSION
        assert [c.title for c in store.list_conversations()] == ["from version 1"]
        columns = {row[1] for row in store._conn.execute("PRAGMA table_info(conversations)")}
        assert "pinned" not in columns


def test_newer_database_is_refused_and_left_alone(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    raw = sqlite3.connect(db_path)
    raw.execute("CREATE TABLE future (x)")
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.commit()
    raw.close()
    before = db_path.read_bytes()

    with pytest.raises(DatabaseTooNew) as refused:
        Store(db_path)
    assert isinstance(refused.value, EngineError)
    assert "newer version of Hearth" in refused.value.message
    assert "\n" not in refused.value.message
    assert refused.value.version == SCHEMA_VERSION + 1
    assert db_path.read_bytes() == before
    assert not list(db_path.parent.glob("*.bak"))


def test_a_file_that_is_not_a_database_is_refused_and_left_alone(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    db_path.write_bytes(b"definitely not sqlite" * 100)
    with pytest.raises(DatabaseUnreadable):
        Store(db_path)
    assert db_path.read_bytes() == b"definitely not sqlite" * 100


# ---------------------------------------------------------------- conversations


def test_conversation_crud_and_ordering(store: Store) -> None:
    first = store.create_conversation("First", system_prompt="Be brief.", sampling={"temperature": 0.2})
    second = store.create_conversation("Second", preset="Precise", model_hint="gemma-3-270m")
    assert first.sampling == {"temperature": 0.2} and first.system_prompt == "Be brief."
    assert second.preset == "Precise" and second.model_hint == "gemma-3-270m"
    assert [c.id for c in store.list_conversations()] == [second.id, first.id]

    store.add_message(first.id, "user", "hi")  # message activity moves it to the top
    assert [c.id for c in store.list_conversations()] == [first.id, second.id]

    store.rename(first.id, "Renamed")
    store.set_system_prompt(first.id, None)
    store.set_sampling(first.id, {"temperature": 0.7, "top_k": 40}, preset="Balanced")
    store.set_model_hint(first.id, "other.gguf")
    changed = store.get_conversation(first.id)
    assert changed.title == "Renamed" and changed.system_prompt is None
    assert changed.sampling == {"temperature": 0.7, "top_k": 40} and changed.preset == "Balanced"
    assert changed.model_hint == "other.gguf"
    store.set_sampling(first.id, {"temperature": 0.9})
    assert store.get_conversation(first.id).preset is None  # hand-edited values are custom
    assert hash(changed)  # rows stay hashable despite their dict field

    with pytest.raises(NotFound):
        store.rename(999, "x")
    with pytest.raises(NotFound):
        store.get_conversation(999)
    with pytest.raises(NotFound):
        store.add_message(999, "user", "x")


def test_soft_delete_undo_and_purge(store: Store, clock: Clock) -> None:
    kept = store.create_conversation("kept")
    gone = store.create_conversation("gone")
    store.add_message(gone.id, "user", "with a picture", images=[(PNG, "image/png")])
    store.delete_conversation(gone.id)
    assert [c.id for c in store.list_conversations()] == [kept.id]
    assert [c.id for c in store.list_conversations(include_deleted=True)] == [gone.id, kept.id]
    assert store.get_conversation(gone.id).deleted

    store.undo_delete(gone.id)
    assert not store.get_conversation(gone.id).deleted
    assert len(store.messages(gone.id)) == 1

    store.delete_conversation(gone.id)
    assert store.collect_garbage() == 0  # a deleted conversation can still be undone
    assert len(image_files(store)) == 1
    assert store.purge_deleted(older_than=3600) == 0  # too recent
    clock.now += 7200
    assert store.purge_deleted(older_than=3600) == 1
    with pytest.raises(NotFound):
        store.get_conversation(gone.id)
    assert store.messages(gone.id) == []
    assert image_files(store) == []  # purge collects the files nothing refers to any more
    assert store._conn.execute("SELECT count(*) FROM message_images").fetchone()[0] == 0


# ---------------------------------------------------------------- search


@pytest.mark.parametrize("use_fts", [True, False], ids=["fts5", "scan"])
def test_search_by_title_and_content(store: Store, use_fts: bool) -> None:
    if use_fts:
        assert store.search_uses_fts  # this Python's SQLite has FTS5 with trigrams
    store._fts = use_fts
    recipes = store.create_conversation("Bread Recipes")
    physics = store.create_conversation("Physics")
    store.add_message(physics.id, "user", "Explain the Schrödinger equation")
    reply = store.begin_reply(physics.id)
    store.update_reply(reply.id, "The wave function ψ evolves")
    deleted = store.create_conversation("Deleted bread")
    store.delete_conversation(deleted.id)

    assert [c.id for c in store.search("bread")] == [recipes.id]  # title, case-insensitive
    assert [c.id for c in store.search("SCHRÖDINGER")] == [physics.id]  # content, folded
    assert [c.id for c in store.search("ödi")] == [physics.id]  # substring
    assert [c.id for c in store.search("ph")] == [physics.id]  # short: title scan
    assert store.search("no such words") == []
    assert [c.id for c in store.search("wave function")] == [physics.id]  # streaming, not indexed
    store.finish_reply(reply.id, "The wave function ψ evolves unitarily.")
    assert [c.id for c in store.search("unitarily")] == [physics.id]  # indexed when finished
    assert [c.id for c in store.search('say "quoted" things')] == []  # quotes are not syntax
    assert {c.id for c in store.search("  ")} == {recipes.id, physics.id}

    store.delete_message(reply.id)
    assert store.search("wave function") == []  # deleted messages are not found
    store.restore_message(reply.id)
    assert [c.id for c in store.search("wave function")] == [physics.id]


def test_search_index_follows_sqlite_builds_with_and_without_fts5(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Store(db_path) as store:
        conversation = store.create_conversation("c")
        store.add_message(conversation.id, "user", "indexed before")

    monkeypatch.setattr(store_migrations, "_fts_available", False)  # a build without FTS5
    with Store(db_path) as store:
        assert not store.search_uses_fts
        store.add_message(conversation.id, "user", "written without the index")  # no trigger error
        assert [c.id for c in store.search("without the")] == [conversation.id]

    monkeypatch.setattr(store_migrations, "_fts_available", True)
    with Store(db_path) as store:
        assert store.search_uses_fts
        assert [c.id for c in store.search("without the")] == [conversation.id]  # rebuilt
        assert [c.id for c in store.search("indexed before")] == [conversation.id]
        store._conn.execute("INSERT INTO message_fts (message_fts) VALUES ('integrity-check')")


# ---------------------------------------------------------------- messages


def test_replies_stream_finish_and_round_trip_tokens(store: Store) -> None:
    conversation = store.create_conversation("chat")
    user = store.add_message(conversation.id, Role.USER, "Count to three")
    reply = store.begin_reply(conversation.id)
    assert reply.state is MessageState.STREAMING and reply.role is Role.ASSISTANT and reply.text == ""
    assert store.update_reply(reply.id, "One,")
    assert store.get_message(reply.id).text == "One,"

    tokens = (0, 1, 7, 151_936, 262_143, 2**31 - 1)
    done = store.finish_reply(
        reply.id,
        "One, two, three.",
        MessageState.COMPLETE,
        stop_reason=StopReason.STOP_TOKEN,
        stats={"usage": {"prompt_tokens": 12}, "timings": {"ttft": 0.25}},
        tokens=tokens,
    )
    assert done.state is MessageState.COMPLETE
    assert done.tokens == tokens
    assert done.stop_reason == "stop token"
    assert done.stats == {"usage": {"prompt_tokens": 12}, "timings": {"ttft": 0.25}}
    assert not store.update_reply(reply.id, "late delta")  # finished: streaming writes stop
    assert [m.id for m in store.messages(conversation.id)] == [user.id, reply.id]
    assert [m.position for m in store.messages(conversation.id)] == [0, 1]
    blob = store._conn.execute("SELECT tokens FROM messages WHERE id = ?", (reply.id,)).fetchone()[0]
    assert len(blob) == 4 * len(tokens)

    chat = done.to_chat_message()
    assert chat == ChatMessage("assistant", "One, two, three.", (), tokens)

    failed = store.begin_reply(conversation.id)
    failed = store.finish_reply(failed.id, "", "failed", error="The model ran out of memory.")
    assert failed.state is MessageState.FAILED and failed.error == "The model ran out of memory."
    assert failed.tokens == ()
    with pytest.raises(ValueError):
        store.finish_reply(failed.id, "x", MessageState.STREAMING)
    with pytest.raises(NotFound):
        store.finish_reply(user.id, "a user message is not a reply")


def test_interrupted_replies_after_reopen_can_be_resumed(db_path: Path) -> None:
    store = Store(db_path)
    conversation = store.create_conversation("chat")
    store.add_message(conversation.id, "user", "Tell me a story")
    reply = store.begin_reply(conversation.id)
    store.update_reply(reply.id, "Once upon a time")
    store._conn.close()  # dies without finishing (the crash test does this with SIGKILL)

    with Store(db_path) as store:
        assert store.mark_interrupted_replies() == 1
        assert store.mark_interrupted_replies() == 0
        interrupted = store.get_message(reply.id)
        assert interrupted.state is MessageState.INTERRUPTED
        assert interrupted.text == "Once upon a time"
        assert [c.id for c in store.search("upon a time")] == [conversation.id]  # now indexed

        resumed = store.resume_reply(reply.id)
        assert resumed.state is MessageState.STREAMING and resumed.text == "Once upon a time"
        assert store.update_reply(reply.id, "Once upon a time, a fox")
        finished = store.finish_reply(reply.id, "Once upon a time, a fox slept.", "complete", tokens=[1, 2])
        assert finished.state is MessageState.COMPLETE and finished.tokens == (1, 2)


WRITER = ReplyModel("Tiny Llama", "/models/tiny.gguf", "F32")
OTHER = ReplyModel("Other Llama", "/models/other.gguf", "Q4_K_M")


def chat(store: Store, *texts: str) -> tuple[int, list[int]]:
    """A conversation of alternating user messages and finished replies; its id and theirs."""
    conversation = store.create_conversation("chat")
    ids = []
    for k, text in enumerate(texts):
        if k % 2 == 0:
            ids.append(store.add_message(conversation.id, Role.USER, text).id)
        else:
            reply = store.begin_reply(conversation.id, WRITER, {"temperature": 0.7})
            ids.append(store.finish_reply(reply.id, text).id)
    return conversation.id, ids


def texts(store: Store, conversation_id: int) -> list[str]:
    return [m.text for m in store.messages(conversation_id)]


def test_a_reply_keeps_the_model_and_sampling_that_wrote_it(store: Store) -> None:
    _conversation, (question, answer) = chat(store, "hi", "hello")
    reply = store.get_message(answer)
    assert reply.model == WRITER and reply.sampling == {"temperature": 0.7}
    assert store.get_message(question).model is None and store.get_message(question).sampling == {}
    again = store.regenerate_reply(answer, OTHER, {"temperature": 0.1})
    assert again.model == OTHER and again.sampling == {"temperature": 0.1}
    assert store.get_message(answer).model == WRITER  # the earlier version keeps its writer
    unrecorded = store.regenerate_reply(answer)
    assert unrecorded.model is None and unrecorded.sampling == {}


def test_regenerating_keeps_each_reply_as_a_version(store: Store) -> None:
    conversation_id, (question, first) = chat(store, "2+2?", "4")
    second = store.regenerate_reply(first, WRITER)
    assert second.state is MessageState.STREAMING and second.text == "" and second.parent_id == question
    assert [m.id for m in store.messages(conversation_id)] == [question, second.id]
    assert (second.version, second.version_count) == (2, 2)
    store.finish_reply(second.id, "four")
    third = store.finish_reply(store.regenerate_reply(second.id).id, "IV")
    assert texts(store, conversation_id) == ["2+2?", "IV"]
    versions = store.versions(third.id)
    assert versions.ids == (first, second.id, third.id)
    assert (versions.index, versions.count, versions.step(-1), versions.step(1)) == (2, 3, second.id, None)

    store.select_version(first)
    shown = store.messages(conversation_id)
    assert [m.text for m in shown] == ["2+2?", "4"] and (shown[1].version, shown[1].version_count) == (1, 3)
    # What follows a version belongs to it: switching away and back brings it back.
    follow_up = store.add_message(conversation_id, Role.USER, "and 3+3?")
    store.select_version(third.id)
    assert texts(store, conversation_id) == ["2+2?", "IV"]
    store.select_version(first)
    assert texts(store, conversation_id) == ["2+2?", "4", "and 3+3?"]
    assert len({m.position for m in store.messages(conversation_id)}) == 3
    # Selecting (or regenerating) a message on a branch not shown shows that branch.
    store.select_version(third.id)
    store.select_version(follow_up.id)
    assert texts(store, conversation_id) == ["2+2?", "4", "and 3+3?"]
    store.select_version(third.id)
    fourth = store.regenerate_reply(first)
    assert [(m.id, m.version) for m in store.messages(conversation_id)] == [(question, 1), (fourth.id, 4)]

    with pytest.raises(NotFound):
        store.regenerate_reply(question)  # a user message is edited, not regenerated
    with pytest.raises(NotFound):
        store.select_version(999)


def test_editing_a_message_branches_and_keeps_the_earlier_branch(store: Store) -> None:
    conversation = store.create_conversation("chat")
    question = store.add_message(conversation.id, "user", "describe", images=[(PNG, "image/png")])
    answer = store.finish_reply(store.begin_reply(conversation.id).id, "a picture")
    follow_up = store.add_message(conversation.id, "user", "more?")

    edited = store.edit_and_branch(question.id, "describe briefly")
    assert edited.text == "describe briefly" and edited.images == question.images  # same file
    assert (edited.version, edited.version_count, edited.parent_id) == (2, 2, None)
    assert texts(store, conversation.id) == ["describe briefly"]  # nothing after it yet
    reply = store.begin_reply(conversation.id)
    assert reply.parent_id == edited.id
    assert texts(store, conversation.id) == ["describe briefly", ""]

    store.select_version(question.id)
    assert [m.id for m in store.messages(conversation.id)] == [question.id, answer.id, follow_up.id]
    # Editing a later message branches there, under the version shown.
    store.edit_and_branch(follow_up.id, "much more?")
    assert texts(store, conversation.id) == ["describe", "a picture", "much more?"]
    assert store.versions(follow_up.id).ids[0] == follow_up.id
    with pytest.raises(NotFound):
        store.edit_and_branch(answer.id, "replies are regenerated, not edited")
    assert len(image_files(store)) == 1


def test_search_finds_text_in_every_version(store: Store) -> None:
    conversation_id, (_question, answer) = chat(store, "a question", "an answer about otters")
    store.finish_reply(store.regenerate_reply(answer).id, "an answer about beavers")
    assert [c.id for c in store.search("otters")] == [conversation_id]  # not the version shown
    assert [c.id for c in store.search("beavers")] == [conversation_id]
    store._fts = False
    assert [c.id for c in store.search("otters")] == [conversation_id]


def test_deleting_a_message_hides_its_turn_and_undo_brings_it_back(store: Store) -> None:
    conversation_id, (_q1, _a1, q2, _a2, _q3, a3) = chat(store, "q1", "a1", "q2", "a2", "q3", "a3")
    assert store.delete_message(q2) == 2  # the question and its reply
    assert texts(store, conversation_id) == ["q1", "a1", "q3", "a3"]  # what followed stays
    assert store.search("q2") == []
    with pytest.raises(NotFound):
        store.delete_message(q2)
    assert store.restore_message(q2) == 2
    assert texts(store, conversation_id) == ["q1", "a1", "q2", "a2", "q3", "a3"]
    assert store.restore_message(q2) == 0

    assert store.delete_message(a3) == 1  # a reply goes alone
    assert texts(store, conversation_id) == ["q1", "a1", "q2", "a2", "q3"]
    q4 = store.add_message(conversation_id, "user", "q4")  # after the deleted reply
    store.restore_message(a3)
    assert texts(store, conversation_id) == ["q1", "a1", "q2", "a2", "q3", "a3", "q4"]
    assert store.get_message(q4.id).parent_id == a3


def test_deleting_a_version_shows_the_one_before(store: Store) -> None:
    conversation_id, (q1, a1, _q2, _a2) = chat(store, "q1", "a1", "q2", "a2")
    second = store.finish_reply(store.regenerate_reply(a1).id, "a1, again")
    store.add_message(conversation_id, "user", "q2 on the second branch")
    third = store.finish_reply(store.regenerate_reply(second.id).id, "a1, third")

    store.select_version(second.id)
    assert store.delete_message(second.id) == 2  # the version and its branch
    shown = store.messages(conversation_id)
    assert [m.text for m in shown] == ["q1", "a1", "q2", "a2"]  # the version before it
    assert (shown[1].version, shown[1].version_count) == (1, 2)
    assert store.versions(a1).ids == (a1, third.id)
    assert store.search("second branch") == []
    store.restore_message(second.id)
    assert texts(store, conversation_id) == ["q1", "a1, again", "q2 on the second branch"]
    assert store.versions(a1).ids == (a1, second.id, third.id)

    store.select_version(a1)
    store.delete_message(a1)  # the first version: the next one is shown
    assert texts(store, conversation_id) == ["q1", "a1, again", "q2 on the second branch"]

    # A question whose reply has versions takes them all: the one shown alone (what followed
    # it stays), the others with their branches.
    store.restore_message(a1)
    assert store.delete_message(q1) == 1 + 1 + 2 + 1  # q1; a1; second and its q2; third
    assert texts(store, conversation_id) == ["q2", "a2"]
    assert store.search("a1") == [] and store.search("second branch") == []


def test_purging_deleted_messages_keeps_what_followed(store: Store, clock: Clock) -> None:
    conversation_id, (_q1, a1, q2, _a2, q3, a3) = chat(store, "q1", "a1", "q2", "a2", "q3", "a3")
    store.add_message(conversation_id, "user", "q4", images=[(PNG, "image/png")])
    image = store.messages(conversation_id)[-1].images[0]
    other = store.finish_reply(store.regenerate_reply(a3).id, "a3, again")
    store.add_message(conversation_id, "user", "after the other version", images=[(JPEG, "image/jpeg")])
    store.select_version(a3)
    store.delete_message(q2)  # q2 and a2 leave the path
    store.delete_message(other.id)  # not shown: goes with its branch
    assert store.purge_deleted_messages(older_than=3600) == 0  # too recent
    clock.now += 7200
    assert store.purge_deleted_messages(older_than=3600) == 4
    assert texts(store, conversation_id) == ["q1", "a1", "q3", "a3", "q4"]
    assert store.get_message(q3).parent_id == a1
    assert store._conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 5
    assert image_files(store) == [image.path]  # the other branch's image went with it
    store._conn.execute("INSERT INTO message_fts (message_fts) VALUES ('integrity-check')")
    assert store._conn.execute("SELECT count(*) FROM message_fts").fetchone()[0] == 5  # cascades too
    assert store.search("after the other") == [] and store.search("q2") == []
    with pytest.raises(NotFound):
        store.get_message(q2)


def test_a_regenerated_reply_cut_off_by_a_crash_is_interrupted(db_path: Path) -> None:
    store = Store(db_path)
    conversation_id, (_question, first) = chat(store, "tell me", "once")
    again = store.regenerate_reply(first)
    store.update_reply(again.id, "Twice upon")
    store._conn.close()  # dies mid-reply
    with Store(db_path) as store:
        assert store.mark_interrupted_replies() == 1
        shown = store.messages(conversation_id)[-1]
        assert (shown.id, shown.state, shown.text) == (again.id, MessageState.INTERRUPTED, "Twice upon")
        assert (shown.version, shown.version_count) == (2, 2)


def test_update_reply_is_cheap(store: Store) -> None:
    conversation = store.create_conversation("long")
    reply = store.begin_reply(conversation.id)
    text = ""
    durations = []
    for index in range(200):
        text += f"token {index} " * 10  # grows to about 20 KB
        start = time.perf_counter()
        store.update_reply(reply.id, text)
        durations.append(time.perf_counter() - start)
    # Typically ~0.05-0.3 ms; the bound leaves room for a loaded test machine.
    assert statistics.median(durations) < 0.002, statistics.median(durations)


# ---------------------------------------------------------------- images


def test_identical_images_are_stored_once(store: Store) -> None:
    conversation = store.create_conversation("pictures")
    first = store.add_message(conversation.id, "user", "look", images=[(PNG, "image/png")])
    second = store.add_message(
        conversation.id, "user", "again", images=[(PNG, "image/png", "decoded:42"), (JPEG, "")]
    )
    assert len(image_files(store)) == 2  # PNG once, JPEG once

    sha = hashlib.sha256(PNG).hexdigest()
    (ref,) = first.images
    assert ref.sha256 == sha and ref.identity == sha and ref.mime == "image/png" and ref.size == len(PNG)
    assert ref.path == store.images_dir / sha[:2] / f"{sha}.png"
    assert ref.read_bytes() == PNG
    again, jpeg = second.images
    assert again.path == ref.path and again.identity == "decoded:42"
    assert jpeg.path.suffix == ".jpg" and jpeg.mime == "image/jpeg"  # sniffed from the bytes
    assert [m.images for m in store.messages(conversation.id)] == [first.images, second.images]
    assert not [p for p in store.images_dir.rglob(".*")]  # no temporary files left


def test_garbage_collection_keeps_referenced_files(store: Store) -> None:
    conversation = store.create_conversation("pictures")
    keep = store.add_message(conversation.id, "user", "keep", images=[(PNG, "image/png")])
    shared = store.add_message(conversation.id, "user", "shared", images=[(PNG, "image/png")])
    dropped = store.add_message(conversation.id, "user", "drop", images=[(JPEG, "image/jpeg")])
    (jpeg,) = dropped.images
    # Crash leftovers: an orphan written before its row, an old and a fresh temporary file.
    orphan = store.images_dir / "ff" / ("f" * 64 + ".png")
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"orphan")
    old_tmp = orphan.parent / ".old.png.1234.tmp"
    old_tmp.write_bytes(b"partial")
    os.utime(old_tmp, (time.time() - 3600, time.time() - 3600))
    fresh_tmp = orphan.parent / ".fresh.png.5678.tmp"
    fresh_tmp.write_bytes(b"being written")

    for message in (shared, dropped):
        store.delete_message(message.id)
    assert store.collect_garbage() == 2  # orphan, old tmp: a deleted message can still be undone
    assert jpeg.path.exists() and not orphan.exists() and not old_tmp.exists()
    assert fresh_tmp.exists()
    assert store.purge_deleted_messages() == 2  # "shared" (PNG still used by "keep") and "drop"
    assert not jpeg.path.exists()  # purging collects the files nothing refers to any more
    assert keep.images[0].path.read_bytes() == PNG
    assert store.collect_garbage() == 0

    # Bytes whose file vanished (or was damaged) are written again.
    keep.images[0].path.write_bytes(b"damaged")
    again = store.add_message(conversation.id, "user", "again", images=[(PNG, "image/png")])
    assert again.images[0].path.read_bytes() == PNG


# ---------------------------------------------------------------- settings


def test_settings_round_trip_json(store: Store) -> None:
    assert store.get_setting("composer.enter_sends", True) is True
    store.set_setting("composer.enter_sends", False)
    store.set_setting("load:/models/a.gguf", {"context": 4096, "parallel": 4, "kv": "q8_0"})
    assert store.get_setting("composer.enter_sends") is False
    assert store.get_setting("load:/models/a.gguf") == {"context": 4096, "parallel": 4, "kv": "q8_0"}
    store.set_setting("composer.enter_sends", True)
    assert store.get_setting("composer.enter_sends") is True
    store.delete_setting("composer.enter_sends")
    assert store.get_setting("composer.enter_sends") is None
    with pytest.raises(TypeError):
        store.set_setting("bad", object())


def test_reply_tokens_are_stored_with_the_model_that_made_them(db_path: Path) -> None:
    raw = _make_version_1(db_path)
    raw.execute("UPDATE messages SET tokens = ? WHERE id = 1", (array("i", [5, 6]).tobytes(),))
    raw.commit()
    raw.close()
    with Store(db_path) as store:
        old = store.messages(1)[0]
        assert old.tokens == (5, 6) and old.tokens_model == ""  # from before: never spliced
        conv = store.create_conversation("t")
        store.add_message(conv.id, "user", "hi")
        reply = store.begin_reply(conv.id)
        done = store.finish_reply(reply.id, "ok", tokens=[1, 2], tokens_model="abc-def")
        assert done.tokens_model == "abc-def"
        assert done.to_chat_message().tokens_model == "abc-def"
        assert store.resume_reply(reply.id).tokens_model == ""
