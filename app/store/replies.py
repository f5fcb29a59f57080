"""A reply's lifecycle in the chat history: begun empty, streamed, finished, resumed.

``begin_reply`` (or ``regenerate_reply``, a new version of one) adds an assistant message in
state STREAMING; ``update_reply`` saves the text so far without an fsync (the hot path);
``finish_reply`` writes the outcome durably; ``resume_reply`` continues one; at startup
``mark_interrupted_replies`` marks those a crash cut off.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from typing import Any

from app.store.messages import MessageTree, encode_tokens
from app.store.records import Message, MessageState, NotFound, ReplyModel, Thinking
from engine import Role


class Replies(MessageTree):
    """The ``Store``'s reply lifecycle."""

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

    def save_tool_rounds(self, message_id: int, rounds: str) -> None:
        """The reply's rounds of tool calls so far (``engine.tools.rounds_json``), written at
        each step (asked, allowed, run), so a reply cut off mid-tool keeps what ran."""
        with self._transaction() as conn:
            cursor = conn.execute(
                "UPDATE messages SET tool_rounds = ?, updated = ? WHERE id = ? AND role = 'assistant'",
                (rounds, self._clock(), message_id),
            )
            if cursor.rowcount == 0:
                raise NotFound(f"Reply {message_id} does not exist.")

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
        blob = encode_tokens(tokens)
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
