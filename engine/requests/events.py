"""What a request goes through, as values: ``Queued``, ``Prefill``, ``Started``, ``TextDelta``,
then ``Completed`` or ``Failed`` (each also delivered through the handle's Qt signals)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.base.errors import EngineError
from engine.requests.completion import Completion, TokenLogprob


class DecodeFailed(EngineError):
    """llama.cpp failed to evaluate a batch this request was in."""


@dataclass(frozen=True)
class Queued:
    position: int


@dataclass(frozen=True)
class Prefill:
    completed: int
    total: int
    cached: int
    images_done: int = 0
    images_total: int = 0


@dataclass(frozen=True)
class Started:
    pass


@dataclass(frozen=True)
class TextDelta:
    text: str
    # With SamplingParams.logprobs: the tokens taken since the previous delta, in order.
    logprobs: tuple[TokenLogprob, ...] = ()
    # The text of each token taken since the previous delta, in order ("" for a token whose
    # text is still held back: part of a UTF-8 character, or what may be a stop string).
    # Joined they are a prefix of ``text``; the rest is held text released at the end.
    # What a caller needs to count tokens per part of a reply (the thinking, the answer).
    pieces: tuple[str, ...] = ()
    # Thinking that arrived apart from the text (a remote server's reasoning_content), in the
    # pieces it came in (about a token each): never in ``text``, so nothing splits it out again.
    reasoning: tuple[str, ...] = ()


@dataclass(frozen=True)
class Completed:
    completion: Completion


@dataclass(frozen=True)
class Failed:
    error: EngineError


Event = Queued | Prefill | Started | TextDelta | Completed | Failed
