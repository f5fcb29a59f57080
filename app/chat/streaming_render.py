"""A reply being streamed, rendered in pieces.

Re-rendering the whole reply on every update would cost more the longer it grows; finished
blocks are instead frozen into pieces that are never rendered or laid out again, and only
the tail (the part still growing) is, so an update costs about the same at any length.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtGui import QTextDocument

from app.chat.markdown import MarkdownRenderer, RenderedMarkdown, stable_prefix_end

SEGMENT_CHARS = 1500  # a frozen piece is at least this long: fewer documents to stack


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
class StreamingRender:
    """The pieces of one streaming reply: frozen ones, then the tail. The whole reply is
    rendered as one document once it ends."""

    frozen: list[RenderedDocument] = field(default_factory=list)
    frozen_end: int = 0  # text[:frozen_end] is in the frozen pieces
    frozen_code: list[str] = field(default_factory=list)
    tail: RenderedDocument | None = None
    rendered_length: int = -1  # len(text) when last rendered

    @property
    def segments(self) -> list[RenderedDocument]:
        return [*self.frozen, self.tail] if self.tail is not None else list(self.frozen)

    @property
    def code_blocks(self) -> tuple[str, ...]:
        tail = self.tail.rendered.code_blocks if self.tail is not None else ()
        return (*self.frozen_code, *tail)

    def update(
        self, text: str, renderer: MarkdownRenderer, new_document: Callable[[], QTextDocument]
    ) -> bool:
        """Bring the pieces up to date with ``text``: freeze finished blocks once there are
        enough of them, then render the tail again. False when they were already current
        (streamed text only grows, so its length says)."""
        if self.rendered_length == len(text):
            return False
        end = stable_prefix_end(text, self.frozen_end)
        if end - self.frozen_end >= SEGMENT_CHARS:
            # Code blocks are numbered across pieces, so each copy link names its block.
            piece = renderer.render(text[self.frozen_end : end], code_index_start=len(self.frozen_code))
            self.frozen.append(RenderedDocument.holding(new_document(), piece))
            self.frozen_code.extend(piece.code_blocks)
            self.frozen_end = end
        tail_text = text[self.frozen_end :]
        if not tail_text:
            self._drop_tail()
        else:
            piece = renderer.render(tail_text, code_index_start=len(self.frozen_code))
            if self.tail is None:
                self.tail = RenderedDocument.holding(new_document(), piece)
            else:
                self.tail.show(piece)
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
