"""What a finished request gives back: its ``Completion`` (text, tokens, why it stopped), the
``Usage`` and ``Timings`` it took, and each token's log-probability when asked for."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from engine.chat import ChatMessage
from engine.machine.cpu_load import CpuContention


class StopReason(enum.Enum):
    STOP_TOKEN = "stop token"
    STOP_STRING = "stop string"
    LENGTH = "length"
    CONTEXT_FULL = "context full"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    images: int = 0
    cached_images: int = 0  # images whose KV came from the cache (not encoded again)


@dataclass(frozen=True)
class Timings:
    """Seconds and tokens/s. ``queued``: from submit until the request was admitted to a
    sequence (waiting for a free slot: all of them busy with other requests); ``ttft``:
    from admission to the first token (reading the prompt), so the two add up to what the
    user waited; the decode figures count from the first token."""

    queued: float
    ttft: float
    prefill_seconds: float
    decode_seconds: float
    prefill_tokens_per_second: float
    decode_tokens_per_second: float


@dataclass(frozen=True)
class TopLogprob:
    """One of the most likely tokens at a position."""

    token: str  # its text (U+FFFD where the token ends inside a UTF-8 character)
    logprob: float
    bytes: bytes


@dataclass(frozen=True)
class TokenLogprob:
    """A generated token's log-probability under the model, with the ``top`` most likely
    tokens at its position (``SamplingParams.logprobs`` of them, most likely first).

    The model's own distribution: a log-softmax of its logits at that position, before
    temperature, penalties, top-k/p, min-p or a grammar (what OpenAI reports, and
    llama-server without ``post_sampling_probs``).
    """

    token: str
    logprob: float
    bytes: bytes
    top: tuple[TopLogprob, ...] = ()


@dataclass(frozen=True)
class Completion:
    text: str
    stop_reason: StopReason
    usage: Usage
    timings: Timings
    tokens: tuple[int, ...] = ()  # generated ids (end-of-generation token excluded)
    drafted: int = 0
    accepted: int = 0
    model_identity: str = ""  # the model that made ``tokens``: store it as ChatMessage.tokens_model
    # With SamplingParams.logprobs: one per entry of ``tokens``, in order (the TextDeltas' together).
    logprobs: tuple[TokenLogprob, ...] = ()
    # Thinking that came apart from the text (a remote server's reasoning_content); never in ``text``.
    reasoning: str = ""
    # Other programs' CPU load while it was computed (None: too quick to tell, or remote).
    cpu: CpuContention | None = None

    @property
    def reply_tokens(self) -> tuple[int, ...]:
        """Ids that spell exactly ``text`` (for ChatMessage.tokens in the next turn);
        empty when a stop string was cut out of the text."""
        return () if self.stop_reason is StopReason.STOP_STRING else self.tokens

    def as_message(self) -> ChatMessage:
        """This reply as the next turn's history: its text, with its ids and their model."""
        return ChatMessage("assistant", self.text, tokens=self.reply_tokens, tokens_model=self.model_identity)
