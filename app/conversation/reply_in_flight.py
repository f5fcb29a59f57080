"""One reply being generated, as the chat controller follows it: its handle, the text and
thinking so far, what the store holds of it, and its stage for the conversation list."""

from __future__ import annotations

import enum
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from app.chat import QueueWait, Thought
from app.conversation.thinking import ReplySplit
from app.conversation.tool_blocks import copy_text, progress_text
from app.conversation.tool_progress import ToolProgress
from app.store.history import Thinking
from engine import ChatRequest, RequestHandle


class ReplyStage(enum.Enum):
    """Where a reply is, as the conversation list shows it."""

    WAITING = "waiting"
    READING = "reading"  # the prompt is being evaluated
    THINKING = "thinking"  # a reasoning model, before its answer
    WRITING = "writing"
    TOOLS = "calling tools"  # its calls asked about or running (issue 29)


@dataclass(eq=False)
class ReplyInFlight:
    """One reply being generated."""

    conversation_id: int
    message_id: int
    handle: RequestHandle | None
    # The reply so far, its thinking apart from its answer (a continued reply's earlier
    # text included), kept on purpose: the store is written from it every half second and
    # at the end, and it is what the view is given back when the conversation is shown
    # again mid-reply.
    split: ReplySplit = field(default_factory=ReplySplit)
    saved: tuple[str, Thinking] = ("", Thinking())  # what the store holds
    stage: ReplyStage = ReplyStage.WAITING
    read_percent: int = 0  # of the prompt, while READING
    started: float = field(default_factory=time.monotonic)
    resumed: bool = False  # continuing a reply that was cut off
    queued_at: float | None = None  # time.monotonic() when the engine queued it
    waiting: QueueWait | None = None  # why it waits for a slot, once that is known
    # With tools offered: the request as first made (each round continues it), the rounds.
    request: ChatRequest | None = None
    tools: ToolProgress | None = None

    @property
    def text(self) -> str:
        """The answer so far: what is stored as the reply's text and sent back next turn
        (with tools, the text of the round it is in, its calls taken out)."""
        return self.split.answer if self.tools is None else self.tools.answer

    @property
    def shown_text(self) -> str:
        """What the view shows: with tools, the rounds' blocks before the text."""
        return self.text if self.tools is None else progress_text(self.tools)

    @property
    def copy_text(self) -> str:
        """What copying the reply gives: the texts, not the tool blocks."""
        return self.text if self.tools is None else copy_text(self.tools.rounds, self.text)

    def thinking(self) -> Thinking:
        return self.split.so_far(time.monotonic())

    def thought(self) -> Thought | None:
        """The thinking as the view shows it (None: the reply has no thinking text so far;
        an empty ``<think></think>``, as models that were told not to think write, is none)."""
        thinking = self.thinking()
        if not thinking.text:
            return None
        return Thought(thinking.text, thinking.tokens, thinking.seconds, active=self.split.thinking)

    @property
    def stage_text(self) -> str:
        if self.stage is ReplyStage.WAITING and self.waiting is not None and self.waiting.explained:
            return "waiting for a slot"
        return f"reading {self.read_percent}%" if self.stage is ReplyStage.READING else self.stage.value


def why_waiting(stream: ReplyInFlight, streams: Iterable[ReplyInFlight], parallel: int) -> QueueWait | None:
    """Why ``stream`` (queued) has not started, with ``streams`` the replies in flight and
    ``parallel`` the conversations the model serves at once (0: not known). Said only
    when it is sure: the window's other chats hold every slot. (Every request is queued
    first and admitted the same instant when a slot is free; a slot held by a request to
    the local server, or freed a moment ago, is not seen from here.)"""
    others = [s for s in streams if s is not stream]
    serving = sum(1 for s in others if s.stage is not ReplyStage.WAITING)
    queued_at = stream.queued_at if stream.queued_at is not None else time.monotonic()
    ahead = sum(
        1
        for s in others
        if s.stage is ReplyStage.WAITING and s.queued_at is not None and s.queued_at < queued_at
    )
    if parallel > 0 and serving >= parallel:
        return QueueWait(parallel, serving, ahead)
    return QueueWait(ahead=ahead) if ahead else None
