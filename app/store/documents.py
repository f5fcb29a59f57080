"""What the chat history keeps of documents (issue 28): the collections each conversation
searches, and the excerpts each reply grounded in them was given (its Sources), with what
the search found. The collections themselves live in their own database (documents.sqlite3,
the engine's ``DocumentIndex``); here they are only names.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from app.store.messages import MessageTree
from app.store.records import Grounding, MessageSource, NotFound


class ConversationDocuments(MessageTree):
    """The ``Store``'s per-conversation collections and per-reply sources."""

    def conversation_collections(self, conversation_id: int) -> list[str]:
        """The collections the conversation searches, in name order (none: it searches none)."""
        rows = self._conn.execute(
            "SELECT name FROM conversation_collections WHERE conversation_id = ? ORDER BY name",
            (conversation_id,),
        )
        return [row[0] for row in rows]

    def set_conversation_collections(self, conversation_id: int, names: Iterable[str]) -> None:
        """Search exactly ``names`` in this conversation from now on."""
        chosen = sorted(set(names))
        with self._transaction() as conn:
            found = conn.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
            if found is None:
                raise NotFound(f"Conversation {conversation_id} does not exist.")
            conn.execute("DELETE FROM conversation_collections WHERE conversation_id = ?", (conversation_id,))
            conn.executemany(
                "INSERT INTO conversation_collections (conversation_id, name) VALUES (?, ?)",
                [(conversation_id, name) for name in chosen],
            )

    def save_grounding(
        self,
        message_id: int,
        grounding: Grounding,
        sources: Sequence[MessageSource] = (),
        detail: str = "",
    ) -> None:
        """What a reply was given: ``sources`` (numbered as in its prompt) and what the search
        found; replaces what it held (a reply is grounded once, when it begins)."""
        with self._transaction() as conn:
            cursor = conn.execute(
                "UPDATE messages SET grounding = ?, grounding_detail = ? WHERE id = ? AND role = 'assistant'",
                (grounding.value, detail, message_id),
            )
            if cursor.rowcount == 0:
                raise NotFound(f"Reply {message_id} does not exist.")
            conn.execute("DELETE FROM message_sources WHERE message_id = ?", (message_id,))
            conn.executemany(
                "INSERT INTO message_sources (message_id, n, collection, path, page, last_page, heading,"
                " text, start_at, end_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (message_id, s.n, s.collection, str(s.path), s.page, s.last_page, s.heading, s.text,
                     s.start, s.end)
                    for s in sources
                ],
            )  # fmt: skip
