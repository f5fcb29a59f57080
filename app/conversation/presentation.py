"""A stored message as the message view shows it: its text or the reply streaming into it,
its state, images, stats, and who wrote it with which settings."""

from __future__ import annotations

from app.chat import ImageThumb, MessageData, MessageState, ReplyStats, SamplingSettings, Thought
from app.conversation.reply_in_flight import ReplyInFlight
from app.store.history import Message
from app.store.history import MessageState as StoredState

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
    if streaming is not None:
        thought = streaming.thought()
        text = streaming.text
        state = MessageState.STREAMING if text or thought else MessageState.PENDING
        waiting = streaming.waiting if state is MessageState.PENDING else None  # shown again as it was
    else:
        text, state = message.text, VIEW_STATE.get(message.state, MessageState.DONE)
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
