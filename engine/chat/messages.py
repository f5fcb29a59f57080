"""A conversation's messages as the engine takes them: roles, text checked once, images
counted, a reply's own token ids."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

from engine.errors import InvalidChatRequest


class Role(enum.StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"


@dataclass(frozen=True)
class ChatMessage:
    """One turn. ``images`` are opaque to rendering (identities, ImageRef objects...):
    only how many there are matters here, one media marker each."""

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
