"""What the model is asked, built from the stored message tree: the conversation's path as
chat messages (its system prompt first, failed and empty replies left out, images for a model
that sees), the request for a reply, and the request the context meter measures."""

from __future__ import annotations

from typing import Any

from app.chat import SamplingSettings
from app.chat.viewport_layout import STREAM_TEXT_INTERVAL_S
from app.conversation.image_cache import ImageCache
from app.store.history import Conversation, Message
from app.store.history import MessageState as StoredState
from engine import (
    ChatMessage,
    ChatRequest,
    Retrieval,
    Role,
    ground_messages,
    round_messages,
    rounds_from_json,
)


class HistoryBuilder:
    """Turns a conversation's stored path into what a ``ChatModel`` is given."""

    def __init__(self, images: ImageCache) -> None:
        self.images = images

    def messages(self, conversation: Conversation, history: list[Message], sees: bool) -> list[ChatMessage]:
        """``sees``: the answering model takes images (one that cannot is given the text)."""
        messages: list[ChatMessage] = []
        if conversation.system_prompt:
            messages.append(ChatMessage(Role.SYSTEM, conversation.system_prompt))
        for message in history:
            if message.state is StoredState.FAILED:
                continue
            if message.tool_rounds:  # the calls a reply made before its text, and their results
                messages.extend(round_messages(rounds_from_json(message.tool_rounds)))
            if message.role is Role.ASSISTANT and not message.text:
                continue
            # A model that cannot see is given the text: the images stay in the chat.
            images = tuple(self.images.decoded(ref) for ref in message.images) if sees else ()
            # A stopped or interrupted reply's token ids may not spell its saved text.
            tokens = message.tokens if message.state is StoredState.COMPLETE else ()
            messages.append(ChatMessage(message.role, message.text, images, tokens, message.tokens_model))
        return messages

    def reply_request(
        self,
        conversation: Conversation,
        path: list[Message],
        reply: Message,
        settings: SamplingSettings,
        prefix: str,
        sees: bool,
        retrieval: Retrieval | None = None,
        tools: tuple[dict[str, Any], ...] = (),
    ) -> ChatRequest:
        """The request that writes ``reply`` (a row of ``path``, left out of what is sent);
        ``prefix``: where a continued reply goes on from; ``retrieval``: the numbered excerpts
        put before the question it answers (documents turned on); ``tools``: the OpenAI tool
        specs it may call."""
        messages = self.messages(conversation, [m for m in path if m.id != reply.id], sees)
        return ChatRequest(
            messages=ground_messages(messages, retrieval) if retrieval is not None else tuple(messages),
            sampling=settings.to_params(),
            max_tokens=settings.max_tokens,
            owner=str(conversation.id),
            assistant_prefix=prefix,
            text_interval_s=STREAM_TEXT_INTERVAL_S,
            tools=tools,
        )


def draft_request(messages: list[ChatMessage], draft: str, conversation_id: int) -> ChatRequest:
    """The conversation's ``messages`` with ``draft`` as the next user message (none when
    empty): what Send would ask, for its measure."""
    if draft:
        messages = [*messages, ChatMessage(Role.USER, draft)]
    return ChatRequest(messages=tuple(messages), owner=str(conversation_id))
