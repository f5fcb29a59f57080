"""What callers hand the engine (ChatRequest) and what comes back (events, Completion)."""

from __future__ import annotations

import enum
import itertools
import json
import queue
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QObject, Signal

from engine.base.defaults import DEFAULT_MAX_TOKENS
from engine.base.errors import EngineError, InvalidChatRequest
from engine.chat import ChatMessage, Role, clean_text
from engine.chat.messages import MAX_TOOL_NAME
from engine.machine.cpu_load import CpuContention
from engine.sampling.params import SamplingParams


class SlotState(enum.StrEnum):
    """What a sequence (a slot of the context) holds, as the dashboard shows it."""

    ACTIVE = "active"  # serving a request
    REUSABLE = "reusable"  # a cached prefix, kept for its conversation's next turn
    EMPTY = "empty"  # nothing
    QUARANTINED = "quarantined"  # its KV could not be cleared; never handed out again


class StopReason(enum.Enum):
    STOP_TOKEN = "stop token"
    STOP_STRING = "stop string"
    LENGTH = "length"
    CONTEXT_FULL = "context full"
    CANCELLED = "cancelled"


class PromptTooLong(EngineError):
    """The prompt does not fit the context of one conversation."""


@dataclass(frozen=True)
class PromptSize:
    """How much of a conversation's context a request's prompt takes, before it is sent."""

    tokens: int  # context positions the prompt takes (text tokens, image positions)
    limit: int  # positions one conversation holds with this load

    @property
    def fits(self) -> bool:
        return self.tokens <= self.limit


class DecodeFailed(EngineError):
    """llama.cpp failed to evaluate a batch this request was in."""


_request_ids = itertools.count(1)

MAX_TOOLS = 128
MAX_TOOLS_CHARS = 256 * 1024  # the tools' JSON, all together
# Text leaves the engine at most ~30 times a second per request: often enough to read as
# a stream, rarely enough that the window repaints and an HTTP client receives chunks of
# several tokens.
DEFAULT_TEXT_INTERVAL_S = 1.0 / 30.0
MAX_TEXT_INTERVAL_S = 1.0  # text held longer would not read as a stream


