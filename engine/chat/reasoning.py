"""A reasoning model's thinking split from its answer, incrementally.

Models trained to think write ``<think>…</think>`` before the answer; some templates open
the ``<think>`` in the prompt, so the output starts inside the reasoning
(``ReasoningSplitter(starts_inside=True)``). Only a block at the start of the output is
reasoning: once the answer has begun, a ``<think>`` in it is just text. Tags split across
deltas are held back until they resolve, so reasoning never leaks into the content and
the result does not depend on how the text was cut. Whitespace around the reasoning and
at the start of the answer is dropped. Pure: imports neither llama.cpp nor Qt.
"""

from __future__ import annotations

import enum


class _Phase(enum.Enum):
    START = "start"  # nothing but whitespace yet: a <think> may still open
    REASONING = "reasoning"
    ANSWER_START = "answer start"  # after </think>: leading whitespace is dropped
    ANSWER = "answer"


def _held_prefix(text: str, tag: str) -> int:
    """The length of the longest suffix of ``text`` that is a proper prefix of ``tag``."""
    for k in range(min(len(text), len(tag) - 1), 0, -1):
        if tag.startswith(text[-k:]):
            return k
    return 0


class ReasoningSplitter:
    """Text in, ``(reasoning, content)`` out: ``feed`` for each delta, ``finish`` at the end."""

    def __init__(self, starts_inside: bool = False, open_tag: str = "<think>", close_tag: str = "</think>"):
        if not open_tag or not close_tag:
            raise ValueError("reasoning tags must not be empty")
        self.open_tag = open_tag
        self.close_tag = close_tag
        self._phase = _Phase.REASONING if starts_inside else _Phase.START
        self._reasoning_started = False  # any reasoning text emitted yet
        self._skip_open = starts_inside  # a model may write the <think> its prompt opened
        self._buffer = ""
        self._space = ""  # whitespace at the end of the reasoning, held until more follows

    @property
    def in_reasoning(self) -> bool:
        return self._phase is _Phase.REASONING

    def feed(self, text: str) -> tuple[str, str]:
        self._buffer += text
        reasoning: list[str] = []
        content: list[str] = []
        while self._buffer:
            phase = self._phase
            if phase is _Phase.START:
                stripped = self._buffer.lstrip()
                if not stripped or (self.open_tag.startswith(stripped) and stripped != self.open_tag):
                    break  # whitespace, or what may become <think>: wait
                if stripped.startswith(self.open_tag):
                    self._buffer = stripped[len(self.open_tag) :]
                    self._phase = _Phase.REASONING
                else:
                    self._phase = _Phase.ANSWER
            elif phase is _Phase.REASONING:
                if not self._reasoning_started:
                    # Leading whitespace, and an opening tag the model repeats, are not reasoning.
                    stripped = self._buffer.lstrip()
                    if self._skip_open:
                        if not stripped or (self.open_tag.startswith(stripped) and stripped != self.open_tag):
                            self._buffer = stripped
                            break
                        self._skip_open = False
                        if stripped.startswith(self.open_tag):
                            stripped = stripped[len(self.open_tag) :]
                    self._buffer = stripped
                    if not stripped:
                        break
                end = self._buffer.find(self.close_tag)
                if end >= 0:
                    self._reason(self._buffer[:end], reasoning, closing=True)
                    self._buffer = self._buffer[end + len(self.close_tag) :]
                    self._phase = _Phase.ANSWER_START
                    continue
                hold = _held_prefix(self._buffer, self.close_tag)
                self._reason(self._buffer[: len(self._buffer) - hold], reasoning, closing=False)
                self._buffer = self._buffer[len(self._buffer) - hold :]
                break
            elif phase is _Phase.ANSWER_START:
                self._buffer = self._buffer.lstrip()
                if self._buffer:
                    self._phase = _Phase.ANSWER
            else:
                content.append(self._buffer)
                self._buffer = ""
        return "".join(reasoning), "".join(content)

    def _reason(self, text: str, out: list[str], closing: bool) -> None:
        body = text.rstrip()
        if body and not self._reasoning_started:
            body = body.lstrip()
        if body:
            out.append(self._space + body)
            self._reasoning_started = True
            self._space = text[len(text.rstrip()) :]
        elif self._reasoning_started:
            self._space += text
        if closing:
            self._space = ""

    def finish(self) -> tuple[str, str]:
        """The end of the output: held text is released where it belongs."""
        held, self._buffer = self._buffer, ""
        phase = self._phase
        self._phase = _Phase.ANSWER
        if phase is _Phase.START:
            return "", held
        if phase is _Phase.REASONING:
            reasoning = held.strip() if not self._reasoning_started else held
            return ((self._space + reasoning) if reasoning.strip() else ""), ""
        if phase is _Phase.ANSWER_START:
            return "", ""
        return "", held


def split_reasoning(text: str, starts_inside: bool = False) -> tuple[str, str]:
    """The whole output at once: ``(reasoning, content)``."""
    splitter = ReasoningSplitter(starts_inside)
    reasoning, content = splitter.feed(text)
    more_reasoning, more_content = splitter.finish()
    return reasoning + more_reasoning, content + more_content
