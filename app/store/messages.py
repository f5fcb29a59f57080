"""The message tree of the chat history: messages, their versions, and their soft delete.

Messages form a tree (``parent_id``): a message's versions are its siblings, one of them
selected (``active``), and a conversation is the path through the selected versions. Editing a
question adds a version of it (``edit_and_branch``); a deleted message is hidden with what goes
with it (``deleted_with``) until ``restore_message`` or ``purge_deleted_messages``. Images are
stored once per content (``app/store/files.py``) and referred to by ``message_images`` rows.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from app.store.database import Database, loads_object
from app.store.files import write_image
from app.store.records import (
    Grounding,
    ImageInput,
    ImageRef,
    Message,
    MessageSource,
    MessageState,
    NotFound,
    ReplyModel,
    Thinking,
    Versions,
)
from engine import Role

assert array("i").itemsize == 4, "token blobs are int32"


def encode_tokens(tokens: Sequence[int]) -> bytes | None:
    """Token ids as the ``tokens`` column keeps them: int32, little-endian (None: none)."""
    if not tokens:
        return None
    values = array("i", tokens)
    if sys.byteorder == "big":  # the file format is little-endian everywhere
        values.byteswap()
    return values.tobytes()


def decode_tokens(blob: bytes | None) -> tuple[int, ...]:
    if not blob:
        return ()
    values = array("i")
    values.frombytes(blob)
    if sys.byteorder == "big":
        values.byteswap()
    return tuple(values)


_MESSAGE_COLUMNS = (
    "m.id, m.conversation_id, m.position, m.role, m.text, m.state, m.stop_reason, m.error, m.stats, m.tokens,"
    " m.created, m.updated, m.tokens_model, m.parent_id, m.model_name, m.model_file, m.model_quantization,"
    " m.sampling,"
    # Its number among its versions not deleted (itself counted when it is), and how many.
    " (SELECT count(*) FROM messages s WHERE s.parent_id IS m.parent_id"
    " AND s.conversation_id = m.conversation_id AND (s.deleted_at IS NULL OR s.id = m.id) AND s.id <= m.id),"
    " (SELECT count(*) FROM messages s WHERE s.parent_id IS m.parent_id"
    " AND s.conversation_id = m.conversation_id AND (s.deleted_at IS NULL OR s.id = m.id)),"
    " m.thinking, m.thinking_tokens, m.thinking_seconds, m.grounding, m.grounding_detail, m.tool_rounds"
)
# The path a conversation shows: from its selected first message through selected children
# (deleted ones included: what followed them still follows). Its placeholder: the conversation.
_PATH = (
    "WITH RECURSIVE path (id) AS ("
    " SELECT id FROM messages WHERE parent_id IS NULL AND conversation_id = ? AND active"
    " UNION ALL SELECT m.id FROM path JOIN messages m ON m.parent_id = path.id WHERE m.active)"
)


class MessageTree(Database):
    """The ``Store``'s messages: reading them, adding them, their versions and deletes."""

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
        sources = self._sources_where(where, values, with_) if rows else {}
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
                stats=loads_object(row[8]),
                tokens=decode_tokens(row[9]),
                images=tuple(images.get(row[0], ())),
                created=row[10],
                updated=row[11],
                tokens_model=row[12] or "",
                parent_id=row[13],
                model=None if row[14] is None else ReplyModel(row[14], row[15] or "", row[16] or ""),
                sampling=loads_object(row[17]),
                version=row[18],
                version_count=row[19],
                thinking=Thinking(row[20], row[21], row[22]),
                grounding=None if row[23] is None else Grounding(row[23]),
                grounding_detail=row[24],
                tool_rounds=row[25],
                sources=tuple(sources.get(row[0], ())),
            )
            for row in rows
        ]

    def _sources_where(self, where: str, values: Sequence[Any], with_: str) -> dict[int, list[MessageSource]]:
        """The excerpts given to the messages matching ``where``, by message, in number order."""
        found: dict[int, list[MessageSource]] = {}
        rows = self._conn.execute(
            f"{with_} SELECT message_id, n, path, page, heading, text, start_at, end_at, last_page,"
            " collection FROM message_sources"
            f" WHERE message_id IN (SELECT m.id FROM messages m WHERE {where}) ORDER BY message_id, n",
            values,
        )
        for row in rows:
            found.setdefault(row[0], []).append(
                MessageSource(row[1], Path(row[2]), row[3], row[4], row[5], row[6], row[7], row[8], row[9])
            )
        return found

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
