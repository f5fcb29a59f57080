"""Conversations in the chat history: create, read, list, rename, their settings, soft delete.

A deleted conversation is hidden (``deleted_at``) until ``undo_delete``, or gone for good with
``purge_deleted``, which takes its messages and image rows along (ON DELETE CASCADE).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from app.store.database import Database, loads_object
from app.store.records import Conversation, NotFound

CONVERSATION_COLUMNS = "id, title, created, updated, system_prompt, sampling, preset, model_hint, deleted_at"


class Conversations(Database):
    """The ``Store``'s conversation queries."""

    def _conversation_from_row(self, row: Sequence[Any]) -> Conversation:
        return Conversation(
            id=row[0],
            title=row[1],
            created=row[2],
            updated=row[3],
            system_prompt=row[4],
            sampling=loads_object(row[5]),
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
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"Conversation {conversation_id} does not exist.")
        return self._conversation_from_row(row)

    def list_conversations(self, include_deleted: bool = False) -> list[Conversation]:
        where = "" if include_deleted else "WHERE deleted_at IS NULL"
        rows = self._conn.execute(
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations {where} ORDER BY updated DESC, id DESC"
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
