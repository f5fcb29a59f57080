"""What is under the mouse in a laid-out row, and the text the user selects."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QTextDocument

from app.chat.citation_links import source_number
from app.chat.data import MessageAction, MessageData, MessageId
from app.chat.markdown import code_block_index
from app.chat.message_layout import FooterItem, Geometry


@dataclass(frozen=True)
class Hit:
    row: int
    kind: str  # "action", "anchor", "body", "thumb", "stats", "header", "thought", "row"
    action: MessageAction | None = None
    anchor: str = ""
    position: int = -1  # character position in the document, for selection
    thumb: int = -1


@dataclass
class Selection:
    row_id: MessageId
    anchor: int
    position: int

    @property
    def empty(self) -> bool:
        return self.anchor == self.position


def hit_in_row(
    i: int,
    geom: Geometry,
    local: QPoint,
    footer: Sequence[FooterItem],
    documents: Sequence[tuple[QTextDocument, int, int]],
    selectable: bool,
) -> Hit:
    """What row i shows at ``local`` (relative to the row's top-left): ``footer`` is its
    actions line, ``documents`` the body's pieces as (document, top, height)."""
    for item in footer:
        if item.action is not None and item.rect.contains(local):
            return Hit(i, "action", action=item.action)
    if geom.header.contains(local):
        return Hit(i, "header")
    if geom.thought is not None and geom.thought.contains(local):
        return Hit(i, "thought")
    for k, rect in enumerate(geom.thumbs):
        if rect.contains(local):
            return Hit(i, "thumb", thumb=k)
    if geom.stats is not None and geom.stats.contains(local):
        return Hit(i, "stats")
    hit_area = geom.bubble if geom.bubble is not None else geom.body
    if geom.body.height() > 0 and hit_area.contains(local):
        for doc, top, height in documents:
            point = QPointF(local - geom.body.topLeft() - QPoint(0, top))
            # Below this piece, unless it is the last: the point belongs to a later one.
            if point.y() >= height and top + height < geom.body.height():
                continue
            layout = doc.documentLayout()
            anchor = layout.anchorAt(point)
            position = layout.hitTest(point, Qt.HitTestAccuracy.FuzzyHit) if selectable else -1
            if anchor:
                return Hit(i, "anchor", anchor=anchor, position=position)
            return Hit(i, "body", position=position)
    return Hit(i, "row")


def position_in_body(doc: QTextDocument, geom: Geometry, local: QPoint) -> int:
    """Character position at ``local`` (relative to the row) in the row's document,
    clamped to its ends: a drag may leave the body."""
    point = QPointF(local - geom.body.topLeft())
    if point.y() < 0:
        return 0
    if point.y() > geom.body.height():
        return doc.characterCount() - 1
    return max(0, doc.documentLayout().hitTest(point, Qt.HitTestAccuracy.FuzzyHit))


def tooltip(hit: Hit, data: MessageData) -> str:
    if hit.kind == "header":
        return data.author_details
    if hit.kind == "stats" and data.stats is not None:
        return data.stats.details()
    if hit.kind == "thumb":
        return data.images[hit.thumb].name
    if hit.kind == "anchor" and (n := source_number(hit.anchor)) is not None:
        source = next((s for s in data.sources if s.n == n), None)
        return "" if source is None else f"[{n}] {source.label()}"
    if hit.kind == "anchor" and code_block_index(hit.anchor) is None:
        return hit.anchor
    return ""
