"""Value types the chat widgets take and give: plain frozen dataclasses, so the lead can
build them from the store and the engine without the widgets knowing either."""

from __future__ import annotations

import enum
from collections.abc import Hashable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from PySide6.QtGui import QImage

from engine import Role, StopReason

if TYPE_CHECKING:
    from engine import Completion

MessageId = Hashable
"""Whatever the store uses (int row ids or uuids); widgets only compare and hash them."""

ConversationId = Hashable


class MessageState(enum.Enum):
    DONE = "done"
    PENDING = "pending"  # submitted, no token yet: queued or reading the prompt
    STREAMING = "streaming"
    INTERRUPTED = "interrupted"  # the app stopped mid-reply (found so after a restart)
    FAILED = "failed"
    CANCELLED = "cancelled"  # the user pressed Stop

    @property
    def active(self) -> bool:
        return self in (MessageState.PENDING, MessageState.STREAMING)


class MessageAction(enum.Enum):
    COPY = "Copy"
    EDIT = "Edit"
    REGENERATE = "Regenerate"
    CONTINUE = "Continue"
    DELETE = "Delete"
    PREVIOUS_VERSION = "Previous version"  # drawn as ‹ beside "2/3"
    NEXT_VERSION = "Next version"  # drawn as ›
    # Under a reply that waits for a slot: the load settings with one conversation more.
    MORE_PARALLEL = "More parallel conversations…"


STOP_REASON_TEXT: dict[StopReason, str] = {
    StopReason.STOP_TOKEN: "end of turn",
    StopReason.STOP_STRING: "stop string",
    StopReason.LENGTH: "max tokens reached",
    StopReason.CONTEXT_FULL: "context full",
    StopReason.CANCELLED: "stopped",
}


@dataclass(frozen=True)
class ImageThumb:
    """An image shown with a message: encoded bytes (PNG, JPEG...) or a decoded QImage."""

    data: bytes | QImage
    name: str = ""


CPU_BUSY_NOTE = "the CPU was busy with other programs"

# A wait for a slot shorter than this is not worth a word on the line (the tooltip has it).
SHOWN_WAIT_S = 0.1
# Stored stats whose ttft counts from admission, not from submit (the queue apart).
TTFT_APART = "ttft_after_queue"


