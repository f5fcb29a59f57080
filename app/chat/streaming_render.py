"""A reply being streamed, rendered in pieces.

Re-rendering the whole reply on every update would cost more the longer it grows; finished
blocks are instead frozen into pieces that are never rendered or laid out again, and only
the tail (the part still growing) is, so an update costs about the same at any length.

A code block still being written would be one growing tail, highlighted and laid out
whole on every update: its finished lines are frozen too, into pieces of the block that
stack into the box the whole block is drawn as (``MarkdownRenderer.code_block``). Lines
are frozen only where the lexer is back in its initial state (not inside a docstring), so
each piece is highlighted as it is in the finished reply.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtGui import QTextDocument

from app.chat.markdown import (
    MAX_HIGHLIGHT_CHARS,
    LexedToken,
    MarkdownRenderer,
    OpenFence,
    RenderedMarkdown,
    closes_fence,
    code_lines,
    scan_blocks,
)

SEGMENT_CHARS = 200  # a frozen piece is at least this long: fewer documents to stack
CODE_PIECE_LINES = 4  # lines of an open code block frozen together


@dataclass(eq=False)
class RenderedDocument:
    """A QTextDocument and the rendering it holds; the rendering's code blocks are what
    the document's ``copy:<n>`` links copy."""

    document: QTextDocument
    rendered: RenderedMarkdown

    @classmethod
    def holding(cls, document: QTextDocument, rendered: RenderedMarkdown) -> RenderedDocument:
        document.setHtml(rendered.html)
        return cls(document, rendered)

    def show(self, rendered: RenderedMarkdown) -> None:
        # setHtml lays the document out again: skip it when the rendering is the same one.
        if rendered is not self.rendered:
            self.document.setHtml(rendered.html)
            self.rendered = rendered


@dataclass(eq=False)
class OpenCode:
    """A fenced code block still being written, its finished lines frozen in pieces."""

    fence: OpenFence
    index: int  # its number among the reply's code blocks: what its Copy link copies
    next_line: int  # where its lines not frozen yet begin
    pieces: int = 0  # frozen so far; the first carries the header
    tried: int = 0  # complete lines seen when freezing last failed (inside a string)


@dataclass(eq=False)
class StreamingRender:
    """The pieces of one streaming reply: frozen ones, then the tail. The whole reply is
    rendered as one document once it ends."""

    frozen: list[RenderedDocument] = field(default_factory=list)
    frozen_end: int = 0  # text[:frozen_end] is in the frozen pieces (and an open block's lines)
    frozen_code: list[str] = field(default_factory=list)
    code: OpenCode | None = None  # the code block being written, once it is in pieces
    open_code: str = ""  # that block's code so far
    tail: RenderedDocument | None = None
    rendered_length: int = -1  # len(text) when last rendered
    rendered_chars: int = 0  # characters rendered to HTML, all updates together

    @property
    def segments(self) -> list[RenderedDocument]:
        return [*self.frozen, self.tail] if self.tail is not None else list(self.frozen)

    @property
    def code_blocks(self) -> tuple[str, ...]:
        if self.code is not None:
            return (*self.frozen_code, self.open_code)
        tail = self.tail.rendered.code_blocks if self.tail is not None else ()
        return (*self.frozen_code, *tail)

    def update(
        self, text: str, renderer: MarkdownRenderer, new_document: Callable[[], QTextDocument]
    ) -> bool:
        """Bring the pieces up to date with ``text``: freeze finished blocks once there are
        enough of them (and finished lines of a long code block), then render the tail
        again. False when they were already current (streamed text only grows, so its
        length says)."""
        if self.rendered_length == len(text):
            return False
        freeze = _Freezer(self, text, renderer, new_document)
        freeze.finished()
        if self.code is not None:
            tail: RenderedMarkdown | None = freeze.code_tail(self.code)
        elif self.frozen_end < len(text):
            tail = freeze.markdown(len(text))
        else:
            tail = None
        if tail is None:
            self._drop_tail()
        elif self.tail is None:
            self.tail = RenderedDocument.holding(new_document(), tail)
        else:
            self.tail.show(tail)
        self.rendered_length = len(text)
        return True

    def discard(self) -> None:
        """Delete the pieces' documents: their parent outlives this reply's streaming."""
        for segment in self.frozen:
            segment.document.deleteLater()
        self.frozen.clear()
        self._drop_tail()

    def _drop_tail(self) -> None:
        if self.tail is not None:
            self.tail.document.deleteLater()
            self.tail = None


