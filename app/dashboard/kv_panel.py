"""Who holds the KV cache: one row per sequence in use, and a bar of the whole cache."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QSizePolicy,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

from app.dashboard.plots import Card, color_for
from engine import EngineStats, SlotState, format_count

STATE_TEXT = {
    "active": "Active",
    "reusable": "Cached",
    "quarantined": "Quarantined",
}
STATE_TIP = {
    "active": "Generating a reply (or reading its prompt) right now.",
    "reusable": "Finished; its prompt and reply stay cached, so the next turn of this "
    "conversation reuses them instead of reading them again.",
    "quarantined": "Held back after a failed batch until it is cleared.",
}
COLUMNS = ("Seq", "Chat", "State", "KV cells", "Cached prefix")  # "Chat", as the window names them
_NAME_COLUMN = 1
_STATE_COLUMN = 2
_CELLS_COLUMN = 3
_PREFIX_COLUMN = 4
_PADDING = 16  # a cell's margins around its text
_FRACTION_ROLE = Qt.ItemDataRole.UserRole + 1
_COLOR_ROLE = Qt.ItemDataRole.UserRole + 2
MAX_VISIBLE_ROWS = 8
NAME_CACHE_S = 5.0

OwnerNames = Callable[[str], str | None]


@dataclass(frozen=True)
class KvRow:
    """One sequence as the panel shows it."""

    sequence_id: int
    owner: str  # the owner id (ChatRequest.owner); for a cached sequence, its last active owner
    name: str  # what people read: the owner's name, else the id
    state: str  # "active", "reusable" or "quarantined"
    cells_used: int
    capacity: int  # cells one sequence may hold (n_ctx_per_sequence)
    reusable_tokens: int

    @property
    def fraction(self) -> float:
        return min(1.0, self.cells_used / self.capacity) if self.capacity else 0.0


def kv_title(stats: EngineStats) -> str:
    """The panel's title: the sequences and their cells, or the one pool they share."""
    n = len(stats.sequences)
    if stats.shared_pool:
        return (
            f"KV cache — one pool of {stats.n_ctx:,} cells, {n} conversations, "
            f"each up to {stats.n_ctx_per_sequence:,}"
        )
    return f"KV cache — {n} sequence{'s' if n != 1 else ''} × {stats.n_ctx_per_sequence:,} cells"


def kv_rows(stats: EngineStats, last_owner: dict[int, str], names: OwnerNames) -> tuple[KvRow, ...]:
    """The rows for ``stats``: every sequence that is not empty, by sequence id.

    The engine names an owner only while its sequence is active; ``last_owner`` (updated
    here) remembers it, so a cached sequence still says whose conversation it holds.
    """
    rows = []
    for seq in sorted(stats.sequences, key=lambda s: s.sequence_id):
        if seq.state is SlotState.EMPTY:
            last_owner.pop(seq.sequence_id, None)
            continue
        if seq.state is SlotState.ACTIVE and seq.owner:
            last_owner[seq.sequence_id] = seq.owner
        owner = seq.owner or (last_owner.get(seq.sequence_id, "") if seq.state is SlotState.REUSABLE else "")
        name = (names(owner) or owner) if owner else "—"
        rows.append(
            KvRow(
                sequence_id=seq.sequence_id,
                owner=owner,
                name=name,
                state=seq.state,
                cells_used=seq.cells_used,
                capacity=stats.n_ctx_per_sequence,
                reusable_tokens=seq.reusable_tokens,
            )
        )
    return tuple(rows)


def names_from(mapping_or_callable: Mapping[str, str] | OwnerNames | None) -> OwnerNames:
    if mapping_or_callable is None:
        return lambda owner: None
    if callable(mapping_or_callable):
        return mapping_or_callable
    mapping = dict(mapping_or_callable)
    return mapping.get


