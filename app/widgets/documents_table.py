"""A collection's files as a table model: name, folder, status (a refusal with its one-line
reason), chunks, pages. Reset as a whole when the list changes: cheap at 10,000 rows, where
re-creating table items was not."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QColor

if TYPE_CHECKING:
    from engine import DocumentInfo

COLUMNS = ("Name", "Folder", "Status", "Chunks", "Pages")
REFUSED_COLOUR = QColor("#d62728")
PENDING_COLOUR = QColor("#7f7f7f")
Index = QModelIndex | QPersistentModelIndex


def status_text(doc: DocumentInfo) -> str:
    status = doc.status.value
    if status == "refused":
        return f"refused: {doc.reason}" if doc.reason else "refused"
    return status


class DocumentsTableModel(QAbstractTableModel):
    def __init__(self) -> None:
        super().__init__()
        self._docs: list[DocumentInfo] = []
        self._pages: dict[int, int] = {}

    def set_documents(self, docs: Sequence[DocumentInfo], pages: Mapping[int, int]) -> None:
        self.beginResetModel()
        self._docs = list(docs)
        self._pages = dict(pages)
        self.endResetModel()

    def document(self, row: int) -> DocumentInfo:
        return self._docs[row]

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008 (Qt's signature)
        return 0 if parent.isValid() else len(self._docs)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation is Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        doc = self._docs[index.row()]
        column = index.column()
        status = doc.status.value
        if role == Qt.ItemDataRole.DisplayRole:
            if column == 0:
                return doc.path.name
            if column == 1:
                return str(doc.path.parent)
            if column == 2:
                return status_text(doc)
            if column == 3:
                return str(doc.chunk_count) if status == "indexed" else ""
            pages = self._pages.get(doc.id)
            return str(pages) if pages is not None else ""
        if role == Qt.ItemDataRole.ToolTipRole:
            return str(doc.path) if column < 2 else status_text(doc)
        if role == Qt.ItemDataRole.ForegroundRole and column == 2:
            if status == "refused":
                return REFUSED_COLOUR
            if status == "pending":
                return PENDING_COLOUR
        if role == Qt.ItemDataRole.TextAlignmentRole and column >= 3:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None
