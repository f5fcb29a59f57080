"""The mouse in the message view: what is under it, hovering, selecting text, clicks,
the context menu and tooltips (``MessageViewMouse``, a part of ``MessageView``)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QPoint, Qt
from PySide6.QtGui import QContextMenuEvent, QMouseEvent, QTextCursor
from PySide6.QtWidgets import QMenu, QToolTip

from app.chat.data import MessageAction
from app.chat.focus_stops import THOUGHT, FocusStop
from app.chat.markdown import code_block_index
from app.chat.message_documents import MessageDocuments
from app.chat.message_hits import Hit, Selection, hit_in_row, position_in_body, tooltip
from app.chat.message_rows import MessageRows

__all__ = ["MessageViewMouse"]


class MessageViewMouse:
    """Mixed into ``MessageView``: hit testing with ``message_hits`` on the laid-out rows,
    and the hover and selection state the painting reads."""

    _rows: MessageRows
    _documents: MessageDocuments
    _pressed: Hit | None
    _selection: Selection | None
    _selecting: bool
    _hover_row: int
    _hover_action: tuple[int, MessageAction] | None
    _hover_thought: int
    _focus: FocusStop | None

    def _hit(self, pos: QPoint) -> Hit | None:
        y = pos.y() + self.verticalScrollBar().value()
        if not self._rows or y >= self._rows.total_height():
            return None
        i = self._rows.row_at_y(y)
        row = self._rows[i]
        if row.geom is None:
            return Hit(i, "row")
        local = self._in_row(i, pos)
        # No selection in a reply that is still changing under the mouse.
        selectable = self._documents.streaming(row.data.id) is None
        return hit_in_row(i, row.geom, local, self._footer(i), self._body_documents(row), selectable)

    def _position_in(self, i: int, pos: QPoint) -> int:
        """Character position under ``pos`` in row i's document, clamped to its ends."""
        row = self._rows[i]
        if row.geom is None:
            return 0
        return position_in_body(self._document(row), row.geom, self._in_row(i, pos))

    def _in_row(self, i: int, pos: QPoint) -> QPoint:
        """A viewport point relative to row i's top-left."""
        return pos + QPoint(-self._column_x(), self.verticalScrollBar().value() - self._rows.top(i))

    def mousePressEvent(self, event: QMouseEvent) -> None:
        hit = self._hit(event.position().toPoint())
        self._pressed = hit
        if event.button() == Qt.MouseButton.LeftButton:
            if self._selection is not None:
                self._selection = None
                self.viewport().update()
            if hit is not None and hit.kind in ("body", "anchor") and hit.position >= 0:
                self._selection = Selection(self._rows[hit.row].data.id, hit.position, hit.position)
                self._selecting = True
        event.accept()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        pos = event.position().toPoint()
        if self._selecting and self._selection is not None:
            i = self._rows.find(self._selection.row_id)
            if i is not None:
                self._selection.position = self._position_in(i, pos)
                self._update_row(i)
            return
        hit = self._hit(pos)
        row = -1 if hit is None else hit.row
        action = (hit.row, hit.action) if hit is not None and hit.action is not None else None
        thought = hit.row if hit is not None and hit.kind == "thought" else -1
        if row != self._hover_row or action != self._hover_action or thought != self._hover_thought:
            for old in {self._hover_row, row}:
                if 0 <= old < len(self._rows):
                    self._update_row(old)
            self._hover_row = row
            self._hover_action = action
            self._hover_thought = thought
        if hit is not None and hit.kind in ("action", "anchor", "thumb", "thought"):
            self.viewport().setCursor(Qt.CursorShape.PointingHandCursor)
        elif hit is not None and hit.kind == "body":
            self.viewport().setCursor(Qt.CursorShape.IBeamCursor)
        else:
            self.viewport().unsetCursor()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        self._selecting = False
        pressed, self._pressed = self._pressed, None
        if event.button() != Qt.MouseButton.LeftButton or pressed is None:
            return
        sel = self._selection
        if sel is not None and not sel.empty:
            return  # a drag selected text: not a click
        self._selection = None
        hit = self._hit(event.position().toPoint())
        if hit is None or hit.row != pressed.row or hit.kind != pressed.kind:
            return
        message_id = self._rows[hit.row].data.id
        if hit.kind == "action" and hit.action is pressed.action and hit.action is not None:
            self.trigger_action(message_id, hit.action)
        elif hit.kind == "thought":
            self._focus = (message_id, THOUGHT)
            self.toggle_thought(message_id)
        elif hit.kind == "anchor" and hit.anchor == pressed.anchor:
            self.activate_anchor(message_id, hit.anchor)
        elif hit.kind == "thumb" and hit.thumb == pressed.thumb:
            self.image_activated.emit(message_id, hit.thumb)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        hit = self._hit(event.position().toPoint())
        if hit is None or hit.kind != "body":
            return
        row = self._rows[hit.row]
        cursor = QTextCursor(self._document(row))
        cursor.setPosition(hit.position)
        cursor.select(QTextCursor.SelectionType.WordUnderCursor)
        self._selection = Selection(row.data.id, cursor.anchor(), cursor.position())
        self._update_row(hit.row)

    def leaveEvent(self, event: QEvent) -> None:
        self._hover_thought = -1
        if self._hover_row >= 0:
            old, self._hover_row, self._hover_action = self._hover_row, -1, None
            if old < len(self._rows):
                self._update_row(old)
        super().leaveEvent(event)

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        hit = self._hit(event.pos())
        if hit is None:
            return
        message_id = self._rows[hit.row].data.id
        menu = QMenu(self)
        selected = self.selected_text()
        if selected:
            menu.addAction("Copy selection", lambda: self._copy(selected))
        if hit.kind == "anchor":
            index = code_block_index(hit.anchor)
            if index is not None:
                menu.addAction("Copy code", lambda: self.copy_code_block(message_id, index))
            else:
                href = hit.anchor
                menu.addAction("Copy link address", lambda: self._copy(href))
        thought = self._rows[hit.row].data.thought
        if thought is not None:
            shown = self.thought_open(message_id)
            label = "Hide thinking" if shown else "Show thinking"
            menu.addAction(label, lambda: self.toggle_thought(message_id))
            if thought.text:
                menu.addAction("Copy thinking", lambda: self._copy(thought.text))
        names = {MessageAction.COPY: "Copy message"}
        for action in self._rows.actions(hit.row):
            label = names.get(action, action.value)
            menu.addAction(label, lambda a=action: self.trigger_action(message_id, a))
        if not menu.isEmpty():
            menu.exec(event.globalPos())

    def viewportEvent(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            hit = self._hit(event.pos())  # type: ignore[attr-defined]
            tip = "" if hit is None else tooltip(hit, self._rows[hit.row].data)
            if hit is not None and hit.kind == "thought":
                shown = self.thought_open(self._rows[hit.row].data.id)
                tip = "Hide the thinking" if shown else "Show the thinking"
            if tip:
                QToolTip.showText(event.globalPos(), tip, self.viewport())  # type: ignore[attr-defined]
            else:
                QToolTip.hideText()
            return True
        return super().viewportEvent(event)
