"""The side list of conversations: new, search, rename, delete with undo, live progress.

Each row is drawn and renamed by ``conversation_rows.ConversationDelegate``."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from PySide6.QtCore import (
    QEvent,
    QPoint,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.chat.conversation_rows import ID_ROLE, SUMMARY_ROLE, ConversationDelegate
from app.chat.data import ConversationId, ConversationSummary
from app.chat.undo_bar import UndoBar

SEARCH_DEBOUNCE_MS = 200


class _List(QListWidget):
    delete_pressed = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Delete and self.state() != QAbstractItemView.State.EditingState:
            self.delete_pressed.emit()
            return
        super().keyPressEvent(event)


class ConversationList(QWidget):
    """Conversations, most recent first.

    Searching filters titles at once and emits ``search_changed`` (debounced) so the owner
    can search contents too and answer with ``set_conversations(matches)``. Deleting hides
    the conversation, emits ``delete_requested`` and offers Undo for a few seconds:
    ``undo_delete_requested`` if taken, ``delete_committed`` when the offer ends.
    """

    new_requested = Signal()
    selected = Signal(object)  # conversation id, when the user picks one
    rename_requested = Signal(object, str)  # id, new title
    delete_requested = Signal(object)
    undo_delete_requested = Signal(object)
    delete_committed = Signal(object)  # the undo offer for this id is over
    search_changed = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._all: dict[ConversationId, ConversationSummary] = {}
        self._answer_ids: set[ConversationId] = set()  # content matches for the search
        self._busy: dict[ConversationId, str] = {}
        self._deleted: ConversationSummary | None = None  # waiting for undo
        self._current: ConversationId | None = None
        self._updating = False
        self._now: datetime | None = None
        # Rows keep their places while the pointer is over the list (a reply finishing
        # would move its chat to the top, under a click on its way): the order shown, and
        # whether a reorder waits for the pointer to leave or the selection to change.
        self._pointer_inside = False
        self._mouse_down = False  # a press in the list: a selection it makes is a click
        self._order: list[ConversationId] = []
        self._reorder_pending = False

        self.new_button = QPushButton("New chat")
        self.new_button.setObjectName("newChat")
        self.new_button.setToolTip("Start a new conversation (Ctrl+N)")
        self.new_button.clicked.connect(self.new_requested)
        self.search = QLineEdit()
        self.search.setObjectName("chatSearch")
        self.search.setPlaceholderText("Search chats")
        self.search.setClearButtonEnabled(True)
        self.search.setToolTip("Search titles and messages (Ctrl+K)")
        self.search.textChanged.connect(self._search_edited)
        self.search.installEventFilter(self)

        self.list = _List()
        self.list.setObjectName("conversationList")
        self.list.setItemDelegate(ConversationDelegate(self, self))
        self.list.setFrameShape(QFrame.Shape.NoFrame)
        self.list.setMouseTracking(True)
        self.list.setUniformItemSizes(True)
        self.list.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.list.setEditTriggers(
            QAbstractItemView.EditTrigger.DoubleClicked | QAbstractItemView.EditTrigger.EditKeyPressed
        )
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._context_menu)
        self.list.currentItemChanged.connect(self._current_changed)
        self.list.delete_pressed.connect(self._delete_current)
        self.list.viewport().setAutoFillBackground(False)
        self.list.viewport().installEventFilter(self)

        self.empty_label = QLabel()
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setWordWrap(True)
        self.empty_label.setEnabled(False)

        self.undo_bar = UndoBar()
        self.undo_button = self.undo_bar.button
        self.undo_button.setObjectName("undoDelete")
        self.undo_bar.undo_requested.connect(self._undone)
        self.undo_bar.expired.connect(self._undo_expired)

        top = QHBoxLayout()
        top.setContentsMargins(8, 8, 8, 4)
        top.addWidget(self.search, 1)
        top.addWidget(self.new_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(top)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.empty_label, 1)
        layout.addWidget(self.undo_bar)

        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(SEARCH_DEBOUNCE_MS)
        self._search_timer.timeout.connect(lambda: self.search_changed.emit(self.search_text()))
        self._clock = QTimer(self)  # "5 min ago" must not go stale
        self._clock.setInterval(60_000)
        self._clock.timeout.connect(self.list.viewport().update)
        self._clock.start()
        self._refill()

    # -- public -----------------------------------------------------------------------

    def set_conversations(self, conversations: Iterable[ConversationSummary]) -> None:
        """The conversations to list: all of them, or, while a search is typed, the ones
        that match it (by title or content)."""
        items = [c for c in conversations if self._deleted is None or c.id != self._deleted.id]
        if self.search_text():
            for c in items:
                self._all[c.id] = c
            self._answer_ids = {c.id for c in items}
        else:
            self._all = {c.id: c for c in items}
            self._answer_ids = set()
        self._refill()

    def upsert(self, conversation: ConversationSummary) -> None:
        """Add one conversation or update its title or time (it moves to its place)."""
        self._all[conversation.id] = conversation
        self._refill()

    def remove(self, conversation_id: ConversationId) -> None:
        """Forget a conversation without the undo offer (deleted elsewhere)."""
        self._all.pop(conversation_id, None)
        self._busy.pop(conversation_id, None)
        self._refill()

    def conversations(self) -> tuple[ConversationSummary, ...]:
        return tuple(self._sorted(self._all.values()))

    def set_current(self, conversation_id: ConversationId | None) -> None:
        """Select a conversation without emitting ``selected``."""
        self._current = conversation_id
        self._updating = True
        try:
            item = self._item(conversation_id)
            self.list.setCurrentItem(item)  # None clears
            if item is not None:
                self.list.scrollToItem(item)
        finally:
            self._updating = False

    def current_id(self) -> ConversationId | None:
        return self._current

    def set_busy(self, conversation_id: ConversationId, busy: bool, progress_text: str = "") -> None:
        """Show that a conversation is generating (and how far, e.g. "reading 42%")."""
        if busy:
            self._busy[conversation_id] = progress_text
        else:
            self._busy.pop(conversation_id, None)
        item = self._item(conversation_id)
        if item is not None:
            self.list.update(self.list.indexFromItem(item))

    def busy_text(self, conversation_id: ConversationId) -> str | None:
        return self._busy.get(conversation_id)

    def start_rename(self, conversation_id: ConversationId) -> None:
        item = self._item(conversation_id)
        if item is not None:
            # Edit in place without selecting it: renaming is not opening.
            self.list.scrollToItem(item)
            self.list.editItem(item)

    def rename(self, conversation_id: ConversationId, title: str) -> None:
        """Rename (what the inline editor does): emits ``rename_requested`` when the title
        really changes; an empty title keeps the old one."""
        title = " ".join(title.split())
        old = self._all.get(conversation_id)
        if old is None or not title or title == old.title:
            return
        self._all[conversation_id] = ConversationSummary(old.id, title, old.updated_at, old.preview)
        self._refill()
        self.rename_requested.emit(conversation_id, title)

    def request_delete(self, conversation_id: ConversationId) -> None:
        """Delete (what the menu and the Delete key do): hide it, emit ``delete_requested``
        and offer Undo for a few seconds (``UndoBar``)."""
        summary = self._all.pop(conversation_id, None)
        if summary is None:
            return
        # One undo at a time: the offer for the previous delete ends, which makes it final.
        self.undo_bar.offer(summary, f"Deleted “{summary.title}”")
        self._deleted = summary
        self._busy.pop(conversation_id, None)
        was_current = conversation_id == self._current
        self._refill()
        self.delete_requested.emit(conversation_id)
        if was_current:
            self._current = None

    def undo_delete(self) -> None:
        self.undo_bar.undo()

    def _undone(self, summary: ConversationSummary) -> None:
        self._deleted = None
        self._all[summary.id] = summary
        self._refill()
        self.undo_delete_requested.emit(summary.id)

    def undo_pending(self) -> ConversationId | None:
        return None if self._deleted is None else self._deleted.id

    def focus_search(self) -> None:
        self.search.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.search.selectAll()

    def search_text(self) -> str:
        return self.search.text().strip()

    def visible_ids(self) -> list[ConversationId]:
        return [
            self.list.item(i).data(ID_ROLE)
            for i in range(self.list.count())
            if not self.list.item(i).isHidden()
        ]

    def set_now(self, now: datetime | None) -> None:
        """Freeze "now" for relative times (tests and screenshots); None: the clock."""
        self._now = now
        self.list.viewport().update()

    def now(self) -> datetime:
        return self._now or datetime.now()

    # -- internals --------------------------------------------------------------------

    def _sorted(self, conversations: Iterable[ConversationSummary]) -> list[ConversationSummary]:
        return sorted(conversations, key=lambda c: _sort_key(c.updated_at), reverse=True)

    def _refill(self, reorder: bool = False) -> None:
        """Rebuild the rows from ``_all`` (a few hundred items: cheap), keeping the current
        conversation selected and the scroll position; ``reorder``: sorted even under the
        pointer."""
        scroll = self.list.verticalScrollBar().value()
        self._updating = True
        try:
            self.list.clear()
            for summary in self._display_order(hold=self._pointer_inside and not reorder):
                item = QListWidgetItem(summary.title)
                item.setData(ID_ROLE, summary.id)
                item.setData(SUMMARY_ROLE, summary)
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
                if summary.preview:
                    item.setToolTip(summary.preview)
                self.list.addItem(item)
            self._apply_filter()
            current = self._item(self._current)
            if current is not None:
                self.list.setCurrentItem(current)
        finally:
            self._updating = False
        self.list.verticalScrollBar().setValue(scroll)

    def _display_order(self, hold: bool) -> list[ConversationSummary]:
        """Most recent first; with ``hold`` (the pointer is over the list), the rows shown
        keep their places (new ones go on top) and the move waits (``reorder_pending``)."""
        ordered = self._sorted(self._all.values())
        if hold and self._order:
            place = {cid: k for k, cid in enumerate(self._order)}
            new = [c for c in ordered if c.id not in place]
            kept = sorted((c for c in ordered if c.id in place), key=lambda c: place[c.id])
            shown = new + kept
            self._reorder_pending = [c.id for c in shown] != [c.id for c in ordered]
        else:
            shown = ordered
            self._reorder_pending = False
        self._order = [c.id for c in shown]
        return shown

    def reorder_pending(self) -> bool:
        """Whether a chat waits to move to its place until the pointer leaves the list."""
        return self._reorder_pending

    def _apply_filter(self) -> None:
        query = self.search_text().casefold()
        shown = 0
        for i in range(self.list.count()):
            item = self.list.item(i)
            summary: ConversationSummary = item.data(SUMMARY_ROLE)
            visible = not query or query in summary.title.casefold() or summary.id in self._answer_ids
            item.setHidden(not visible)
            shown += visible
        if shown:
            self.empty_label.hide()
            self.list.show()
        else:
            self.list.hide()
            self.empty_label.setText(
                f"No conversations match “{_short(self.search_text())}”."
                if query
                else "No conversations yet."
            )
            self.empty_label.show()

    def _search_edited(self, _text: str) -> None:
        if not self.search_text():
            self._answer_ids = set()
        self._apply_filter()  # instant: titles only
        self._search_timer.start()  # then contents, by the owner

    def _item(self, conversation_id: ConversationId | None) -> QListWidgetItem | None:
        if conversation_id is None:
            return None
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.data(ID_ROLE) == conversation_id:
                return item
        return None

    def _current_changed(self, current: QListWidgetItem | None, _previous: QListWidgetItem | None) -> None:
        if self._updating or current is None:
            return
        conversation_id = current.data(ID_ROLE)
        if conversation_id != self._current:
            self._current = conversation_id
            self.selected.emit(conversation_id)
            if self._reorder_pending and not self._mouse_down:
                # Moved by the keyboard: the rows may take their places now (a click
                # leaves them until the pointer goes). Not inside the list's own signal.
                QTimer.singleShot(0, self._reorder_now)

    def _reorder_now(self) -> None:
        if self._reorder_pending:
            self._refill(reorder=True)

    def _delete_current(self) -> None:
        item = self.list.currentItem()
        if item is not None:
            self.request_delete(item.data(ID_ROLE))

    def _context_menu(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None:
            return
        conversation_id = item.data(ID_ROLE)
        menu = QMenu(self)
        menu.addAction("Rename", lambda: self.start_rename(conversation_id))
        menu.addAction("Delete", lambda: self.request_delete(conversation_id))
        menu.exec(self.list.viewport().mapToGlobal(pos))

    def _undo_expired(self, summary: ConversationSummary) -> None:
        self._deleted = None
        self.delete_committed.emit(summary.id)

    def eventFilter(self, watched: object, event: QEvent) -> bool:
        if watched is self.list.viewport():
            kind = event.type()
            if kind == QEvent.Type.Enter:
                self._pointer_inside = True
            elif kind == QEvent.Type.MouseButtonPress:
                self._mouse_down = True
            elif kind == QEvent.Type.MouseButtonRelease:
                self._mouse_down = False
            elif kind in (QEvent.Type.Leave, QEvent.Type.Hide):  # hidden: no Leave comes
                self._pointer_inside = False
                if self._reorder_pending:
                    self._refill()
            return False
        # Down arrow from the search box moves into the list; Esc clears the search.
        if watched is self.search and event.type() == QEvent.Type.KeyPress:
            key = event.key()  # type: ignore[attr-defined]
            if key == Qt.Key.Key_Down and self.list.count():
                self.list.setFocus()
                return True
            if key == Qt.Key.Key_Escape and self.search.text():
                self.search.clear()
                return True
        return super().eventFilter(watched, event)  # type: ignore[arg-type]


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _sort_key(when: datetime) -> float:
    # Mixed naive/aware datetimes from different sources must still sort.
    return when.timestamp()
