"""Chat widgets: the message view, the composer, the conversation list and the sampling
panel. Plain Qt widgets that take frozen values and speak through signals; the window
wires them to the engine and the store."""

from app.chat.composer import Composer
from app.chat.conversation_list import ConversationList
from app.chat.conversation_rows import relative_time
from app.chat.data import (
    Attachment,
    ConversationId,
    ConversationSummary,
    ImageThumb,
    MessageAction,
    MessageData,
    MessageId,
    MessageState,
    QueueWait,
    ReplyStats,
    Source,
    Thought,
    format_prefill,
    format_seconds,
)
from app.chat.documents_button import DocumentsButton
from app.chat.markdown import MarkdownRenderer, MarkdownStyle, RenderedMarkdown
from app.chat.message_view import MessageView
from app.chat.sampling_panel import Preset, SamplingPanel, SamplingSettings

__all__ = [
    "Attachment",
    "Composer",
    "ConversationId",
    "ConversationList",
    "ConversationSummary",
    "DocumentsButton",
    "ImageThumb",
    "MarkdownRenderer",
    "MarkdownStyle",
    "MessageAction",
    "MessageData",
    "MessageId",
    "MessageState",
    "MessageView",
    "Preset",
    "QueueWait",
    "RenderedMarkdown",
    "ReplyStats",
    "SamplingPanel",
    "SamplingSettings",
    "Source",
    "Thought",
    "format_prefill",
    "format_seconds",
    "relative_time",
]
