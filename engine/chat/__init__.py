"""Chat prompts: render a conversation into the text a model expects, and turn tokens back
into text safely. Everything public is importable from here.

- ``messages``: ``Role``, ``ChatMessage`` and ``clean_text``, the one check text passes
  on its way in.
- ``template``: ``ChatTemplate`` / ``render_prompt`` render messages with the GGUF's own
  Jinja chat template (``jinja_sandbox``: the template comes from a file the user
  downloaded, it is untrusted code), or, when the model has none, with the built-in format
  of its architecture, or a plain "User:/Assistant:" format (``formats``). Stop strings
  are derived from the template so a model that writes its end-of-turn marker as text
  still stops.
- ``tokens``: ``tokenize`` / ``token_to_piece`` / ``tokenize_prompt`` are thin,
  size-checked wrappers around llama.cpp's tokenizer (``llama_cpp`` is imported inside
  them only, so this package imports without llama.cpp), and ``tokenize_conversation``
  splices earlier replies' own ids in.
- ``streaming``: ``IncrementalDetokenizer``, ``StopStringBuffer`` and ``TextStream`` turn
  generated token pieces (bytes that may end inside a UTF-8 character) into text deltas
  that never split a character and never leak any part of a stop string.
- ``tool_prompt``: tools, calls and results for templates that cannot render them.
- ``tool_calls``: ``ToolCallParser`` reads tool calls out of streamed output
  (``ToolCallFormat``: Hermes, Llama 3 JSON, Mistral, generic JSON); ``tool_grammar``'s
  ``tool_choice_grammar`` forces them. ``reasoning``: ``ReasoningSplitter`` separates a
  model's ``<think>`` from its answer. ``traits``: ``ChatTraits``, what a template does
  about tools and thinking, read at load. All pure.
"""

from __future__ import annotations

from engine.chat.formats import KNOWN_END_MARKERS, PromptFormat, builtin_format, template_stop_strings
from engine.chat.jinja_sandbox import TemplateError
from engine.chat.messages import ChatMessage, Role, ToolCall, clean_text
from engine.chat.reasoning import ReasoningSplitter, split_reasoning
from engine.chat.streaming import IncrementalDetokenizer, StopStringBuffer, StreamChunk, TextStream
from engine.chat.template import (
    DEFAULT_MEDIA_MARKER,
    ChatTemplate,
    MediaPlacement,
    RenderedPrompt,
    render_prompt,
)
from engine.chat.tokens import (
    ConversationPieces,
    TokenizationError,
    split_conversation,
    token_to_piece,
    tokenize,
    tokenize_conversation,
    tokenize_prompt,
)
from engine.chat.tool_calls import (
    ContentDelta,
    OutputEvent,
    ToolCallArgs,
    ToolCallBegin,
    ToolCallFormat,
    ToolCallParser,
    new_call_id,
    parse_tool_calls,
)
from engine.chat.tool_grammar import tool_choice_grammar
from engine.chat.traits import ChatTraits, chat_traits

__all__ = [
    "DEFAULT_MEDIA_MARKER",
    "KNOWN_END_MARKERS",
    "ChatMessage",
    "ChatTemplate",
    "ChatTraits",
    "ContentDelta",
    "ConversationPieces",
    "IncrementalDetokenizer",
    "MediaPlacement",
    "OutputEvent",
    "PromptFormat",
    "ReasoningSplitter",
    "RenderedPrompt",
    "Role",
    "StopStringBuffer",
    "StreamChunk",
    "TemplateError",
    "TextStream",
    "TokenizationError",
    "ToolCall",
    "ToolCallArgs",
    "ToolCallBegin",
    "ToolCallFormat",
    "ToolCallParser",
    "builtin_format",
    "chat_traits",
    "clean_text",
    "new_call_id",
    "parse_tool_calls",
    "render_prompt",
    "split_conversation",
    "split_reasoning",
    "template_stop_strings",
    "token_to_piece",
    "tokenize",
    "tokenize_conversation",
    "tokenize_prompt",
    "tool_choice_grammar",
]
