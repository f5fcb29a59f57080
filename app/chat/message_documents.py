"""The documents a message view lays out and paints.

Markdown is rendered to HTML once per (message, text) and the HTML kept for many messages;
a QTextDocument (costly: it holds a whole layout) only for those painted recently. A
streaming reply has its own pieces instead (``StreamingRender``).
"""

from __future__ import annotations

import html
from collections import Counter

from PySide6.QtCore import QObject
from PySide6.QtGui import QFont, QTextCursor, QTextDocument, QTextOption

from app.chat.citation_links import linked_citations, sources_html
from app.chat.data import MessageData, MessageId
from app.chat.lru import LruCache
from app.chat.markdown import MarkdownRenderer, MarkdownStyle, RenderedMarkdown, default_stylesheet
from app.chat.streaming_render import RenderedDocument, StreamingRender
from engine import Role

DOC_CACHE_SIZE = 160
HTML_CACHE_SIZE = 4000


def selection_cursor(document: QTextDocument, anchor: int, position: int) -> QTextCursor:
    cursor = QTextCursor(document)
    cursor.setPosition(anchor)
    cursor.setPosition(position, QTextCursor.MoveMode.KeepAnchor)
    return cursor


class MessageDocuments:
    """Renderings and documents by message id; documents are children of ``owner``."""

    def __init__(
        self, owner: QObject, style: MarkdownStyle, font: QFont, thought_font: QFont | None = None
    ) -> None:
        self._owner = owner
        self._html: LruCache[tuple[object, ...], RenderedMarkdown] = LruCache(HTML_CACHE_SIZE)
        self._docs: LruCache[MessageId, RenderedDocument] = LruCache(
            DOC_CACHE_SIZE, lambda old: old.document.deleteLater()
        )
        self._streams: dict[MessageId, StreamingRender] = {}
        # Thinking, as plain text (it is the model talking to itself, often long: no
        # Markdown pass as it streams), with the text each document holds.
        self._thoughts: LruCache[MessageId, tuple[QTextDocument, str]] = LruCache(
            DOC_CACHE_SIZE, lambda old: old[0].deleteLater()
        )
        self._scratch = QTextDocument()  # measuring messages that have no cached document
        self.render_counts: Counter[MessageId] = Counter()  # Markdown renders per message
        self.restyle(style, font, thought_font)

    def restyle(self, style: MarkdownStyle, font: QFont, thought_font: QFont | None = None) -> None:
        """A new style or font: drop everything that baked the old one in."""
        self._renderer = MarkdownRenderer(style)
        self._stylesheet = default_stylesheet(style)
        self._font = font
        self._thought_font = QFont(thought_font or font)
        self._html.clear()
        for entry in self._docs.values():
            entry.document.deleteLater()
        self._docs.clear()
        for document, _text in self._thoughts.values():
            document.deleteLater()
        self._thoughts.clear()
        # Streaming replies start over in the new style when next laid out.
        for message_id, stream in self._streams.items():
            stream.discard()
            self._streams[message_id] = StreamingRender()
        self._configure(self._scratch)

    @property
    def renderer(self) -> MarkdownRenderer:
        """The renderer of the current style (its ``lexed_chars`` say what highlighting cost)."""
        return self._renderer

    def new_document(self) -> QTextDocument:
        doc = QTextDocument(self._owner)
        self._configure(doc)
        return doc

    def _configure(self, doc: QTextDocument) -> None:
        doc.setDefaultFont(self._font)
        doc.setDefaultStyleSheet(self._stylesheet)
        doc.setDocumentMargin(0)
        option = doc.defaultTextOption()
        # Long URLs and hashes in replies must wrap instead of running off the column.
        option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        doc.setDefaultTextOption(option)
        doc.setUndoRedoEnabled(False)

    def rendered(self, data: MessageData) -> RenderedMarkdown:
        key = (data.id, data.role, len(data.text), hash(data.text), hash((data.sources, data.documents_note)))
        hit = self._html.get(key)
        if hit is not None:
            return hit
        if data.role is Role.USER:
            # What the user typed is shown as typed: no Markdown surprises with * or _.
            body = f'<p style="white-space: pre-wrap;">{html.escape(data.text)}</p>'
            rendered = RenderedMarkdown(html=body, code_blocks=())
        elif data.sources or data.documents_note:
            # Grounded in documents: its [n] link to the excerpts, its Sources listed under it.
            given = [source.n for source in data.sources]
            rendered = self._renderer.render(linked_citations(data.text, given))
            extra = sources_html(data.text, data.sources, data.documents_note, self._renderer.style)
            rendered = RenderedMarkdown(html=rendered.html + extra, code_blocks=rendered.code_blocks)
        else:
            rendered = self._renderer.render(data.text)
        self.render_counts[data.id] += 1
        self._html.put(key, rendered)
        return rendered

    def document(self, data: MessageData, width: int | None = None) -> QTextDocument:
        """The message's whole document (cached, LRU), laid out at ``width`` if given."""
        rendered = self.rendered(data)
        entry = self._docs.get(data.id)
        if entry is None:
            entry = RenderedDocument.holding(self.new_document(), rendered)
            self._docs.put(data.id, entry)
        else:
            entry.show(rendered)
        doc = entry.document
        # setTextWidth lays the whole document out again even when unchanged.
        if width is not None and doc.textWidth() != width:
            doc.setTextWidth(width)
        return doc

    def body(self, data: MessageData, width: int | None = None, keep: bool = True) -> list[QTextDocument]:
        """The documents of the message's body, top to bottom, current with its text (none
        for an empty reply). ``keep=False``, for measuring only: a message with no cached
        document is set in a shared scratch one rather than given its own."""
        stream = self._streams.get(data.id)
        if stream is not None:
            if stream.update(data.text, self._renderer, self.new_document):
                self.render_counts[data.id] += 1
            return [segment.document for segment in stream.segments]
        if not data.text and data.role is not Role.USER:
            return []
        if keep or data.id in self._docs:
            return [self.document(data, width)]
        self._scratch.setHtml(self.rendered(data).html)
        return [self._scratch]

    def thought(self, data: MessageData) -> QTextDocument | None:
        """The document of the message's thinking, current with it (None: it has none).
        Thinking that grew is appended to what the document holds, so a streaming thought
        costs the layout of its new lines, not of all of it again."""
        if data.thought is None:
            return None
        text = data.thought.text
        entry = self._thoughts.get(data.id)
        if entry is None:
            doc = QTextDocument(self._owner)
            self._configure(doc)
            doc.setDefaultFont(self._thought_font)
            doc.setPlainText(text)
        else:
            doc, held = entry
            if text.startswith(held):
                if len(text) > len(held):
                    cursor = QTextCursor(doc)
                    cursor.movePosition(QTextCursor.MoveOperation.End)
                    cursor.insertText(text[len(held) :])
            else:
                doc.setPlainText(text)
        self._thoughts.put(data.id, (doc, text))
        return doc

    def code_blocks(self, data: MessageData) -> tuple[str, ...]:
        stream = self._streams.get(data.id)
        if stream is None:
            return self.rendered(data).code_blocks
        self.body(data)
        return stream.code_blocks

    # -- streaming replies ------------------------------------------------------------

    def start_stream(self, message_id: MessageId) -> None:
        """Render the message in pieces from now on (kept if it already is)."""
        self._streams.setdefault(message_id, StreamingRender())

    def streaming(self, message_id: MessageId) -> StreamingRender | None:
        return self._streams.get(message_id)

    def end_stream(self, message_id: MessageId) -> None:
        """A finished reply is rendered whole, once: its pieces go."""
        stream = self._streams.pop(message_id, None)
        if stream is not None:
            stream.discard()

    def end_streams(self) -> None:
        for message_id in list(self._streams):
            self.end_stream(message_id)

    def forget(self, message_id: MessageId) -> None:
        entry = self._docs.pop(message_id)
        if entry is not None:
            entry.document.deleteLater()
        thought = self._thoughts.pop(message_id)
        if thought is not None:
            thought[0].deleteLater()
        self.end_stream(message_id)

    def keep_only(self, live: set[MessageId]) -> None:
        for message_id in {*self._docs, *self._streams, *self._thoughts} - live:
            self.forget(message_id)
