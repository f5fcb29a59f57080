"""What the message view's actions do: the signals each emits, copying, links, the text
shown under a message (``MessageViewActions``, a part of ``MessageView``)."""

from __future__ import annotations

from PySide6.QtCore import QRect, QUrl
from PySide6.QtGui import QDesktopServices, QGuiApplication
from PySide6.QtWidgets import QToolTip

from app.chat.citation_links import source_number
from app.chat.data import MessageAction, MessageId, Source
from app.chat.excerpt_dialog import ExcerptDialog
from app.chat.focus_stops import author
from app.chat.markdown import code_block_index
from app.chat.message_documents import MessageDocuments, selection_cursor
from app.chat.message_hits import Selection
from app.chat.message_rows import MessageRows

__all__ = ["MessageViewActions"]


class MessageViewActions:
    """Mixed into ``MessageView`` (which holds the signals and the rows): a click, a key
    or a menu entry ends here."""

    _rows: MessageRows
    _documents: MessageDocuments
    _selection: Selection | None
    excerpt_dialog: ExcerptDialog | None = None  # the excerpt opened last, while it is open

    def available_actions(self, message_id: MessageId) -> tuple[MessageAction, ...]:
        i = self._rows.find(message_id)
        return () if i is None else self._rows.actions(i)

    def trigger_action(self, message_id: MessageId, action: MessageAction) -> None:
        if action not in self.available_actions(message_id):
            return
        if action is MessageAction.COPY:
            data = self.message(message_id)
            assert data is not None  # it has actions
            self._copy(data.text if data.copy_text is None else data.copy_text)
        elif action is MessageAction.EDIT:
            self.edit_requested.emit(message_id)
        elif action is MessageAction.REGENERATE:
            self.regenerate_requested.emit(message_id)
        elif action is MessageAction.CONTINUE:
            self.continue_requested.emit(message_id)
        elif action is MessageAction.DELETE:
            self.delete_requested.emit(message_id)
        elif action is MessageAction.PREVIOUS_VERSION:
            self.version_requested.emit(message_id, -1)
        elif action is MessageAction.NEXT_VERSION:
            self.version_requested.emit(message_id, 1)
        elif action is MessageAction.MORE_PARALLEL:
            self.more_parallel_requested.emit(message_id)

    def version_text(self, message_id: MessageId) -> str:
        """What the version switcher under a message says (``2/3``; "" without one)."""
        row = self._rows.get(message_id)
        return "" if row is None else MessageRows.version_text(row)

    def author(self, message_id: MessageId) -> str:
        """Who the header of a message names: "You", or the model that wrote a reply."""
        row = self._rows.get(message_id)
        return "" if row is None else author(row.data)

    def code_blocks(self, message_id: MessageId) -> tuple[str, ...]:
        self._apply_pending()
        row = self._rows.get(message_id)
        return () if row is None else self._documents.code_blocks(row.data)

    def copy_code_block(self, message_id: MessageId, index: int) -> bool:
        blocks = self.code_blocks(message_id)
        if not 0 <= index < len(blocks):
            return False
        self._copy(blocks[index])
        return True

    def activate_anchor(self, message_id: MessageId, href: str) -> None:
        """What clicking a link in a message does: ``copy:<n>`` copies code block n; a web
        link is announced and opened in the browser; anything else is only announced."""
        index = code_block_index(href)
        if index is not None:
            self.copy_code_block(message_id, index)
            return
        n = source_number(href)
        if n is not None:
            self.open_source(message_id, n)
            return
        self.link_activated.emit(href)
        url = QUrl(href)
        if url.scheme() in ("http", "https"):
            QDesktopServices.openUrl(url)

    def source(self, message_id: MessageId, n: int) -> Source | None:
        """Excerpt ``n`` of the reply's sources (None: it was never given)."""
        row = self._rows.get(message_id)
        return None if row is None else next((s for s in row.data.sources if s.n == n), None)

    def open_source(self, message_id: MessageId, n: int) -> ExcerptDialog | None:
        """Show excerpt ``n`` of a reply in its dialog (a [n] or a Sources line was clicked)."""
        source = self.source(message_id, n)
        if source is None:
            return None
        if self.excerpt_dialog is not None:
            self.excerpt_dialog.close()
            self.excerpt_dialog.deleteLater()
        self.excerpt_dialog = ExcerptDialog(source, self)  # type: ignore[arg-type]
        self.excerpt_dialog.show()
        self.source_activated.emit(message_id, n)
        return self.excerpt_dialog

    def selected_text(self) -> str:
        sel = self._selection
        row = None if sel is None or sel.empty else self._rows.get(sel.row_id)
        if sel is None or row is None:
            return ""
        cursor = selection_cursor(self._document(row), sel.anchor, sel.position)
        # QTextCursor uses U+2029 between paragraphs.
        return cursor.selectedText().replace("\u2029", "\n").replace("\u2028", "\n")

    def status_text(self, message_id: MessageId) -> str:
        """The line under a message that says what is happening to it ("" for none)."""
        row = self._rows.get(message_id)
        return "" if row is None else self._rows.status(row)[0]

    def stats_text(self, message_id: MessageId) -> str:
        row = self._rows.get(message_id)
        return "" if row is None else MessageRows.stats_line(row)

    def _copy(self, text: str) -> None:
        QGuiApplication.clipboard().setText(text)
        self.copied.emit(text)
        if self.isVisible():
            QToolTip.showText(self.cursor().pos(), "Copied", self, QRect(), 1200)