@dataclass
class _Freezer:
    """One update of a ``StreamingRender``: what to freeze, and the tail's rendering."""

    stream: StreamingRender
    text: str
    renderer: MarkdownRenderer
    new_document: Callable[[], QTextDocument]

    def finished(self) -> None:
        """Freeze what no longer changes: finished blocks, and lines of a long open code
        block (a block that ends is frozen to its end)."""
        stream, text = self.stream, self.text
        while True:
            if stream.code is not None:
                if not self._code_lines(stream.code):
                    return
                continue  # the block ended: what follows it is Markdown again
            end, fence = scan_blocks(text, stream.frozen_end)
            if fence is not None and text.count("\n", fence.code_start) > CODE_PIECE_LINES:
                # An unindented fence ends the blocks before it: they are finished.
                if fence.start > stream.frozen_end:
                    self._freeze(self.markdown(fence.start), fence.start)
                stream.code = OpenCode(fence, len(stream.frozen_code), fence.code_start)
                continue
            if end - stream.frozen_end >= SEGMENT_CHARS:
                self._freeze(self.markdown(end), end)
            return

    def markdown(self, end: int) -> RenderedMarkdown:
        """text[frozen_end:end] rendered, its code blocks numbered after the frozen ones."""
        part = self.text[self.stream.frozen_end : end]
        self.stream.rendered_chars += len(part)
        return self.renderer.render(part, code_index_start=len(self.stream.frozen_code))

    def _freeze(self, rendered: RenderedMarkdown, end: int) -> None:
        stream = self.stream
        stream.frozen.append(RenderedDocument.holding(self.new_document(), rendered))
        stream.frozen_code.extend(rendered.code_blocks)
        stream.frozen_end = end

    def _code_lines(self, code: OpenCode) -> bool:
        """Freeze the open block's finished lines, all but the last (whose tokens may still
        depend on what comes), if there are enough; all of them if the block ended. Whether
        it ended."""
        text = self.text
        starts = []  # of the complete lines not frozen
        pos = code.next_line
        while (newline := text.find("\n", pos)) >= 0:
            if closes_fence(text[pos:newline], code.fence.marker):
                self._freeze_code(code, pos, last=True)
                self.stream.frozen_code.append(text[code.fence.code_start : pos][:-1])
                self.stream.frozen_end = newline + 1
                self.stream.code = None
                return True
            starts.append(pos)
            pos = newline + 1
        enough = len(starts) > CODE_PIECE_LINES and len(starts) != code.tried
        if enough and not self._freeze_code(code, starts[-1], last=False, before=pos):
            code.tried = len(starts)
        return False

    def _freeze_code(self, code: OpenCode, end: int, last: bool, before: int = 0) -> bool:
        """Freeze the block's lines up to ``end`` into a piece. Unless it is the ``last``,
        only if the lexer starts over at ``end``: the lines from there to ``before``
        (whole lines) lex alone as they do after the lines before. Whether it froze."""
        text = self.text
        lines = text[code.next_line : end]
        if self._plain(code, end):
            body = html.escape(lines[:-1])
        elif last:
            body = self.renderer.tokens_html(self.renderer.lex(lines, code.fence.language))
        else:
            tokens = self._split(code, end - code.next_line, text[code.next_line : before])
            if tokens is None:
                return False
            body = self.renderer.tokens_html(tokens)
        html_ = self.renderer.code_block(body, code.fence.language, code.index, code.pieces == 0, last)
        self.stream.rendered_chars += len(lines)
        self.stream.frozen.append(RenderedDocument.holding(self.new_document(), RenderedMarkdown(html_, ())))
        code.next_line = end
        code.pieces += 1
        return True

    def _split(self, code: OpenCode, at: int, lines: str) -> list[LexedToken] | None:
        """The tokens of lines[:at] when lines[at:] lex alone as they do after them (the
        lexer is back in its initial state at ``at``); None when not."""
        language = code.fence.language
        tokens = self.renderer.lex(lines, language)
        first_after = next((k for k, (pos, _kind, _value) in enumerate(tokens) if pos >= at), len(tokens))
        if first_after == len(tokens) or tokens[first_after][0] != at:
            return None  # a token runs across the line break
        after = [(pos - at, kind, value) for pos, kind, value in tokens[first_after:]]
        if self.renderer.lex(lines[at:], language) != after:
            return None  # inside a string or a comment that goes on
        return tokens[:first_after]

    def code_tail(self, code: OpenCode) -> RenderedMarkdown:
        """The open block's lines not frozen, closing its box as the whole reply's render
        of it does; a last line that closes the fence (no newline yet) already closes it."""
        text = self.text
        end = len(text)
        last_line = text.rfind("\n", code.next_line) + 1 or code.next_line
        partial = text[last_line:]
        # Markdown ends the block at a closing fence, and leaves out a last line of spaces.
        if partial and (not partial.strip() or closes_fence(partial, code.fence.marker)):
            end = last_line
        self.stream.open_code = text[code.fence.code_start : end].removesuffix("\n")
        lines = code_lines(text[code.next_line : end].removesuffix("\n"))
        self.stream.rendered_chars += len(lines)
        if self._plain(code, end):
            body = html.escape(lines[:-1])
        else:
            body = self.renderer.tokens_html(self.renderer.lex(lines, code.fence.language))
        block = self.renderer.code_block(body, code.fence.language, code.index, code.pieces == 0)
        return RenderedMarkdown(block, ())

    @staticmethod
    def _plain(code: OpenCode, end: int) -> bool:
        # The whole reply's render does not highlight a block this long either (its pieces
        # frozen before it grew so long stay highlighted until the reply ends).
        return end - code.fence.code_start > MAX_HIGHLIGHT_CHARS
