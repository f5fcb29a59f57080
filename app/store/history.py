"""Hearth's chat history: conversations, messages, images and settings in SQLite.

Plain Python and ``sqlite3``, no Qt: the GUI thread calls it directly (every write is one
short transaction) and tests and crash helpers use it without a QApplication.

Layout beside the database file (``AppPaths.database_file``)::

    hearth.sqlite3            the database, WAL mode (plus -wal / -shm while open)
    hearth.sqlite3.v1.bak     a copy taken before migrating a version-1 database
    images/ab/abcdef....png   each image once, named by the sha256 of its bytes

What the app does with it::

    store = Store(paths.database_file)       # migrates (after a backup) or refuses a newer DB
    store.mark_interrupted_replies()         # at startup: replies cut off by a crash
    store.collect_garbage()                  # image files nothing refers to any more
    reply = store.begin_reply(conversation.id, ReplyModel(name, path, quantization), sampling)
    store.update_reply(reply.id, text)       # while streaming, at most every 0.5 s: one UPDATE
    store.finish_reply(reply.id, completion.text, MessageState.COMPLETE,
                       completion.stop_reason, ReplyStats.from_completion(completion).to_dict(),
                       completion.reply_tokens, tokens_model=completion.model_identity,
                       thinking=Thinking(thought, tokens, seconds))  # a reasoning model's, apart
    again = store.regenerate_reply(reply.id, ...)   # a second version; the first is kept
    store.select_version(reply.id)           # show the first again: store.versions(reply.id)
    store.edit_and_branch(question.id, text) # the question edited: the old branch is kept
    store.delete_message(question.id)        # hidden (the turn) until restore_message
    store.messages(conversation.id)          # the path shown, what the model is sent

Messages form a tree (``parent_id``): a message's versions are its siblings, one of them
selected (``active``), and a conversation is the path through the selected versions.

The schema and its migrations are in ``app/store/migrations.py``, the files beside the database
in ``app/store/files.py``, the row types and errors in ``app/store/records.py``; this module
re-exports their public names and holds the ``Store`` and its queries.

The store expects one Hearth process per data directory: a second one starting up would
mark the first one's streaming replies as interrupted.
"""

from __future__ import annotations

import enum
import json
import sqlite3
import sys
import time
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from app.store.files import remove_unreferenced, write_image
from app.store.migrations import (
    MIGRATIONS,
    SCHEMA_VERSION,
    Migration,
    fts_available,
    migrate,
    sync_search_index,
)
from app.store.records import (
    Conversation,
    DatabaseTooNew,
    DatabaseUnreadable,
    ImageInput,
    ImageRef,
    Message,
    MessageState,
    MigrationFailed,
    NotFound,
    ReplyModel,
    StoreError,
    Thinking,
    Versions,
)
from engine import Role

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Conversation",
    "DatabaseTooNew",
    "DatabaseUnreadable",
    "ImageInput",
    "ImageRef",
    "Message",
    "MessageState",
    "Migration",
    "MigrationFailed",
    "NotFound",
    "ReplyModel",
    "Store",
    "StoreError",
    "Thinking",
    "Versions",
    "fts_available",
]

# --------------------------------------------------------------------------- helpers

assert array("i").itemsize == 4, "token blobs are int32"


def _encode_tokens(tokens: Sequence[int]) -> bytes | None:
    if not tokens:
        return None
    values = array("i", tokens)
    if sys.byteorder == "big":  # the file format is little-endian everywhere
        values.byteswap()
    return values.tobytes()


def _decode_tokens(blob: bytes | None) -> tuple[int, ...]:
    if not blob:
        return ()
    values = array("i")
    values.frombytes(blob)
    if sys.byteorder == "big":
        values.byteswap()
    return tuple(values)


def _fold(text: str | None) -> str | None:
    return None if text is None else text.casefold()


def _loads_object(text: str | None) -> dict[str, Any]:
    value = json.loads(text) if text else {}
    return value if isinstance(value, dict) else {}


