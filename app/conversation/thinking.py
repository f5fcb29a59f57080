"""A streamed reply split into a reasoning model's thinking and its answer, with the
thinking's token count and time.

The engine's ``ReasoningSplitter`` does the splitting (tags cut across tokens are held back
until they resolve); this adds what the window shows about the thinking. Each token is fed
on its own (``TextDelta.pieces``), so a token counts as thinking when the splitter was or is
inside the reasoning around it: the ``<think>`` that opens it, every token of it, the
``</think>`` that closes it. The time runs from the reply's first token (``started``: the
thinking can only open there) to the delta that closed it (deltas come ~30 times a second:
that is the resolution at the end).

Pure: no Qt, no llama.cpp.
"""

from __future__ import annotations

from app.store.records import Thinking
from engine import ChatTraits, ReasoningSplitter


class ReplySplit:
    """``feed`` each delta's text and pieces as it arrives, ``finish`` at the end; ``answer``
    is what the reply says (what is stored as its text and sent back next turn), ``thinking``
    what it thought."""

    def __init__(self, traits: ChatTraits | None = None) -> None:
        self._splitter: ReasoningSplitter = (traits or ChatTraits()).reasoning_splitter()
        self._opens = traits is not None and traits.opens_thinking
        self.answer = ""
        self.thought = ""
        self.tokens = 0  # thinking tokens
        self._tentative = 0  # tokens before a <think> resolves (whitespace, "<thi")
        self._answering = False  # the reasoning is over (or there was none)
        self._t_started: float | None = None  # the reply's first token
        self._t_first: float | None = None
        self._t_end: float | None = None
        self._elapsed_before = 0.0  # a continued reply: the thinking time it already had
        self._apart = False  # thinking arrived apart from the text (a remote server's)

    @classmethod
    def resuming(
        cls, traits: ChatTraits | None, answer: str, thinking: Thinking, now: float
    ) -> tuple[ReplySplit, str]:
        """A split that goes on with a reply cut off earlier, and the text the model's turn
        must start with (``ChatRequest.assistant_prefix``) for it to go on where it was:
        inside its thinking when that had not ended, else after it."""
        split = cls(traits)
        split.answer = answer
        split.thought = thinking.text
        split.tokens = thinking.tokens
        tags = split._splitter
        opening = "" if split._opens else tags.open_tag + "\n"
        if answer and (thinking.text or split._opens):
            # Its thinking had ended (an empty one, where the template opened it).
            prefix = f"{opening}{thinking.text}\n{tags.close_tag}\n\n{answer}"
            split._t_first, split._t_end = 0.0, thinking.seconds or 0.0
        elif thinking.text:
            # Stopped, or cut off at max tokens, while thinking: it goes on thinking, the
            # time it had thought kept.
            prefix = opening + thinking.text
            split._t_first = now
            split._elapsed_before = thinking.seconds or 0.0
        else:
            prefix = answer
        # The splitter is brought to where the prefix leaves it; what it says is known already.
        split._splitter.feed(prefix)
        split._answering = bool(prefix) and not split._splitter.in_reasoning
        return split, prefix

    def started(self, now: float) -> None:
        """The reply's first token was sampled (``RequestHandle.started``): its text comes
        with the next delta, up to 1/30 s later."""
        if self._t_started is None:
            self._t_started = now

    @property
    def thinking(self) -> bool:
        """Inside the thinking now (text of the answer not begun)."""
        return not self._answering and (self._splitter.in_reasoning or self._opens or self._apart)

    def feed(
        self, text: str, pieces: tuple[str, ...], now: float, reasoning: tuple[str, ...] = ()
    ) -> tuple[str, str]:
        """A delta's text and the text of each of its tokens, and the thinking that came
        apart (``TextDelta.reasoning``: a remote server's): (thinking, answer) it adds."""
        thought: list[str] = []
        answer: list[str] = []
        for piece in reasoning:  # thinking as it is: nothing to split
            if self._t_first is None:
                self._t_first = now if self._t_started is None else min(self._t_started, now)
            self._apart = True
            self.tokens += 1
            thought.append(piece)
        fed = 0
        for piece in pieces:
            self._feed_token(piece, now, thought, answer)
            fed += len(piece)
        if fed < len(text):  # held text released at the end belongs to no token
            self._take(self._splitter.feed(text[fed:]), now, thought, answer)
        return self._add(thought, answer)

    def _add(self, thought: list[str], answer: list[str]) -> tuple[str, str]:
        # Once per delta, not per token: a long reply is not copied for each of its tokens.
        more_thought, more_answer = "".join(thought), "".join(answer)
        self.thought += more_thought
        self.answer += more_answer
        return more_thought, more_answer

    def _feed_token(self, piece: str, now: float, thought: list[str], answer: list[str]) -> None:
        if self._answering:
            self._take(self._splitter.feed(piece), now, thought, answer)
            return
        before = self._splitter.in_reasoning
        thought_before = len(thought)
        self._take(self._splitter.feed(piece), now, thought, answer)
        after = self._splitter.in_reasoning
        # A piece may also open and close the thinking by itself (text cut coarsely).
        if before or after or len(thought) > thought_before:
            if self._t_first is None:
                self._t_first = now if self._t_started is None else min(self._t_started, now)
            self.tokens += 1 + self._tentative
            self._tentative = 0
            if not after:
                self._end_thinking(now)
        elif self._answering:
            self._tentative = 0  # it did not open a thinking block: the answer began
        else:
            self._tentative += 1

    def _take(self, split: tuple[str, str], now: float, thought: list[str], answer: list[str]) -> None:
        reasoning, content = split
        if reasoning:
            thought.append(reasoning)
        if content:
            answer.append(content)
            if not self._answering:
                self._end_thinking(now)

    def _end_thinking(self, now: float) -> None:
        self._answering = True
        if self._t_first is not None and self._t_end is None:
            self._t_end = now

    def finish(self, now: float) -> tuple[str, str]:
        """The end of the reply: held text released; a thinking that never closed ends now."""
        thought: list[str] = []
        answer: list[str] = []
        self._take(self._splitter.finish(), now, thought, answer)
        if self._t_first is not None:
            self._end_thinking(now)
        return self._add(thought, answer)

    def so_far(self, now: float) -> Thinking:
        """The thinking as it stands, its seconds only once it has ended."""
        seconds = None
        if self._t_first is not None and self._t_end is not None:
            seconds = self._elapsed_before + self._t_end - self._t_first
        return Thinking(self.thought, self.tokens, seconds)