@dataclass(frozen=True)
class ReplyStats:
    """What the line under a finished reply says; built from an engine Completion."""

    decode_tokens_per_second: float
    ttft: float  # seconds from admission (a free sequence) to the first token; ``queued`` before it
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    stop_reason: StopReason
    drafted: int = 0
    accepted: int = 0
    prefill_tokens_per_second: float = 0.0
    queued: float = 0.0
    decode_seconds: float = 0.0
    # Other programs' CPU load while the reply was computed (Completion.cpu): CPUs' worth,
    # and whether it left the model's threads without a core each (what slows decode).
    cpu_busy_elsewhere: float = 0.0
    cpu_slowed: bool = False
    threads: int = 0
    cores: int = 0

    @classmethod
    def from_completion(cls, completion: Completion) -> ReplyStats:
        t = completion.timings
        u = completion.usage
        cpu = completion.cpu
        return cls(
            decode_tokens_per_second=t.decode_tokens_per_second,
            ttft=t.ttft,
            prompt_tokens=u.prompt_tokens,
            cached_tokens=u.cached_tokens,
            completion_tokens=u.completion_tokens,
            stop_reason=completion.stop_reason,
            drafted=completion.drafted,
            accepted=completion.accepted,
            prefill_tokens_per_second=t.prefill_tokens_per_second,
            queued=t.queued,
            decode_seconds=t.decode_seconds,
            cpu_busy_elsewhere=round(cpu.others, 2) if cpu is not None else 0.0,
            cpu_slowed=cpu is not None and cpu.slowed,
            threads=cpu.threads if cpu is not None else 0,
            cores=cpu.cores if cpu is not None else 0,
        )

    def summary(self) -> str:
        """One line, in the order things happened: ``0.28 s to first token · 41.3 tok/s ·
        1,234 prompt tokens, 1,100 from cache · end of turn``, led by ``waited 2 min 30 s
        for a slot ·`` when the reply queued behind others, and ending ``· 12 / 20 drafts
        accepted`` with speculation."""
        parts = [f"waited {format_seconds(self.queued)} for a slot"] if self.queued >= SHOWN_WAIT_S else []
        if not self.prompt_tokens and not self.completion_tokens:  # stopped before it started
            return " · ".join([*parts, STOP_REASON_TEXT[self.stop_reason]])
        parts += [
            f"{format_seconds(self.ttft)} to first token",
            f"{self.decode_tokens_per_second:.1f} tok/s",
            f"{self.prompt_tokens:,} prompt tokens"
            + (f", {self.cached_tokens:,} from cache" if self.cached_tokens else ""),
            STOP_REASON_TEXT[self.stop_reason],
        ]
        if self.drafted > 0:
            parts.append(f"{self.accepted:,} / {self.drafted:,} drafts accepted")
        if self.cpu_slowed:
            parts.append(CPU_BUSY_NOTE)
        return " · ".join(parts)

    def details(self) -> str:
        """The tooltip: every number, one per line, for "why was this slow?"."""
        lines = [
            f"Generated {self.completion_tokens:,} tokens at {self.decode_tokens_per_second:.1f} tok/s"
            + (f" in {format_seconds(self.decode_seconds)}" if self.decode_seconds else ""),
            f"First token {format_seconds(self.ttft)} after it started",
            f"Prompt: {self.prompt_tokens:,} tokens, {self.cached_tokens:,} reused from cache, "
            f"{max(0, self.prompt_tokens - self.cached_tokens):,} read"
            + (
                f" at {self.prefill_tokens_per_second:,.0f} tok/s"
                if self.prefill_tokens_per_second and self.prompt_tokens > self.cached_tokens
                else ""
            ),
            f"Stopped: {STOP_REASON_TEXT[self.stop_reason]}",
        ]
        if self.queued >= 0.01:
            lines.insert(
                0,
                f"Waited {format_seconds(self.queued)} for a slot: the model was serving as many "
                "conversations as it does at once",
            )
        if self.drafted > 0:
            rate = 100.0 * self.accepted / self.drafted
            lines.append(
                f"Speculation: {self.accepted:,} of {self.drafted:,} drafted tokens accepted ({rate:.0f}%)"
            )
        if self.cpu_slowed:
            lines.append(
                f"CPU: other programs used {self.cpu_busy_elsewhere:.1f} of its {self.cores} cores, so "
                f"the model's {self.threads} threads waited for one another (fewer threads decode "
                "faster while they run: CPU threads, in the model's load panel)"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for storing beside the message."""
        return {
            "decode_tokens_per_second": self.decode_tokens_per_second,
            "ttft": self.ttft,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "completion_tokens": self.completion_tokens,
            "stop_reason": self.stop_reason.value,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "prefill_tokens_per_second": self.prefill_tokens_per_second,
            "queued": self.queued,
            "decode_seconds": self.decode_seconds,
            "cpu_busy_elsewhere": self.cpu_busy_elsewhere,
            "cpu_slowed": self.cpu_slowed,
            "threads": self.threads,
            "cores": self.cores,
            TTFT_APART: True,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReplyStats:
        values = dict(data)
        values["stop_reason"] = StopReason(values["stop_reason"])
        if not values.get(TTFT_APART):
            # Stored before the queue was counted apart: its ttft included the wait.
            values["ttft"] = max(0.0, values.get("ttft", 0.0) - values.get("queued", 0.0))
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in values.items() if k in known})


@dataclass(frozen=True)
class Thought:
    """A reasoning model's thinking, shown in a block above its reply that folds away."""

    text: str
    tokens: int = 0
    seconds: float | None = None  # None while it goes on (or not known: a crash cut it off)
    active: bool = False  # being written now: the block is open unless the user closed it

    def summary(self) -> str:
        """The block's header: ``Thought for 3.2 s · 118 tokens`` (``Thinking… · 42 tokens``
        while it goes on)."""
        tokens = f"{self.tokens:,} token{'s' * (self.tokens != 1)}"
        if self.active:
            return f"Thinking… · {tokens}"
        if self.seconds is None:
            return f"Thought · {tokens}"
        if self.seconds < 0.05:  # it came in one delta: what 0.0 s would say is not so
            seconds = "under 0.1 s"
        else:
            seconds = f"{self.seconds:.1f} s" if self.seconds < 10 else format_seconds(self.seconds)
        return f"Thought for {seconds} · {tokens}"


@dataclass(frozen=True)
class QueueWait:
    """Why a reply has not started: the model serves ``parallel`` conversations at once
    (0: not known) and ``chats`` of the window's other chats hold them; ``ahead`` more
    replies wait before it."""

    parallel: int = 0
    chats: int = 0
    ahead: int = 0

    @property
    def explained(self) -> bool:
        """Whether it says why (and so can offer more slots)."""
        return self.parallel > 0

    def text(self) -> str:
        """``Waiting: the model serves 1 conversation at a time (parallel = 1) and another
        chat is replying``; without the reason, ``waiting for the model…``."""
        if not self.explained:
            return f"queued, {self.ahead} ahead" if self.ahead else "waiting for the model…"
        n = self.parallel
        serves = f"the model serves {n} conversation{'s' * (n != 1)} at a time (parallel = {n})"
        busy = "another chat is replying" if self.chats == 1 else f"{self.chats} other chats are replying"
        text = f"Waiting: {serves} and {busy}"
        if self.ahead:
            more = "reply waits" if self.ahead == 1 else "replies wait"
            text += f"; {self.ahead} more {more} ahead of this one"
        return text


@dataclass(frozen=True)
class Source:
    """An excerpt a reply was given, numbered as in its prompt (what it cites as ``[n]``)."""

    n: int
    path: str
    page: int | None = None
    heading: str = ""
    text: str = ""
    start: int = 0
    end: int = 0
    last_page: int | None = None

    @property
    def name(self) -> str:
        return self.path.replace("\\", "/").rsplit("/", 1)[-1]

    def label(self, short: bool = False) -> str:
        """Where it comes from in a few words: ``report.pdf, p. 3``, ``notes.md, Setup › Linux``
        (``short``: only the innermost heading, ``notes.md, Linux``)."""
        label = self.name
        if self.page is not None:
            if self.last_page is not None and self.last_page != self.page:
                label += f", pp. {self.page}–{self.last_page}"
            else:
                label += f", p. {self.page}"
        if self.heading:
            label += ", " + (self.heading.rsplit(" › ", 1)[-1] if short else self.heading)
        return label


@dataclass(frozen=True)
class MessageData:
    id: MessageId
    role: Role
    text: str
    state: MessageState = MessageState.DONE
    images: tuple[ImageThumb, ...] = ()
    stats: ReplyStats | None = None
    error: str = ""  # FAILED: the engine's one-line human message
    author: str = ""  # above a reply: the model that wrote it ("": not known, "Assistant")
    author_details: str = ""  # its tooltip: the file, the sampling settings
    version: int = 1  # which of the message's versions this is, from 1 ("2/3" under it)
    version_count: int = 1
    can_regenerate: bool = True  # False when it would fail again (the chat outgrew the context)
    thought: Thought | None = None  # a reasoning model's thinking, above the reply (never in ``text``)
    waiting: QueueWait | None = None  # PENDING and queued: why it has not started
    activity: str = ""  # PENDING before it is even submitted: "Searching documents…"
    # Documents: the excerpts a reply was given (its [n] link to them, the cited ones are
    # listed under it), and a note about them ("No excerpt matched…").
    sources: tuple[Source, ...] = ()
    documents_note: str = ""
    # What Copy gives when it is not ``text``: a reply's words without its tool blocks.
    copy_text: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "role", Role(self.role))
        object.__setattr__(self, "images", tuple(self.images))


@dataclass(frozen=True)
class Attachment:
    """An image the user attached in the composer: the file's bytes, as read."""

    data: bytes
    name: str
    mime_type: str = ""


@dataclass(frozen=True)
class ConversationSummary:
    id: ConversationId
    title: str
    updated_at: datetime
    preview: str = ""  # e.g. the matching text when listed as a search result


def format_seconds(seconds: float) -> str:
    """``85 ms``, ``0.42 s``, ``3.1 s``, ``2 min 5 s``."""
    if seconds < 0.1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


def format_prefill(done: int, total: int, cached: int, images_done: int = 0, images_total: int = 0) -> str:
    """``reading 1,200 / 3,400 tokens, 2,100 from cache`` (``, 1 / 2 images`` with images)."""
    text = f"reading {done:,} / {total:,} tokens"
    if cached:
        text += f", {cached:,} from cache"
    if images_total:
        text += f", {images_done} / {images_total} images"
    return text