_CONVERSATION_COLUMNS = "id, title, created, updated, system_prompt, sampling, preset, model_hint, deleted_at"
_MESSAGE_COLUMNS = (
    "m.id, m.conversation_id, m.position, m.role, m.text, m.state, m.stop_reason, m.error, m.stats, m.tokens,"
    " m.created, m.updated, m.tokens_model, m.parent_id, m.model_name, m.model_file, m.model_quantization,"
    " m.sampling,"
    # Its number among its versions not deleted (itself counted when it is), and how many.
    " (SELECT count(*) FROM messages s WHERE s.parent_id IS m.parent_id"
    " AND s.conversation_id = m.conversation_id AND (s.deleted_at IS NULL OR s.id = m.id) AND s.id <= m.id),"
    " (SELECT count(*) FROM messages s WHERE s.parent_id IS m.parent_id"
    " AND s.conversation_id = m.conversation_id AND (s.deleted_at IS NULL OR s.id = m.id)),"
    " m.thinking, m.thinking_tokens, m.thinking_seconds"
)
# The path a conversation shows: from its selected first message through selected children
# (deleted ones included: what followed them still follows). Its placeholder: the conversation.
_PATH = (
    "WITH RECURSIVE path (id) AS ("
    " SELECT id FROM messages WHERE parent_id IS NULL AND conversation_id = ? AND active"
    " UNION ALL SELECT m.id FROM path JOIN messages m ON m.parent_id = path.id WHERE m.active)"
)


# --------------------------------------------------------------------------- store


