"""What the chat controller needs of a model that answers: the seam between the window's
chats and whoever writes the replies.

Two implementations: ``LoadedModel`` (a GGUF loaded here, on the executor) and
``RemoteModel`` (``engine.remote``: an OpenAI-compatible server). Both take a
``ChatRequest`` and answer on a ``RequestHandle`` with the same events, so streaming,
stopping, regenerating, continuing and saving are written once, in the controller.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from engine.chat.traits import ChatTraits
from engine.requests.handle import RequestHandle
from engine.requests.request import ChatRequest

__all__ = ["ChatModel", "ModelLabel"]


@dataclass(frozen=True)
class ModelLabel:
    """Who writes a reply, as the reply's header records it."""

    name: str  # "Tiny Llama", or a remote model's id
    source: str  # the GGUF's path, or the server's base URL
    detail: str  # the quantization, or where the server is ("via 127.0.0.1:8080")


@runtime_checkable
class ChatModel(Protocol):
    """A model the chat controller can send a conversation to."""

    @property
    def label(self) -> ModelLabel: ...

    @property
    def has_vision(self) -> bool:
        """Whether requests may carry images."""
        ...

    @property
    def chat_traits(self) -> ChatTraits | None:
        """What the chat template does about thinking (None: nothing known)."""
        ...

    @property
    def context_per_conversation(self) -> int:
        """Positions one conversation holds (0: the model does not say)."""
        ...

    def submit(
        self, request: ChatRequest, connect: Callable[[RequestHandle], None] | None = None
    ) -> RequestHandle:
        """Start a reply without blocking; ``connect(handle)`` runs before any event."""
        ...

    def measure_prompt(self, request: ChatRequest) -> Future:
        """A future ``PromptSize``; its exception when the size cannot be known."""
        ...