class KvUsageBar(QWidget):
    """The whole cache as one bar: a coloured segment per sequence, the rest free."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._segments: tuple[tuple[int, int], ...] = ()  # (sequence id, cells)
        self._capacity = 0
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_usage(self, segments: tuple[tuple[int, int], ...], capacity: int) -> None:
        if (segments, capacity) != (self._segments, self._capacity):
            self._segments, self._capacity = segments, capacity
            self.update()

    @property
    def used(self) -> int:
        return sum(cells for _, cells in self._segments)

    def text(self) -> str:
        if not self._capacity:
            return "No model loaded"
        percent = 100 * self.used / self._capacity
        return f"{self.used:,} of {self._capacity:,} cells in use ({percent:.0f}%)"

    def sizeHint(self) -> QSize:
        return QSize(300, 42)

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        palette = self.palette()
        painter.setPen(palette.color(QPalette.ColorRole.Text))
        painter.drawText(QRectF(0, 0, self.width(), 18), Qt.AlignmentFlag.AlignVCenter, self.text())
        bar = QRectF(0.5, 22.5, self.width() - 1, 16)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(palette.color(QPalette.ColorRole.Midlight))
        painter.drawRoundedRect(bar, 3, 3)
        if self._capacity:
            x = bar.left()
            for sequence_id, cells in self._segments:
                w = bar.width() * cells / self._capacity
                painter.setBrush(QColor(color_for(sequence_id)))
                painter.drawRect(QRectF(x, bar.top(), max(w, 1.0), bar.height()))
                x += w
        painter.setPen(palette.color(QPalette.ColorRole.Mid))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(bar, 3, 3)
        painter.end()


class _CellsDelegate(QStyledItemDelegate):
    """Paints "used / capacity" over a bar of the sequence's colour."""

    def paint(
        self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        fraction = index.data(_FRACTION_ROLE)
        color = index.data(_COLOR_ROLE)
        if fraction is not None and color:
            rect = QRectF(option.rect).adjusted(2, 4, -2, -4)
            fill = QColor(color)
            fill.setAlpha(70)
            painter.save()
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(fill)
            painter.drawRoundedRect(
                QRectF(rect.left(), rect.top(), rect.width() * fraction, rect.height()), 2, 2
            )
            painter.restore()
        super().paint(painter, option, index)


class _KvTable(QTableWidget):
    """The table, telling the panel its width: the columns it shows depend on it."""

    def __init__(self, on_resize: Callable[[], None]) -> None:
        super().__init__(0, len(COLUMNS))
        self._on_resize = on_resize

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._on_resize()


@dataclass(frozen=True)
class ColumnLayout:
    """Widths of the fixed columns (the conversation takes the rest) and which are shown."""

    seq: int
    state: int
    cells: int
    prefix: int | None  # None: hidden, its numbers in the cells' tooltip


def column_layout(available: int, text_width: Callable[[str], int], capacity: int) -> ColumnLayout:
    """The columns for a table ``available`` pixels wide: all of them when the chat's name
    keeps room, else without the cached prefix, then with a State column that fits
    "Cached" rather than "Quarantined" (rare, and elided)."""
    name_min = text_width("A short title") + _PADDING  # the chat's name stays readable
    seq = text_width(COLUMNS[0]) + _PADDING
    widest_cells = f"{max(capacity, 9999):,}"
    cells = text_width(f"{widest_cells} / {widest_cells}") + _PADDING
    state_wide = text_width("Quarantined") + _PADDING
    state_narrow = max(text_width(t) for t in ("State", "Active", "Cached")) + _PADDING
    prefix = text_width(COLUMNS[_PREFIX_COLUMN]) + _PADDING
    fixed = seq + cells
    if available >= fixed + state_wide + prefix + name_min:
        return ColumnLayout(seq, state_wide, cells, prefix)
    state = state_wide if available >= fixed + state_wide + name_min else state_narrow
    return ColumnLayout(seq, state, cells, None)


class KvPanel(Card):
    """The KV cache card: usage bar, a row per sequence in use, and how many slots are free.

    The table fits its card's width: below ~470 px of dashboard the cached prefix moves
    from its own column into the KV cells' tooltip.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("KV cache", parent)
        self.bar = KvUsageBar()
        self.table = _KvTable(self._fit_columns)
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.table.setShowGrid(False)
        self.table.setAlternatingRowColors(True)
        self.table.setItemDelegateForColumn(_CELLS_COLUMN, _CellsDelegate(self.table))
        # The columns always fit (see column_layout): a scroll bar would only hide the last pixels.
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
        header = self.table.horizontalHeader()
        # Fixed widths from the font, not ResizeToContents: that measures every cell again on
        # each change, which made this table the costliest part of a dashboard tick.
        header.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        header.setSectionResizeMode(_NAME_COLUMN, QHeaderView.ResizeMode.Stretch)
        header.setMinimumSectionSize(24)
        header.setHighlightSections(False)
        self._columns: ColumnLayout | None = None
        self._capacity = 0
        self.table.verticalHeader().setDefaultSectionSize(24)
        self.note = QLabel("No model loaded.")
        self.note.setWordWrap(True)
        self.body.addWidget(self.bar)
        self.body.addWidget(self.table)
        self.body.addWidget(self.note)
        self.body.addStretch(1)
        self._rows: tuple[KvRow, ...] = ()
        self._shown: list[KvRow] = []  # what the table's items say now
        self._last_owner: dict[int, str] = {}
        self._names: OwnerNames = names_from(None)
        # Names looked up recently. The lookup may be a database query (a conversation's
        # title), and stats arrive four times a second; a few seconds old is fresh enough
        # to pick up a renamed conversation.
        self._name_cache: dict[str, str | None] = {}
        self._name_cache_time = 0.0
        self._stats: EngineStats | None = None
        self._fit_table_height()
        self._fit_columns()

    @property
    def rows(self) -> tuple[KvRow, ...]:
        return self._rows

    @property
    def columns(self) -> ColumnLayout | None:
        return self._columns

    def _fit_columns(self) -> None:
        table = self.table
        layout = column_layout(
            table.viewport().width(), table.fontMetrics().horizontalAdvance, self._capacity
        )
        if layout == self._columns:
            return
        self._columns = layout
        header = table.horizontalHeader()
        header.resizeSection(0, layout.seq)
        header.resizeSection(_STATE_COLUMN, layout.state)
        header.resizeSection(_CELLS_COLUMN, layout.cells)
        table.setColumnHidden(_PREFIX_COLUMN, layout.prefix is None)
        if layout.prefix is not None:
            header.resizeSection(_PREFIX_COLUMN, layout.prefix)

    def set_names(self, names: OwnerNames) -> None:
        self._names = names
        self._name_cache.clear()
        if self._stats is not None:
            self.set_stats(self._stats)

    def _cached_name(self, owner: str) -> str | None:
        if owner not in self._name_cache:
            self._name_cache[owner] = self._names(owner)
        return self._name_cache[owner]

    def reset(self) -> None:
        """A different model: forget which conversation held which sequence."""
        self._last_owner.clear()
        self.set_stats(None)

    def set_stats(self, stats: EngineStats | None) -> None:
        self._stats = stats
        if stats is None:
            self._rows = ()
            self.bar.set_usage((), 0)
            self.note.setText("No model loaded.")
            self.set_title("KV cache")
            self._show_rows()
            return
        now = time.monotonic()
        if now - self._name_cache_time > NAME_CACHE_S:
            self._name_cache.clear()
            self._name_cache_time = now
        rows = kv_rows(stats, self._last_owner, self._cached_name)
        if stats.n_ctx_per_sequence != self._capacity:
            self._capacity = stats.n_ctx_per_sequence
            self._fit_columns()  # the cells column is as wide as "capacity / capacity"
        self.set_title(kv_title(stats))
        self.bar.set_usage(tuple((r.sequence_id, r.cells_used) for r in rows), stats.n_ctx)
        free = len(stats.sequences) - len(rows)
        active = sum(r.state is SlotState.ACTIVE for r in rows)
        cached = sum(r.state is SlotState.REUSABLE for r in rows)
        self.note.setText(
            f"{active} active, {cached} cached, {free} free"
            + (f" · {stats.cells_used:,} of {stats.n_ctx:,} cells held" if stats.shared_pool else "")
            + (f" · {stats.evicted_prefixes} cached evicted for room" if stats.evicted_prefixes else "")
            + (f" · {stats.queue_depth} waiting for a sequence" if stats.queue_depth else "")
        )
        if rows != self._rows:
            self._rows = rows
            self._show_rows()

    def _show_rows(self) -> None:
        table = self.table
        rows = self._rows
        if table.rowCount() != len(rows):
            table.setRowCount(len(rows))
            self._shown = self._shown[: len(rows)]
            self._fit_table_height()
        for r, row in enumerate(rows):
            before = self._shown[r] if r < len(self._shown) else None
            if row == before:
                continue
            if before is None:  # items are created once per row and then reused
                for c in range(len(COLUMNS)):
                    item = QTableWidgetItem()
                    if c in (0, _CELLS_COLUMN, 4):
                        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                    table.setItem(r, c, item)
            # Only what changed: every setText/setData makes the view repaint that cell.
            if before is None or before.sequence_id != row.sequence_id:
                item = table.item(r, 0)
                item.setText(str(row.sequence_id))
                item.setForeground(QColor(color_for(row.sequence_id)))
                table.item(r, _CELLS_COLUMN).setData(_COLOR_ROLE, color_for(row.sequence_id))
            if before is None or (before.name, before.owner) != (row.name, row.owner):
                table.item(r, 1).setText(row.name)
                # The whole name, which a narrow column elides, and the owner id behind it.
                tip = row.name if row.owner in ("", row.name) else f"{row.name} ({row.owner})"
                table.item(r, 1).setToolTip(tip)
            if before is None or before.state != row.state:
                table.item(r, 2).setText(STATE_TEXT.get(row.state, row.state))
                table.item(r, 2).setToolTip(STATE_TIP.get(row.state, ""))
            if before is None or (before.cells_used, before.capacity) != (row.cells_used, row.capacity):
                cells = table.item(r, _CELLS_COLUMN)
                cells.setText(f"{row.cells_used:,} / {row.capacity:,}")
                cells.setData(_FRACTION_ROLE, row.fraction)
            if before is None or (before.cells_used, before.reusable_tokens) != (
                row.cells_used,
                row.reusable_tokens,
            ):
                prefix = format_count(row.reusable_tokens) if row.reusable_tokens else "—"
                table.item(r, _PREFIX_COLUMN).setText(prefix)
                # Where a narrow table's hidden prefix column can still be read.
                table.item(r, _CELLS_COLUMN).setToolTip(
                    f"{row.cells_used:,} cells in use; cached prefix: {prefix} tokens"
                )
        self._shown = list(rows)

    def _fit_table_height(self) -> None:
        # Show every row without a scroll bar (up to a limit): the table is a readout.
        rows = min(max(self.table.rowCount(), 1), MAX_VISIBLE_ROWS)
        height = self.table.horizontalHeader().height() + rows * 24 + 2 * self.table.frameWidth() + 2
        self.table.setFixedHeight(height)


__all__ = ["ColumnLayout", "KvPanel", "KvRow", "KvUsageBar", "column_layout", "kv_rows", "names_from"]
