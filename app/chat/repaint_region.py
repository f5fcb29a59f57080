"""What a new layout of a message row changes on screen, as the region to paint again.

Most streamed updates only lengthen the last line of a reply: then only its last piece (and
what is under it) is painted again. One that adds a line to the reply the view follows
scrolls the view by that line: the pixels above the changed piece are moved, not painted
(``MessageView.scrollContentsBy``), and the piece is painted where it lands. Any other
change of height moves rows on screen: the viewport is painted whole.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize

from app.chat.message_layout import Geometry


def changed_region(
    old: Geometry | None, geom: Geometry, top: int, column_x: int, viewport: QSize, follows: bool
) -> QRect | None:
    """The viewport region to paint after the row at ``top`` (on screen) went from ``old``
    to ``geom``; None when rows move and the viewport is painted whole. ``follows``: the
    row is the last one and the view sticks to the bottom."""
    grown = geom.height - old.height if old is not None else 0
    same_shape = (
        old is not None
        and old.width == geom.width
        and bool(geom.pieces)
        and bool(old.pieces)
        and (old.thought, old.thought_body) == (geom.thought, geom.thought_body)
    )
    if old is None or (grown != 0 and not (follows and grown > 0 and same_shape)):
        return None
    if not same_shape:
        return QRect(0, top, viewport.width(), geom.height)
    first = first_changed_piece(geom, old)
    y = geom.body.y() + geom.pieces[first][0]
    if grown:
        # From where the piece is now to where it lands once the view has followed the
        # growth, down: right whether Qt moves the pending region with the scroll or not.
        return QRect(0, top + y - grown, viewport.width(), viewport.height())
    return QRect(column_x - 1, top + y, geom.width + 2, geom.height - y)


def first_changed_piece(geom: Geometry, old: Geometry) -> int:
    """Frozen pieces never change: the first piece that moved, or the last (the tail being
    rendered again)."""
    first = len(geom.pieces) - 1
    for k, (new, before) in enumerate(zip(geom.pieces, old.pieces, strict=False)):
        if new != before:
            return min(first, k)
    return first
