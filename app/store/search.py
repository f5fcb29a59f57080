"""Searching the chat history: conversations whose title or messages contain some text.

The trigram FTS5 index (``message_fts``, kept by ``app/store/migrations.py``) answers queries
of 3 characters or more where SQLite has it; shorter ones, and builds without it, scan.
"""

from __future__ import annotations

from app.store.conversations import CONVERSATION_COLUMNS, Conversations
from app.store.records import Conversation


class ConversationSearch(Conversations):
    """The ``Store``'s search."""

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
            f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE deleted_at IS NULL"
            f" AND (instr(hearth_fold(title), ?) > 0 OR id IN ({content}))"
            " ORDER BY updated DESC, id DESC",
            (folded, *content_values),
        )
        return [self._conversation_from_row(row) for row in rows]
