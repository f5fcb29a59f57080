"""The chat as the widgets show it: a stored message in the message view (its text or the reply
streaming into it, its state, images, stats, and who wrote it with which settings), a
conversation in the list, what an empty conversation and the Undo bar say."""

from __future__ import annotations

from datetime import datetime

from app.chat import (
    ConversationSummary,
    ImageThumb,
    MessageData,
    MessageState,
    ReplyStats,
    SamplingSettings,
    Thought,
)
from app.conversation.document_context import documents_note, view_sources
from app.conversation.reply_in_flight import ReplyInFlight
from app.conversation.tool_blocks import copy_text, shown_text
from app.store.history import Conversation, Message
from app.store.history import MessageState as StoredState
from engine import Role, rounds_from_json

NEW_TITLE = "New chat"


def title_from(text: str) -> str:
    """A new conversation's title: its first message, on one line, cut at 48 characters."""
    line = " ".join(text.split())
    return (line[:48] + "…") if len(line) > 48 else (line or NEW_TITLE)


VIEW_STATE = {
    StoredState.COMPLETE: MessageState.DONE,
    StoredState.STREAMING: MessageState.STREAMING,
    StoredState.INTERRUPTED: MessageState.INTERRUPTED,
    StoredState.FAILED: MessageState.FAILED,
    StoredState.CANCELLED: MessageState.CANCELLED,
}


def view_message(message: Message, streaming: ReplyInFlight | None, can_regenerate: bool) -> MessageData:
    """``streaming``: the reply in flight that writes this message, if one does."""
    stats = ReplyStats.from_dict(message.stats) if message.stats else None
    images = tuple(ImageThumb(ref.read_bytes(), ref.path.name) for ref in message.images if ref.path.exists())
    waiting = None
    copy = None
    if streaming is not None:
        thought = streaming.thought()
        text = streaming.shown_text
        copy = streaming.copy_text if streaming.tools is not None else None
        state = MessageState.STREAMING if text or thought else MessageState.PENDING
        waiting = streaming.waiting if state is MessageState.PENDING else None  # shown again as it was
    else:
        text, state = message.text, VIEW_STATE.get(message.state, MessageState.DONE)
        if message.tool_rounds:
            rounds = rounds_from_json(message.tool_rounds)
            text, copy = shown_text(rounds, message.text), copy_text(rounds, message.text)
        thinking = message.thinking
        thought = Thought(thinking.text, thinking.tokens, thinking.seconds) if thinking.text else None
    return MessageData(
        message.id,
        message.role,
        text,
        state,
        images,
        stats,
        message.error or "",
        author=author(message),
        author_details=author_details(message),
        version=message.version,
        version_count=message.version_count,
        can_regenerate=can_regenerate,
        thought=thought,
        waiting=waiting,
        sources=view_sources(message.sources),
        documents_note=documents_note(message.grounding, message.grounding_detail),
        copy_text=copy,
    )


def author(message: Message) -> str:
    """``Tiny Llama · F32`` over a reply; "" when who wrote it was not recorded."""
    model = message.model
    if model is None:
        return ""
    quantization = model.quantization
    if not quantization or quantization == "unknown" or quantization.casefold() in model.name.casefold():
        return model.name
    return f"{model.name} · {quantization}"


def author_details(message: Message) -> str:
    """The file and the sampling settings a reply was written with."""
    lines = []
    if message.model is not None and message.model.file:
        lines.append(message.model.file)
    if message.sampling:
        lines.append(SamplingSettings.from_dict(message.sampling).summary())
    return "\n".join(lines)


def conversation_summary(conversation: Conversation) -> ConversationSummary:
    updated = datetime.fromtimestamp(conversation.updated)
    return ConversationSummary(conversation.id, conversation.title, updated)


def unchanged_rows(shown: list[MessageData], path: list[Message]) -> int:
    """How many rows at the top of the view still show the conversation's ``path`` (the same
    message at the same version): only those after them need replacing."""
    same = 0
    for data, message in zip(shown, path, strict=False):
        if (data.id, data.version, data.version_count) != (
            message.id,
            message.version,
            message.version_count,
        ):
            break
        same += 1
    return same


def placeholder_text(answers: str | None, loading: str | None) -> str:
    """What an empty conversation says: who ``answers``, what is ``loading``, or how to choose."""
    if answers is not None:
        return f"Start a conversation with {answers}: type below."
    if loading is not None:
        return f"Loading {loading}… Type below: it answers once loaded."
    return "Start a conversation: choose a model at the top (Ctrl+M), then type below."


def deleted_text(role: Role, count: int, version: bool) -> str:
    """The Undo bar's line after ``count`` messages went with one deleted (``version``: one of
    several versions of it, the branch after it along)."""
    if version:
        after = count - 1
        what = "this version" + (f" and the {after} message{'s' * (after > 1)} after it" if after else "")
    elif role is Role.USER:
        what = "your message" + {1: "", 2: " and its reply"}.get(count, " and its replies")
    else:
        what = "the reply"
    return f"Deleted {what}"