class Store:
    """The chat history. Not thread-safe: use it from one thread (the GUI thread); sqlite3's
    same-thread check is left on to catch mistakes."""

    BUSY_TIMEOUT_MS = 5000

    def __init__(
        self,
        path: Path | str,
        *,
        migrations: Sequence[Migration] = MIGRATIONS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.images_dir = self.path.parent / "images"
        self.backup_path: Path | None = None  # the copy taken before migrating, if any
        self._clock = clock
        self.path.parent.mkdir(parents=True, exist_ok=True)

        # Autocommit (isolation_level=None): a lone statement commits by itself (update_reply),
        # and every multi-statement write is an explicit BEGIN IMMEDIATE ... COMMIT.
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=self.BUSY_TIMEOUT_MS / 1000)
        try:
            # Read the version before changing anything (journal mode included): a newer
            # database and a non-database file must be left byte for byte as they are.
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as error:
            conn.close()
            raise DatabaseUnreadable(self.path, str(error)) from error
        if version > len(migrations):
            conn.close()
            raise DatabaseTooNew(self.path, version, len(migrations))
        self._conn = conn
        try:
            conn.execute(f"PRAGMA busy_timeout = {self.BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            # WAL + NORMAL: a commit appends to the WAL with write() and does not fsync, so a
            # killed or crashed *process* loses nothing (the OS still has the pages and writes
            # them), and the database is always consistent. A *power loss* can lose the last
            # commits since the previous fsync (still consistent: WAL frames are checksummed).
            # update_reply, the hot path, runs like that: streaming text is rewritten every
            # half second anyway. Every other write is a user action or a finished reply and
            # commits with FULL (see _transaction), whose WAL fsync also makes the earlier
            # NORMAL commits durable; about a millisecond on an SSD, a few times a minute.
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            # WAL files keep their largest size after a checkpoint; cap what stays on disk.
            conn.execute("PRAGMA journal_size_limit = 4194304")
            conn.create_function("hearth_fold", 1, _fold, deterministic=True)
            self.backup_path = migrate(conn, self.path, version, migrations, self._transaction)
            self._fts = sync_search_index(conn, self._transaction)
        except BaseException:
            conn.close()
            raise

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        with suppress(sqlite3.Error):  # statistics only; closing matters more
            self._conn.execute("PRAGMA optimize")
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        return self._conn.execute("PRAGMA user_version").fetchone()[0]

    @property
    def journal_mode(self) -> str:
        return self._conn.execute("PRAGMA journal_mode").fetchone()[0]

    @property
    def search_uses_fts(self) -> bool:
        return self._fts

    @contextmanager
    def _transaction(self, durable: bool = True) -> Iterator[sqlite3.Connection]:
        # IMMEDIATE takes the write lock up front, so a busy database waits (busy_timeout)
        # at BEGIN instead of failing halfway through the transaction.
        if durable:
            self._conn.execute("PRAGMA synchronous = FULL")
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
        finally:
            if durable:
                self._conn.execute("PRAGMA synchronous = NORMAL")

    # ------------------------------------------------------------------ conversations

    def _conversation_from_row(self, row: Sequence[Any]) -> Conversation:
        return Conversation(
            id=row[0],
            title=row[1],
            created=row[2],
            updated=row[3],
            system_prompt=row[4],
            sampling=_loads_object(row[5]),
            preset=row[6],
            model_hint=row[7],
            deleted_at=row[8],
        )

    def create_conversation(
        self,
        title: str,
        system_prompt: str | None = None,
        sampling: Mapping[str, Any] | None = None,
        *,
        preset: str | None = None,
        model_hint: str | None = None,
    ) -> Conversation:
        now = self._clock()
        sampling_json = json.dumps(dict(sampling or {}))
        with self._transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO conversations (title, created, updated, system_prompt, sampling, preset,"
                " model_hint) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (title, now, now, system_prompt, sampling_json, preset, model_hint),
            )
            conversation_id = cursor.lastrowid
        assert conversation_id is not None
        return self.get_conversation(conversation_id)

    def get_conversation(self, conversation_id: int) -> Conversation:
        row = self._conn.execute(
            f"SELECT {_CONVERSATION_COLUMNS} FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"Conversation {conversation_id} does not exist.")
        return self._conversation_from_row(row)

    def list_conversations(self, include_deleted: bool = False) -> list[Conversation]:
        where = "" if include_deleted else "WHERE deleted_at IS NULL"
        rows = self._conn.execute(
            f"SELECT {_CONVERSATION_COLUMNS} FROM conversations {where} ORDER BY updated DESC, id DESC"
        )
        return [self._conversation_from_row(row) for row in rows]

    def _update_conversation(self, conversation_id: int, assignments: str, values: Sequence[Any]) -> None:
        with self._transaction() as conn:
            cursor = conn.execute(
                f"UPDATE conversations SET {assignments} WHERE id = ?", (*values, conversation_id)
            )
            if cursor.rowcount == 0:
                raise NotFound(f"Conversation {conversation_id} does not exist.")

    def rename(self, conversation_id: int, title: str) -> None:
        self._update_conversation(conversation_id, "title = ?", (title,))

    def set_system_prompt(self, conversation_id: int, system_prompt: str | None) -> None:
        self._update_conversation(conversation_id, "system_prompt = ?", (system_prompt,))

    def set_sampling(
        self, conversation_id: int, sampling: Mapping[str, Any], preset: str | None = None
    ) -> None:
        """Replace the sampling settings; ``preset`` names them when they came from one
        (None: custom values)."""
        self._update_conversation(
            conversation_id, "sampling = ?, preset = ?", (json.dumps(dict(sampling)), preset)
        )

    def set_model_hint(self, conversation_id: int, model_hint: str | None) -> None:
        self._update_conversation(conversation_id, "model_hint = ?", (model_hint,))

    def delete_conversation(self, conversation_id: int) -> None:
        """Soft delete: hidden from lists and search until ``undo_delete`` or ``purge_deleted``."""
        self._update_conversation(conversation_id, "deleted_at = ?", (self._clock(),))

    def undo_delete(self, conversation_id: int) -> None:
        self._update_conversation(conversation_id, "deleted_at = NULL", ())

    def purge_deleted(self, older_than: float = 0.0) -> int:
        """Delete for good the conversations deleted at least ``older_than`` seconds ago
        (their messages and image rows go with them), then remove image files nothing
        refers to any more. Returns how many conversations were purged."""
        cutoff = self._clock() - older_than
        with self._transaction() as conn:
            purged = conn.execute(
                "DELETE FROM conversations WHERE deleted_at IS NOT NULL AND deleted_at <= ?", (cutoff,)
            ).rowcount
        if purged:
            self.collect_garbage()
        return purged

    def search(self, query: str) -> list[Conversation]:
        """Conversations (not deleted) whose title or any message text contains ``query``,
        case-insensitively (a substring: "ödi" finds "Schrödinger"), most recently updated
        first. Every version counts, shown or not; deleted messages do not."""
        needle = query.strip()
        if not needle:
            return self.list_conversations()
        folded = needle.casefold()
        # The trigram index needs 3 characters; shorter queries (and builds without FTS5)
        # scan, which is fine for one or two characters typed into a search box.
        if self._fts and len(needle) >= 3:
            # Streaming replies are not in the index; the partial index on state finds the
            # few there are, and they are scanned.
            content = (
                "SELECT m.conversation_id FROM message_fts f JOIN messages m ON m.id = f.rowid"
                " WHERE message_fts MATCH ? AND m.deleted_at IS NULL"
                " UNION SELECT conversation_id FROM messages"
                " WHERE state = 'streaming' AND deleted_at IS NULL AND instr(hearth_fold(text), ?) > 0"
            )
            content_values: tuple[str, ...] = ('"' + needle.replace('"', '""') + '"', folded)
        else:
            content = (
                "SELECT conversation_id FROM messages"
                " WHERE deleted_at IS NULL AND instr(hearth_fold(text), ?) > 0"
            )
            content_values = (folded,)
        rows = self._conn.execute(
            f"SELECT {_CONVERSATION_COLUMNS} FROM conversations WHERE deleted_at IS NULL"
            f" AND (instr(hearth_fold(title), ?) > 0 OR id IN ({content}))"
            " ORDER BY updated DESC, id DESC",
            (folded, *content_values),
        )
        return [self._conversation_from_row(row) for row in rows]

    # ------------------------------------------------------------------ messages

    def _image_ref(self, row: Sequence[Any]) -> ImageRef:
        sha256, identity, mime, size, file = row
        return ImageRef(sha256=sha256, identity=identity, mime=mime, size=size, path=self.images_dir / file)

    def _messages_where(self, where: str, values: Sequence[Any], with_: str = "") -> list[Message]:
        """Messages (alias ``m``) matching ``where``, in conversation order; ``with_`` is a
        WITH clause ``where`` may use (its placeholders come first in ``values``)."""
        rows = self._conn.execute(
            f"{with_} SELECT {_MESSAGE_COLUMNS} FROM messages m WHERE {where}"
            " ORDER BY m.conversation_id, m.position",
            values,
        ).fetchall()
        images: dict[int, list[ImageRef]] = {}
        if rows:
            image_rows = self._conn.execute(
                f"{with_} SELECT message_id, sha256, identity, mime, size, file FROM message_images"
                f" WHERE message_id IN (SELECT m.id FROM messages m WHERE {where})"
                " ORDER BY message_id, position",
                values,
            )
            for row in image_rows:
                images.setdefault(row[0], []).append(self._image_ref(row[1:]))
        return [
            Message(
                id=row[0],
                conversation_id=row[1],
                position=row[2],
                role=Role(row[3]),
                text=row[4],
                state=MessageState(row[5]),
                stop_reason=row[6],
                error=row[7],
                stats=_loads_object(row[8]),
                tokens=_decode_tokens(row[9]),
                images=tuple(images.get(row[0], ())),
                created=row[10],
                updated=row[11],
                tokens_model=row[12] or "",
                parent_id=row[13],
                model=None if row[14] is None else ReplyModel(row[14], row[15] or "", row[16] or ""),
                sampling=_loads_object(row[17]),
                version=row[18],
                version_count=row[19],
                thinking=Thinking(row[20], row[21], row[22]),
            )
            for row in rows
        ]

    def get_message(self, message_id: int) -> Message:
        """Any message, deleted or on another version's branch included."""
        found = self._messages_where("m.id = ?", (message_id,))
        if not found:
            raise NotFound(f"Message {message_id} does not exist.")
        return found[0]

    def messages(self, conversation_id: int) -> list[Message]:
        """What the conversation shows and sends to the model: the path through the
        versions selected, without deleted messages."""
        return self._messages_where(
            "m.id IN (SELECT id FROM path) AND m.deleted_at IS NULL", (conversation_id,), _PATH
        )

    def _row(self, conn: sqlite3.Connection, message_id: int, role: Role | None = None) -> tuple[Any, ...]:
        """(conversation_id, parent_id, role, active) of a message not deleted, or NotFound."""
        row = conn.execute(
            "SELECT conversation_id, parent_id, role, active FROM messages"
            " WHERE id = ? AND deleted_at IS NULL",
            (message_id,),
        ).fetchone()
        if row is None or (role is not None and row[2] != role.value):
            kind = {None: "Message", Role.USER: "User message", Role.ASSISTANT: "Reply"}.get(role, "Message")
            raise NotFound(f"{kind} {message_id} does not exist.")
        return row

    def _insert_message(
        self,
        conn: sqlite3.Connection,
        conversation_id: int,
        role: Role,
        text: str,
        state: MessageState,
        now: float,
        *,
        sibling_of: int | None = None,
        model: ReplyModel | None = None,
        sampling: Mapping[str, Any] | None = None,
    ) -> int:
        """A message row, which becomes the selected version where it goes: a new version of
        ``sibling_of``, else last on the conversation's path. The conversation counts as
        updated ``now``. Returns the new id."""
        if conn.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone() is None:
            raise NotFound(f"Conversation {conversation_id} does not exist.")
        if sibling_of is not None:
            parent_id = self._row(conn, sibling_of)[1]
        else:
            # The path's last message has no children: the new one is selected as it is.
            # Deleted messages still on the path count: what comes after them stays after them.
            tail = conn.execute(
                f"{_PATH} SELECT m.id FROM path JOIN messages m ON m.id = path.id"
                " ORDER BY m.position DESC LIMIT 1",
                (conversation_id,),
            ).fetchone()
            parent_id = None if tail is None else tail[0]
        position = conn.execute(
            "SELECT coalesce(max(position), -1) + 1 FROM messages WHERE conversation_id = ?",
            (conversation_id,),
        ).fetchone()[0]
        message_id = conn.execute(
            "INSERT INTO messages (conversation_id, position, role, text, state, created, updated, parent_id,"
            " model_name, model_file, model_quantization, sampling, active)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                conversation_id,
                position,
                role.value,
                text,
                state.value,
                now,
                now,
                parent_id,
                None if model is None else model.name,
                None if model is None else model.file,
                None if model is None else model.quantization,
                None if sampling is None else json.dumps(dict(sampling)),
                sibling_of is None,
            ),
        ).lastrowid
        assert message_id is not None
        if sibling_of is not None:
            self._select(conn, message_id)
        conn.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation_id))
        return message_id

    def add_message(
        self,
        conversation_id: int,
        role: Role | str,
        text: str,
        images: Sequence[ImageInput] = (),
    ) -> Message:
        """A finished message (the user's turn, a system note), last on the conversation's
        path. Images are (bytes, mime) or (bytes, mime, identity); identical bytes are
        stored once."""
        role = Role(role)
        stored = []
        for image in images:
            data, mime = image[0], image[1]
            sha256, mime, file = write_image(self.images_dir, data, mime)
            identity = image[2] if len(image) > 2 else sha256  # type: ignore[misc]
            stored.append((sha256, identity, mime, len(data), file))
        now = self._clock()
        with self._transaction() as conn:
            message_id = self._insert_message(conn, conversation_id, role, text, MessageState.COMPLETE, now)
            conn.executemany(
                "INSERT INTO message_images (message_id, position, sha256, identity, mime, size, file)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(message_id, index, *image) for index, image in enumerate(stored)],
            )
        return self.get_message(message_id)

    def begin_reply(
        self,
        conversation_id: int,
        model: ReplyModel | None = None,
        sampling: Mapping[str, Any] | None = None,
    ) -> Message:
        """An empty assistant message in state STREAMING, last on the conversation's path,
        written by ``model`` with ``sampling`` (any JSON object: the GUI stores
        ``SamplingSettings.to_dict()``)."""
        now = self._clock()
        with self._transaction() as conn:
            message_id = self._insert_message(
                conn,
                conversation_id,
                Role.ASSISTANT,
                "",
                MessageState.STREAMING,
                now,
                model=model,
                sampling=sampling,
            )
        return self.get_message(message_id)

    def regenerate_reply(
        self,
        message_id: int,
        model: ReplyModel | None = None,
        sampling: Mapping[str, Any] | None = None,
    ) -> Message:
        """A new version of a reply: empty and STREAMING, answering the same message, and
        the one shown from now on. The earlier reply (and what followed it) stays as an
        earlier version."""
        now = self._clock()
        with self._transaction() as conn:
            conversation_id = self._row(conn, message_id, Role.ASSISTANT)[0]
            reply_id = self._insert_message(
                conn,
                conversation_id,
                Role.ASSISTANT,
                "",
                MessageState.STREAMING,
                now,
                sibling_of=message_id,
                model=model,
                sampling=sampling,
            )
        return self.get_message(reply_id)

    def edit_and_branch(self, message_id: int, text: str) -> Message:
        """A new version of a user message with ``text`` (and the same images), shown from
        now on with nothing after it yet. The earlier text and everything that followed it
        stay as an earlier branch."""
        now = self._clock()
        with self._transaction() as conn:
            conversation_id = self._row(conn, message_id, Role.USER)[0]
            edited = self._insert_message(
                conn, conversation_id, Role.USER, text, MessageState.COMPLETE, now, sibling_of=message_id
            )
            conn.execute(
                "INSERT INTO message_images (message_id, position, sha256, identity, mime, size, file)"
                " SELECT ?, position, sha256, identity, mime, size, file FROM message_images"
                " WHERE message_id = ?",
                (edited, message_id),
            )
        return self.get_message(edited)

    def versions(self, message_id: int) -> Versions:
        """The message's versions not deleted (``current``: this message), oldest first."""
        conversation_id, parent_id, _role, _active = self._row(self._conn, message_id)
        ids = self._conn.execute(
            "SELECT id FROM messages WHERE parent_id IS ? AND conversation_id = ? AND deleted_at IS NULL"
            " ORDER BY id",
            (parent_id, conversation_id),
        ).fetchall()
        return Versions(tuple(row[0] for row in ids), message_id)

    def select_version(self, message_id: int) -> None:
        """Show this version (and, after it, the versions selected in its branch)."""
        with self._transaction() as conn:
            self._row(conn, message_id)  # not a deleted one
            self._select(conn, message_id)

    @staticmethod
    def _select(conn: sqlite3.Connection, message_id: int) -> None:
        """Make the message the version selected among its siblings, and each message before
        it that is not selected too: the conversation's path then goes through it."""
        current: int | None = message_id
        while current is not None:
            conversation_id, parent_id, active = conn.execute(
                "SELECT conversation_id, parent_id, active FROM messages WHERE id = ?", (current,)
            ).fetchone()
            if not active:
                conn.execute(
                    "UPDATE messages SET active = (id = ?) WHERE parent_id IS ? AND conversation_id = ?",
                    (current, parent_id, conversation_id),
                )
            current = parent_id

    def delete_message(self, message_id: int) -> int:
        """Hide a message until ``restore_message`` (or ``purge_deleted_messages``); returns
        how many messages went with it.

        A message that has other versions goes as a version: with everything after it on
        its branch, and the version before it (or else after it) is shown instead. A
        message that is its only version leaves the conversation, and what followed it
        stays: a user message takes the reply to it along (its turn), a reply goes alone."""
        now = self._clock()
        with self._transaction() as conn:
            conversation_id, parent_id, role, active = self._row(conn, message_id)
            others = [
                row[0]
                for row in conn.execute(
                    "SELECT id FROM messages WHERE parent_id IS ? AND conversation_id = ?"
                    " AND deleted_at IS NULL AND id != ? ORDER BY id",
                    (parent_id, conversation_id, message_id),
                )
            ]
            if others:
                hidden = self._subtree(conn, message_id)
                if active:
                    earlier = [other for other in others if other < message_id]
                    self._select(conn, earlier[-1] if earlier else others[0])
            else:
                hidden = [message_id]
                if role == Role.USER.value:
                    # Its reply goes too, every version of it; a version not shown takes its
                    # branch (nothing could reach it any more), the one shown leaves what
                    # followed it in the conversation.
                    for child, child_active in conn.execute(
                        "SELECT id, active FROM messages WHERE parent_id = ? AND role = 'assistant'"
                        " AND deleted_at IS NULL",
                        (message_id,),
                    ).fetchall():
                        hidden.extend([child] if child_active else self._subtree(conn, child))
            placeholders = ", ".join("?" * len(hidden))
            return conn.execute(
                "UPDATE messages SET deleted_at = ?, deleted_with = ?"
                f" WHERE id IN ({placeholders}) AND deleted_at IS NULL",
                (now, message_id, *hidden),
            ).rowcount

    @staticmethod
    def _subtree(conn: sqlite3.Connection, message_id: int) -> list[int]:
        """The message and everything after it on any branch."""
        rows = conn.execute(
            "WITH RECURSIVE branch (id) AS (SELECT ? UNION ALL"
            " SELECT m.id FROM messages m JOIN branch ON m.parent_id = branch.id)"
            " SELECT id FROM branch",
            (message_id,),
        )
        return [row[0] for row in rows]

    def restore_message(self, message_id: int) -> int:
        """Undo ``delete_message(message_id)``: it and what went with it come back, and it is
        the version shown. Returns how many messages came back (0: none was deleted)."""
        with self._transaction() as conn:
            restored = conn.execute(
                "UPDATE messages SET deleted_at = NULL, deleted_with = NULL WHERE deleted_with = ?",
                (message_id,),
            ).rowcount
            if restored:
                self._select(conn, message_id)
            return restored

    def purge_deleted_messages(self, older_than: float = 0.0) -> int:
        """Delete for good the messages deleted at least ``older_than`` seconds ago; what
        followed a message that left the conversation is moved up to its parent. Returns how
        many messages went; image files nothing refers to any more are removed."""
        cutoff = self._clock() - older_than
        with self._transaction() as conn:
            count = conn.execute("SELECT count(*) FROM messages WHERE deleted_at <= ?", (cutoff,)).fetchone()[
                0
            ]
            # A version not shown is deleted with its branch (ON DELETE CASCADE)...
            conn.execute("DELETE FROM messages WHERE deleted_at <= ? AND NOT active", (cutoff,))
            # ...a message on the path hands what follows it to its parent first.
            for (message_id,) in conn.execute(
                "SELECT id FROM messages WHERE deleted_at <= ? ORDER BY position", (cutoff,)
            ).fetchall():
                conn.execute(
                    "UPDATE messages SET parent_id = (SELECT parent_id FROM messages WHERE id = ?)"
                    " WHERE parent_id = ?",
                    (message_id, message_id),
                )
                conn.execute("DELETE FROM messages WHERE id = ?", (message_id,))
        if count:
            self.collect_garbage()
        return count

    def update_reply(self, message_id: int, text: str, thinking: Thinking | None = None) -> bool:
        """Save the text streamed so far (and the thinking, when given): one UPDATE in its own
        implicit transaction, no fsync (synchronous=NORMAL), not indexed for search. False
        when the message is not streaming any more (finished, purged)."""
        if thinking is None:
            cursor = self._conn.execute(
                "UPDATE messages SET text = ?, updated = ? WHERE id = ? AND state = 'streaming'",
                (text, self._clock(), message_id),
            )
        else:
            cursor = self._conn.execute(
                "UPDATE messages SET text = ?, thinking = ?, thinking_tokens = ?, thinking_seconds = ?,"
                " updated = ? WHERE id = ? AND state = 'streaming'",
                (text, thinking.text, thinking.tokens, thinking.seconds, self._clock(), message_id),
            )
        return cursor.rowcount == 1

    def finish_reply(
        self,
        message_id: int,
        text: str,
        state: MessageState | str = MessageState.COMPLETE,
        stop_reason: str | enum.Enum | None = None,
        stats: Mapping[str, Any] | None = None,
        tokens: Sequence[int] = (),
        error: str | None = None,
        tokens_model: str = "",
        thinking: Thinking | None = None,
    ) -> Message:
        """The reply's final text and outcome. ``tokens`` must spell exactly ``text``
        (``Completion.reply_tokens``) or be empty, and ``tokens_model`` names the model that
        made them (``Completion.model_identity``); ``stats`` is any JSON object (the GUI
        stores ``app.chat.ReplyStats.to_dict()``); ``thinking`` is a reasoning model's
        thinking, kept as it is when None."""
        state = MessageState(state)
        if state is MessageState.STREAMING:
            raise ValueError("finish_reply needs a final state, not STREAMING")
        if isinstance(stop_reason, enum.Enum):
            stop_reason = str(stop_reason.value)
        stats_json = json.dumps(dict(stats or {}))
        blob = _encode_tokens(tokens)
        now = self._clock()
        with self._transaction() as conn:
            cursor = conn.execute(
                "UPDATE messages SET text = ?, state = ?, stop_reason = ?, error = ?, stats = ?, tokens = ?,"
                " tokens_model = ?, updated = ? WHERE id = ? AND role = 'assistant'",
                (
                    text,
                    state.value,
                    stop_reason,
                    error,
                    stats_json,
                    blob,
                    tokens_model or None,
                    now,
                    message_id,
                ),
            )
            if cursor.rowcount == 0:
                raise NotFound(f"Reply {message_id} does not exist.")
            if thinking is not None:
                conn.execute(
                    "UPDATE messages SET thinking = ?, thinking_tokens = ?, thinking_seconds = ?"
                    " WHERE id = ?",
                    (thinking.text, thinking.tokens, thinking.seconds, message_id),
                )
            conn.execute(
                "UPDATE conversations SET updated = ?"
                " WHERE id = (SELECT conversation_id FROM messages WHERE id = ?)",
                (now, message_id),
            )
        return self.get_message(message_id)

    def resume_reply(self, message_id: int) -> Message:
        """Continue a reply (interrupted, cancelled, cut at max tokens): back to STREAMING with
        its text kept. Its tokens are dropped: finish_reply must give ids for the whole text."""
        with self._transaction() as conn:
            cursor = conn.execute(
                "UPDATE messages SET state = 'streaming', tokens = NULL, tokens_model = NULL,"
                " stop_reason = NULL, error = NULL, updated = ? WHERE id = ? AND role = 'assistant'",
                (self._clock(), message_id),
            )
            if cursor.rowcount == 0:
                raise NotFound(f"Reply {message_id} does not exist.")
        return self.get_message(message_id)

    def mark_interrupted_replies(self) -> int:
        """At startup: replies left STREAMING by a crash or kill become INTERRUPTED, with the
        text saved so far. Returns how many."""
        with self._transaction() as conn:
            return conn.execute(
                "UPDATE messages SET state = 'interrupted' WHERE state = 'streaming'"
            ).rowcount

    # ------------------------------------------------------------------ files

    def collect_garbage(self) -> int:
        """Remove image files no message refers to (soft-deleted conversations and messages
        still count as referring: they can be undone) and temporary files left by a crash.
        Returns how many files went."""
        referenced = {row[0] for row in self._conn.execute("SELECT DISTINCT file FROM message_images")}
        return remove_unreferenced(self.images_dir, referenced)

    # ------------------------------------------------------------------ settings

    def get_setting(self, key: str, default: Any = None) -> Any:
        row = self._conn.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def set_setting(self, key: str, value: Any) -> None:
        """Any JSON-able value (per-model load settings, composer preferences...)."""
        encoded = json.dumps(value)
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO settings (key, value) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, encoded),
            )

    def delete_setting(self, key: str) -> None:
        with self._transaction() as conn:
            conn.execute("DELETE FROM settings WHERE key = ?", (key,))
