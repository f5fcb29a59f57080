"""The store's schema: versioned migrations (each run after a backup), and the full-text
search index, kept outside the versioned schema because not every SQLite build has FTS5.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

from app.store.files import fsync_directory
from app.store.records import MigrationFailed

Migration = Callable[[sqlite3.Connection], None]


def _migrate_to_1(conn: sqlite3.Connection) -> None:
    # One statement per execute(): executescript() would COMMIT the migration's transaction.
    statements = (
        """CREATE TABLE conversations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: the GUI may still hold an old id
            title TEXT NOT NULL,
            created REAL NOT NULL,
            updated REAL NOT NULL,
            system_prompt TEXT,
            sampling TEXT NOT NULL DEFAULT '{}',
            preset TEXT,
            model_hint TEXT,
            deleted_at REAL
        )""",
        "CREATE INDEX conversations_by_updated ON conversations (updated DESC)",
        """CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
            text TEXT NOT NULL DEFAULT '',
            state TEXT NOT NULL
                CHECK (state IN ('complete', 'streaming', 'interrupted', 'failed', 'cancelled')),
            stop_reason TEXT,
            error TEXT,
            stats TEXT NOT NULL DEFAULT '{}',
            tokens BLOB,  -- little-endian int32 array
            created REAL NOT NULL,
            updated REAL NOT NULL,
            UNIQUE (conversation_id, position)
        )""",
        # Startup looks for replies left streaming; the partial index keeps that instant.
        "CREATE INDEX messages_streaming ON messages (state) WHERE state = 'streaming'",
        """CREATE TABLE message_images (
            message_id INTEGER NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            identity TEXT NOT NULL,
            mime TEXT NOT NULL,
            size INTEGER NOT NULL,
            file TEXT NOT NULL,  -- relative to images/, e.g. 'ab/abcdef....png'
            PRIMARY KEY (message_id, position)
        )""",
        """CREATE TABLE settings (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL  -- JSON
        )""",
    )
    for statement in statements:
        conn.execute(statement)


def _migrate_to_2(conn: sqlite3.Connection) -> None:
    # Which model made a reply's token ids (Completion.model_identity). Ids stored before this
    # column have none, so they are never spliced again: those replies re-tokenize their text.
    conn.execute("ALTER TABLE messages ADD COLUMN tokens_model TEXT")


def _migrate_to_3(conn: sqlite3.Connection) -> None:
    # Messages become a tree, so regenerating or editing adds a version instead of deleting
    # the old one: a message's versions are its siblings, ``active`` marks the one selected
    # among them, and a conversation is the path from its active first message through
    # active children. Columns are added, not the table rebuilt: a rebuild would have to
    # drop the table, and with foreign keys on (they cannot be turned off inside the
    # migration's transaction) that cascades to message_images. ``position`` stays unique
    # per conversation as the creation order, which is the order along any path.
    statements = (
        "ALTER TABLE messages ADD COLUMN parent_id INTEGER REFERENCES messages (id) ON DELETE CASCADE",
        "ALTER TABLE messages ADD COLUMN active INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1))",
        # Who wrote a reply and with which sampling settings (JSON); NULL before version 3.
        "ALTER TABLE messages ADD COLUMN model_name TEXT",
        "ALTER TABLE messages ADD COLUMN model_file TEXT",
        "ALTER TABLE messages ADD COLUMN model_quantization TEXT",
        "ALTER TABLE messages ADD COLUMN sampling TEXT",
        # Deleted messages are hidden until purged, so Delete can be undone; deleted_with is
        # the message the user deleted, for every row that went with it.
        "ALTER TABLE messages ADD COLUMN deleted_at REAL",
        "ALTER TABLE messages ADD COLUMN deleted_with INTEGER",
        # Until now a conversation was a list: each message's parent is the one before it.
        """UPDATE messages SET parent_id = (
            SELECT p.id FROM messages p
            WHERE p.conversation_id = messages.conversation_id AND p.position < messages.position
            ORDER BY p.position DESC LIMIT 1
        )""",
        # Children of a message (the path, one step at a time) and first messages
        # (parent_id IS NULL, by conversation); also what ON DELETE CASCADE looks up.
        "CREATE INDEX messages_children ON messages (parent_id, conversation_id, active)",
    )
    for statement in statements:
        conn.execute(statement)


def _migrate_to_4(conn: sqlite3.Connection) -> None:
    # A reasoning model's thinking, kept apart from the reply's text: ``text`` stays the
    # answer (what is searched, copied and sent back next turn), and the window shows the
    # thinking in its own block with its tokens and time. ``thinking_seconds`` is NULL
    # while the thinking goes on (and stays so when a crash cut it off). Earlier replies
    # have no thinking: their text stays as written, tags and all.
    statements = (
        "ALTER TABLE messages ADD COLUMN thinking TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE messages ADD COLUMN thinking_tokens INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE messages ADD COLUMN thinking_seconds REAL",
    )
    for statement in statements:
        conn.execute(statement)


def _migrate_to_5(conn: sqlite3.Connection) -> None:
    # Chatting with documents (issue 28). The collections a conversation searches, by name
    # (they live in their own database, documents.sqlite3: no foreign key can reach them,
    # and a name that no longer exists is kept, harmlessly, in case it comes back). The
    # excerpts a reply was given, numbered as in its prompt, copied here so its citations
    # stay checkable after the collection changes or goes; and what the search found, for
    # the note under the reply (NULL: the reply was not grounded in documents).
    statements = (
        """CREATE TABLE conversation_collections (
            conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            PRIMARY KEY (conversation_id, name)
        )""",
        """CREATE TABLE message_sources (
            message_id INTEGER NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
            n INTEGER NOT NULL,  -- the number the prompt gave it: what the reply cites as [n]
            collection TEXT NOT NULL DEFAULT '',
            path TEXT NOT NULL,
            page INTEGER,  -- 1-based, PDFs
            last_page INTEGER,
            heading TEXT NOT NULL DEFAULT '',
            text TEXT NOT NULL,
            start_at INTEGER NOT NULL,  -- character offsets in the document's full text
            end_at INTEGER NOT NULL,
            PRIMARY KEY (message_id, n)
        )""",
        # 'excerpts', 'none' (nothing matched), 'whole' (the documents given whole), 'failed'.
        "ALTER TABLE messages ADD COLUMN grounding TEXT",
        "ALTER TABLE messages ADD COLUMN grounding_detail TEXT NOT NULL DEFAULT ''",
    )
    for statement in statements:
        conn.execute(statement)


def _migrate_to_6(conn: sqlite3.Connection) -> None:
    # Tools (issue 29): the rounds of tool calls a reply made before its answer, as JSON
    # (``engine.tools.rounds_json``): what each call was, whether the user allowed it, what it
    # returned. Kept with the reply, so regenerating or editing branches past them like any
    # text, and the next turn sends them back as the model's calls and the tools' results.
    conn.execute("ALTER TABLE messages ADD COLUMN tool_rounds TEXT NOT NULL DEFAULT ''")


# Index i migrates version i to i + 1. Append only: a released migration never changes.
MIGRATIONS: tuple[Migration, ...] = (
    _migrate_to_1,
    _migrate_to_2,
    _migrate_to_3,
    _migrate_to_4,
    _migrate_to_5,
    _migrate_to_6,
)
SCHEMA_VERSION = len(MIGRATIONS)

# The full-text index is not part of the versioned schema: whether FTS5 (with the trigram
# tokenizer, SQLite >= 3.34) exists depends on the SQLite build Python was linked with, and a
# trigger that writes to an FTS5 table would make every message insert fail on a build
# without it. So the index and its triggers are created (and filled) at open when the module
# exists, and the triggers are dropped when it does not: triggers present <=> index in sync.
_FTS_TRIGGERS = ("message_fts_insert", "message_fts_update", "message_fts_delete")
_FTS_SETUP = (
    # A regular (content-storing) table, not external-content: deleting by rowid is then
    # always correct, whatever the messages row held when it was indexed.
    "CREATE VIRTUAL TABLE IF NOT EXISTS message_fts USING fts5 (text, tokenize = 'trigram')",
    "DELETE FROM message_fts",
    "INSERT INTO message_fts (rowid, text) SELECT id, text FROM messages WHERE state != 'streaming'",
    # Streaming text is not indexed: update_reply stays one cheap UPDATE, and the finished
    # (or interrupted) text is indexed once when the state changes.
    """CREATE TRIGGER message_fts_insert AFTER INSERT ON messages
        WHEN new.state != 'streaming' BEGIN
            INSERT INTO message_fts (rowid, text) VALUES (new.id, new.text);
        END""",
    """CREATE TRIGGER message_fts_update AFTER UPDATE OF text, state ON messages
        WHEN NOT (old.state = 'streaming' AND new.state = 'streaming') BEGIN
            DELETE FROM message_fts WHERE rowid = old.id;
            INSERT INTO message_fts (rowid, text) SELECT new.id, new.text WHERE new.state != 'streaming';
        END""",
    """CREATE TRIGGER message_fts_delete AFTER DELETE ON messages BEGIN
            DELETE FROM message_fts WHERE rowid = old.id;
        END""",
)

_fts_available: bool | None = None


def fts_available() -> bool:
    """Whether this SQLite build has FTS5 with the trigram tokenizer."""
    global _fts_available
    if _fts_available is None:
        probe = sqlite3.connect(":memory:")
        try:
            probe.execute("CREATE VIRTUAL TABLE probe USING fts5 (x, tokenize = 'trigram')")
            _fts_available = True
        except sqlite3.Error:
            _fts_available = False
        finally:
            probe.close()
    return _fts_available


Transaction = Callable[[], AbstractContextManager[sqlite3.Connection]]
"""Opens one write transaction (``Store._transaction``): commits on exit, rolls back on error."""


def has_schema(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0] > 0


def backup_database(conn: sqlite3.Connection, path: Path, version: int) -> Path:
    """Copy the database with sqlite3's backup API (which includes what is still in the
    WAL), to a temporary name first so a crash never leaves half a backup under the
    real name."""
    target = path.with_name(f"{path.name}.v{version}.bak")
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    copy = sqlite3.connect(partial)
    try:
        conn.backup(copy)
    finally:
        copy.close()
    with open(partial, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(partial, target)
    fsync_directory(target.parent)
    return target


def migrate(
    conn: sqlite3.Connection,
    path: Path,
    version: int,
    migrations: Sequence[Migration],
    transaction: Transaction,
) -> Path | None:
    """Bring the database at ``path`` from ``version`` to ``len(migrations)``, one
    transaction per step, after a backup when it holds anything. Returns the backup's path
    (None when none was needed); raises ``MigrationFailed`` with the step that failed."""
    if version >= len(migrations):
        return None
    backup = backup_database(conn, path, version) if version > 0 or has_schema(conn) else None
    for target in range(version + 1, len(migrations) + 1):
        try:
            with transaction() as tx:
                # Another process may have migrated while this one waited for the lock.
                if tx.execute("PRAGMA user_version").fetchone()[0] >= target:
                    continue
                migrations[target - 1](tx)
                tx.execute(f"PRAGMA user_version = {target}")
        except sqlite3.Error as error:
            raise MigrationFailed(path, target - 1, str(error), backup) from error
    return backup


def _drop_search_triggers(conn: sqlite3.Connection) -> None:
    for name in _FTS_TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")


def sync_search_index(conn: sqlite3.Connection, transaction: Transaction) -> bool:
    """Create (and fill) the full-text index and its triggers when this SQLite has FTS5,
    drop the triggers when it does not. Returns whether search can use the index."""
    triggers = {
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'trigger' AND name LIKE 'message_fts_%'"
        )
    }
    if not fts_available():
        if triggers:
            with transaction() as tx:
                _drop_search_triggers(tx)
        return False
    if triggers != set(_FTS_TRIGGERS):
        with transaction() as tx:
            _drop_search_triggers(tx)
            for statement in _FTS_SETUP:
                tx.execute(statement)
    return True