def check_tools(tools: tuple[Any, ...]) -> None:
    """OpenAI function tools: ``{"type": "function", "function": {"name", "description",
    "parameters"}}``, JSON all the way down, names unique."""
    if len(tools) > MAX_TOOLS:
        raise InvalidChatRequest(f"A request may offer at most {MAX_TOOLS} tools, not {len(tools)}.")
    names: set[str] = set()
    for index, tool in enumerate(tools):
        where = f"Tool {index + 1}"
        if not isinstance(tool, Mapping) or tool.get("type", "function") != "function":
            raise InvalidChatRequest(f'{where} must be {{"type": "function", "function": {{...}}}}.')
        function = tool.get("function")
        if not isinstance(function, Mapping):
            raise InvalidChatRequest(f"{where} has no function object.")
        name = function.get("name")
        if not isinstance(name, str) or not 1 <= len(name) <= MAX_TOOL_NAME:
            raise InvalidChatRequest(f"{where} needs a function name of 1 to {MAX_TOOL_NAME} characters.")
        if name in names:
            raise InvalidChatRequest(f"Two tools are called {name!r}.")
        names.add(name)
        description = function.get("description", "")
        if not isinstance(description, str):
            raise InvalidChatRequest(f"The description of tool {name!r} must be text.")
        parameters = function.get("parameters", {})
        if not isinstance(parameters, Mapping):
            raise InvalidChatRequest(f"The parameters of tool {name!r} must be a JSON schema object.")
    try:
        size = len(json.dumps(list(tools), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidChatRequest(f"The tools are not JSON: {exc}.") from None
    if size > MAX_TOOLS_CHARS:
        raise InvalidChatRequest(f"The tools take more than {MAX_TOOLS_CHARS // 1024} KiB of JSON.")


@dataclass(frozen=True)
class ChatRequest:
    """One reply to generate: from chat ``messages`` (rendered with the model's template)
    or from a raw ``prompt`` text (base models, benchmarks)."""

    messages: tuple[ChatMessage, ...] = ()
    prompt: str | None = None
    sampling: SamplingParams = SamplingParams()  # noqa: RUF009 - a frozen value, safe to share
    max_tokens: int = DEFAULT_MAX_TOKENS
    stop: tuple[str, ...] = ()
    cache: bool = True  # reuse and keep a cached prompt prefix
    ignore_eos: bool = False  # benchmarks: keep generating through end-of-generation tokens
    speculate: bool | None = None  # None: as the model was loaded; False: never for this request
    # Continue an interrupted reply: the model's turn starts with this text already said.
    assistant_prefix: str = ""
    owner: str = ""  # who asked (a conversation id): shown in stats
    # OpenAI function-tool specs, rendered by the model's chat template (or, for a template
    # without tool support, described in a system prompt): see engine.chat.tool_prompt.
    tools: tuple[dict[str, Any], ...] = ()
    # The shortest time between two text deltas; None: DEFAULT_TEXT_INTERVAL_S.
    # The window asks for fewer: every delta wakes the GUI thread, which on two cores takes
    # its time from llama.cpp's threads, and it shows text only a few times a second.
    text_interval_s: float | None = None
    request_id: int = field(default_factory=lambda: next(_request_ids))

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", tuple(self.messages))
        object.__setattr__(self, "tools", tuple(self.tools))
        if self.prompt is not None:
            object.__setattr__(self, "prompt", clean_text(self.prompt, "The prompt"))
        object.__setattr__(self, "assistant_prefix", clean_text(self.assistant_prefix, "The reply prefix"))
        object.__setattr__(self, "stop", tuple(clean_text(s, "A stop string") for s in self.stop))
        object.__setattr__(self, "owner", clean_text(self.owner, "The owner"))

    def text_interval(self, default: float = DEFAULT_TEXT_INTERVAL_S) -> float:
        """The shortest time between two of this request's text deltas."""
        return default if self.text_interval_s is None else self.text_interval_s

    def validate(self) -> None:
        if not self.messages and self.prompt is None:
            raise InvalidChatRequest("A request needs messages or a prompt.")
        if self.max_tokens < 1:
            raise InvalidChatRequest(f"Max tokens must be at least 1, not {self.max_tokens}.")
        if self.text_interval_s is not None and not 0.0 <= self.text_interval_s <= MAX_TEXT_INTERVAL_S:
            raise InvalidChatRequest(
                f"The text interval must be 0–{MAX_TEXT_INTERVAL_S:g} s, not {self.text_interval_s:g}."
            )
        if self.tools:
            if self.prompt is not None:
                raise InvalidChatRequest("Tools need chat messages, not a raw prompt.")
            try:
                check_tools(self.tools)
            except InvalidChatRequest as exc:  # named, so the API's 400 says which field
                raise InvalidChatRequest(exc.message, field="tools") from None
        if any(m.role is Role.TOOL and not m.tool_call_id and not m.name for m in self.messages):
            raise InvalidChatRequest("A tool message must say which call it answers (tool_call_id).")
        self.sampling.validate()


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


# Events, as values (also delivered through the handle's Qt signals).


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


class RequestHandle(QObject):
    """A submitted request. Signals arrive queued in the thread that owns the handle;
    ``events()``/``wait()`` serve code without a Qt event loop (CLI, benchmarks)."""

    queued = Signal(int)
    prefill = Signal(int, int, int, int, int)  # completed, total, cached, images done, images total
    started = Signal()
    delta = Signal(str)
    text_delta = Signal(object)  # the TextDelta itself: its text and, when asked for, logprobs
    completed = Signal(object)  # Completion
    failed = Signal(object)  # EngineError

    def __init__(self, request: ChatRequest, canceller: object | None = None) -> None:
        super().__init__()
        self.request = request
        self._canceller = canceller
        self._events: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self._done = threading.Event()
        self.completion: Completion | None = None
        self.error: EngineError | None = None

    @property
    def request_id(self) -> int:
        return self.request.request_id

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def cancel(self) -> None:
        """Ask the engine to stop this request; it ends with reason "cancelled"."""
        if self._canceller is not None and not self.done:
            self._canceller(self.request_id)  # type: ignore[operator]

    def wait(self, timeout: float | None = None) -> Completion:
        """Block until the request ends; raise its error if it failed."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"request {self.request_id} did not finish in {timeout} s")
        if self.error is not None:
            raise self.error
        assert self.completion is not None
        return self.completion

    def events(self, timeout: float | None = None) -> Iterator[Event]:
        """Every event in order, until Completed or Failed."""
        while True:
            try:
                event = self._events.get(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"request {self.request_id}: no event in {timeout} s") from None
            yield event
            if isinstance(event, (Completed, Failed)):
                return

    # Called by the executor thread only.
    def _publish(self, event: Event) -> None:
        if self._done.is_set():
            return
        if isinstance(event, Completed):
            self.completion = event.completion
        elif isinstance(event, Failed):
            self.error = event.error
        self._events.put(event)
        if isinstance(event, Queued):
            self.queued.emit(event.position)
        elif isinstance(event, Prefill):
            self.prefill.emit(
                event.completed, event.total, event.cached, event.images_done, event.images_total
            )
        elif isinstance(event, Started):
            self.started.emit()
        elif isinstance(event, TextDelta):
            self.delta.emit(event.text)
            self.text_delta.emit(event)
        elif isinstance(event, Completed):
            self._done.set()
            self.completed.emit(event.completion)
        else:
            self._done.set()
            self.failed.emit(event.error)


@dataclass(frozen=True)
class SequenceStats:
    sequence_id: int
    state: SlotState
    owner: str  # the request's owner (a conversation id); for "reusable", the last one
    cells_used: int
    reusable_tokens: int  # cached prefix: kept for the next turn, or (active) reused by this one


@dataclass(frozen=True)
class EngineStats:
    """What the engine is doing, answered between two batches (``LoadedModel.request_stats``).

    The rates and the batch fill cover the batches that finished in the last two seconds
    (``engine.runtime.serving_stats.RATE_WINDOW``; ``ServingCounters.snapshot`` defines them exactly):
    they read zero two seconds after the engine went idle.
    """

    sequences: tuple[SequenceStats, ...]
    n_ctx: int
    n_ctx_per_sequence: int
    queue_depth: int
    active_requests: int
    prefix_hits: int
    prefix_misses: int
    tokens_reused: int
    decode_tokens_per_second: float  # decode rows (tokens sampled, drafts included) per second, recently
    prefill_tokens_per_second: float  # prompt tokens evaluated per second, recently
    batch_fill: float  # 0..1: mean sequences per recent batch / sequences decoded in parallel
    ticks: int
    completed_requests: int
    scheduler_tick_us: float = 0.0  # mean time in the scheduler (plan, stage, commit) per batch
    drafted_tokens: int = 0
    accepted_tokens: int = 0

    @property
    def cells_used(self) -> int:
        return sum(s.cells_used for s in self.sequences)
