"""What the chat history store hands out and raises: its row types and its errors.

Plain dataclasses and exceptions; ``app.store.history`` re-exports every name here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine import ChatMessage, EngineError, Role

# --------------------------------------------------------------------------- errors


class StoreError(EngineError):
    """The chat history cannot be opened or changed; ``message`` says why, for the user."""


class DatabaseTooNew(StoreError):
    """The database was written by a newer Hearth. It is left exactly as it is."""

    def __init__(self, path: Path, version: int, supported: int) -> None:
        self.path = path
        self.version = version
        self.supported = supported
        super().__init__(
            f"The chat history at {path} was saved by a newer version of Hearth (format {version}, "
            f"this version reads up to {supported}). Update Hearth to open it; it was not changed."
        )


class DatabaseUnreadable(StoreError):
    """The file is not a SQLite database (or is damaged beyond what SQLite can read)."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"The chat history at {path} cannot be read ({reason}); it was not changed.")


class MigrationFailed(StoreError):
    """Upgrading the schema failed; the database is still at its old version."""

    def __init__(self, path: Path, version: int, reason: str, backup: Path | None) -> None:
        self.path = path
        self.version = version
        self.backup = backup
        copy = f" A copy is at {backup}." if backup else ""
        super().__init__(
            f"Could not upgrade the chat history at {path} from format {version} ({reason}). "
            f"It was left unchanged.{copy}"
        )


class NotFound(StoreError):
    """A conversation or message id that does not exist (any more)."""


# --------------------------------------------------------------------------- rows


class MessageState(enum.StrEnum):
    COMPLETE = "complete"
    STREAMING = "streaming"  # being generated now (or the app died while it was)
    INTERRUPTED = "interrupted"  # found streaming at startup: the user can continue or regenerate
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class ImageRef:
    """An image attached to a message. ``path`` is the content-addressed file; ``identity``
    is the caller's id for it (defaults to ``sha256``)."""

    sha256: str
    identity: str
    mime: str
    size: int
    path: Path

    def read_bytes(self) -> bytes:
        return self.path.read_bytes()


@dataclass(frozen=True)
class ReplyModel:
    """The model that wrote a reply, as it was when it wrote it (the file may be gone since)."""

    name: str  # ModelInfo.display_name
    file: str  # the GGUF's path
    quantization: str  # ModelInfo.file_type, e.g. "Q4_K_M"


@dataclass(frozen=True)
class Versions:
    """A message's versions (itself and its siblings: the other answers to the same
    message, or the other texts of an edited one), oldest first; ``current`` is shown."""

    ids: tuple[int, ...]
    current: int

    @property
    def index(self) -> int:
        return self.ids.index(self.current)

    @property
    def count(self) -> int:
        return len(self.ids)

    def step(self, offset: int) -> int | None:
        """The id ``offset`` versions away from the current one (None past either end)."""
        target = self.index + offset
        return self.ids[target] if 0 <= target < len(self.ids) else None


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    created: float  # seconds since the epoch
    updated: float  # last message activity: the side list is ordered by it
    system_prompt: str | None
    # JSON object (temperature, top_p, ...); not part of the hash so rows stay hashable.
    sampling: dict[str, Any] = field(hash=False)
    preset: str | None
    model_hint: str | None
    deleted_at: float | None

    @property
    def deleted(self) -> bool:
        return self.deleted_at is not None


@dataclass(frozen=True)
class Thinking:
    """What a reasoning model thought before its answer: the text, how many tokens it took,
    and for how long (None while it goes on, or when a crash cut it off)."""

    text: str = ""
    tokens: int = 0
    seconds: float | None = None


class Grounding(enum.StrEnum):
    """What a reply grounded in documents was given."""

    EXCERPTS = "excerpts"  # numbered excerpts (its ``sources``)
    NONE_FOUND = "none"  # the search found nothing: the question went as typed
    WHOLE = "whole"  # the documents fitted, and were given whole (still numbered)
    FAILED = "failed"  # the search failed (``grounding_detail`` says why): sent as typed


@dataclass(frozen=True)
class MessageSource:
    """One excerpt a reply was given, as numbered in its prompt."""

    n: int
    path: Path
    page: int | None
    heading: str
    text: str
    start: int
    end: int
    last_page: int | None = None
    collection: str = ""


@dataclass(frozen=True)
class Message:
    """One message. Messages form a tree: each has a ``parent_id`` (None for a first
    message), a message's versions are its siblings, and what a conversation shows (and
    sends to the model) is the path through the versions selected."""

    id: int
    conversation_id: int
    position: int  # creation order in its conversation: a child always comes after its parent
    role: Role
    text: str
    state: MessageState
    stop_reason: str | None  # StopReason.value for replies
    error: str | None  # the human message of a failed reply
    stats: dict[str, Any] = field(hash=False)  # usage, timings, drafts...: JSON object
    tokens: tuple[int, ...]  # a reply's exact ids, spliced into the next prompt; () if unknown
    images: tuple[ImageRef, ...]
    created: float
    updated: float
    tokens_model: str = ""  # the model that made ``tokens`` (Completion.model_identity)
    parent_id: int | None = None
    version: int = 1  # this one's number among its versions, from 1
    version_count: int = 1
    model: ReplyModel | None = None  # who wrote a reply (None: a user message, or not recorded)
    sampling: dict[str, Any] = field(default_factory=dict, hash=False)  # what the reply used
    # A reasoning model's thinking before ``text`` (the answer): never sent back to the model.
    thinking: Thinking = Thinking()
    # Documents (issue 28): what the reply was given, None when it was not grounded in any.
    grounding: Grounding | None = None
    grounding_detail: str = ""
    sources: tuple[MessageSource, ...] = ()
    # Tools (issue 29): the rounds of calls the reply made before ``text``, as JSON ("": none).
    tool_rounds: str = ""

    def to_chat_message(self) -> ChatMessage:
        return ChatMessage(self.role, self.text, self.images, self.tokens, self.tokens_model)


# (bytes, mime) or (bytes, mime, identity)
ImageInput = tuple[bytes, str] | tuple[bytes, str, str]
