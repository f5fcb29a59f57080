"""A conversation's messages as the engine takes them: roles, text checked once, images
counted, a reply's own token ids, the tools an assistant called and their results."""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass
from typing import Any

from engine.base.errors import InvalidChatRequest


class Role(enum.StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"  # a tool's result, answering the assistant's call ``tool_call_id``


MAX_TOOL_NAME = 64  # OpenAI's limit for function names


@dataclass(frozen=True)
class ToolCall:
    """A function the assistant called: ``arguments`` is the JSON text it wrote (an object)."""

    id: str
    name: str
    arguments: str = "{}"

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", clean_text(self.id, "A tool call id"))
        object.__setattr__(self, "name", clean_text(self.name, "A tool call's name"))
        object.__setattr__(self, "arguments", clean_text(self.arguments, "A tool call's arguments"))
        if not self.name or len(self.name) > MAX_TOOL_NAME:
            raise InvalidChatRequest(f"A tool call's name must be 1 to {MAX_TOOL_NAME} characters.")

    def parsed_arguments(self) -> Any:
        """The arguments as JSON values when they parse as an object (what templates render
        with ``tojson``), else the text as written."""
        try:
            value = json.loads(self.arguments)
        except ValueError:
            return self.arguments
        return value if isinstance(value, dict) else self.arguments


@dataclass(frozen=True)
class ChatMessage:
    """One turn. ``images`` are opaque to rendering (identities, ImageRef objects...):
    only how many there are matters here, one media marker each.

    An assistant message may carry the ``tool_calls`` it made (its text may then be
    empty); a ``Role.TOOL`` message is one call's result, naming it by ``tool_call_id``
    (and the function's ``name``, which some templates print).
    """

    role: Role
    text: str
    images: tuple[Any, ...] = ()
    # For a reply this engine generated: its exact token ids. Spliced into the next
    # prompt instead of re-tokenizing ``text`` (which may tokenize differently), so
    # the next turn matches the cached KV token for token.
    tokens: tuple[int, ...] = ()
    # Which model made ``tokens`` (``Completion.model_identity``): ids mean something only
    # to the vocabulary that made them, so another model re-tokenizes ``text`` instead.
    tokens_model: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        # Accept "user" as well as Role.USER; anything else is the caller's error, said in one line.
        try:
            object.__setattr__(self, "role", Role(self.role))
        except ValueError:
            roles = ", ".join(r.value for r in Role)
            raise InvalidChatRequest(f"Unknown message role {self.role!r}: use {roles}.") from None
        object.__setattr__(self, "text", clean_text(self.text, f"The {self.role.value} message"))
        object.__setattr__(self, "images", tuple(self.images))
        object.__setattr__(self, "tokens", tuple(self.tokens))
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        object.__setattr__(self, "tool_call_id", clean_text(self.tool_call_id, "A tool call id"))
        object.__setattr__(self, "name", clean_text(self.name, "A message's name"))
        if self.tool_calls:
            if self.role is not Role.ASSISTANT:
                raise InvalidChatRequest("Only assistant messages can call tools.")
            if not all(isinstance(call, ToolCall) for call in self.tool_calls):
                raise InvalidChatRequest("A message's tool calls must be ToolCall values.")


_SURROGATES = re.compile("[\ud800-\udfff]")


def clean_text(text: object, what: str) -> str:
    """Text as the engine takes it, checked once where it comes in.

    Lone surrogates, which is how Python carries bytes that were not UTF-8 (a command-line
    argument, a file name) and what a JSON string may hold, cannot reach llama.cpp's UTF-8
    tokenizer: each becomes U+FFFD, as a UTF-8 decoder with ``errors="replace"`` would make
    of the bytes. Anything but a string is refused with one line naming ``what`` it was.
    """
    if not isinstance(text, str):
        kind = "nothing" if text is None else type(text).__name__
        raise InvalidChatRequest(f"{what} must be text, not {kind}.")
    if text.isascii():
        return text
    return _SURROGATES.sub("\ufffd", text)
