"""The chat list keeps its rows still under the pointer (a chat whose reply finished
moves up once the pointer leaves, or when the keyboard changes the selection), and the
undo bar's text is cut to its width with the whole of it in the tooltip."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QEnterEvent
from PySide6.QtWidgets import QApplication

from app.chat import ConversationList, ConversationSummary
from tests.helpers import show_widget

NOW = datetime(2025, 6, 12, 15, 0)


@pytest.fixture()
def conversations(qtbot) -> ConversationList:
    widget = show_widget(qtbot, ConversationList(), 260, 500)
    widget.set_now(NOW)
    widget.set_conversations(
        [
            ConversationSummary("a", "Python sorting", NOW - timedelta(minutes=5)),
            ConversationSummary("b", "Trip to Lisbon", NOW - timedelta(hours=2)),
            ConversationSummary("c", "Pytest fixtures", NOW - timedelta(days=3)),
        ]
    )
    return widget


def pointer_enters(widget: ConversationList) -> None:
    viewport = widget.list.viewport()
    inside = QPointF(20, 20)
    QApplication.sendEvent(viewport, QEnterEvent(inside, inside, viewport.mapToGlobal(inside)))


def pointer_leaves(widget: ConversationList) -> None:
    QApplication.sendEvent(widget.list.viewport(), QEvent(QEvent.Type.Leave))


def shown_order(widget: ConversationList) -> list[str]:
    return [widget.list.item(i).data(Qt.ItemDataRole.UserRole) for i in range(widget.list.count())]


def finished(widget: ConversationList, conversation_id: str, title: str) -> None:
    """What the owner does when a reply in that chat finishes: it is the newest now."""
    widget.upsert(ConversationSummary(conversation_id, title, NOW))


def test_a_finished_reply_does_not_move_its_chat_under_the_pointer(qtbot, conversations) -> None:
    pointer_enters(conversations)
    finished(conversations, "c", "Pytest fixtures")
    assert shown_order(conversations) == ["a", "b", "c"]  # the rows stay where they were
    assert conversations.reorder_pending()
    # A click lands on the chat that was under the pointer.
    rect = conversations.list.visualItemRect(conversations.list.item(1))
    with qtbot.waitSignal(conversations.selected) as selected:
        qtbot.mouseClick(conversations.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert selected.args == ["b"]
    qtbot.wait(20)
    assert shown_order(conversations) == ["a", "b", "c"]  # the click did not reorder either
    # The pointer goes: the chat takes its place at the top, the selection stays on b.
    pointer_leaves(conversations)
    assert shown_order(conversations) == ["c", "a", "b"]
    assert not conversations.reorder_pending()
    assert conversations.list.currentItem().data(Qt.ItemDataRole.UserRole) == "b"


def test_away_from_the_list_a_chat_moves_up_at_once(conversations) -> None:
    finished(conversations, "b", "Trip to Lisbon")
    assert shown_order(conversations) == ["b", "a", "c"]
    assert not conversations.reorder_pending()


def test_a_keyboard_change_of_selection_applies_the_pending_move(qtbot, conversations) -> None:
    conversations.set_current("a")
    pointer_enters(conversations)
    finished(conversations, "c", "Pytest fixtures")
    assert shown_order(conversations) == ["a", "b", "c"]
    conversations.list.setFocus()
    with qtbot.waitSignal(conversations.selected) as selected:
        qtbot.keyClick(conversations.list, Qt.Key.Key_Down)
    assert selected.args == ["b"]
    qtbot.waitUntil(lambda: shown_order(conversations) == ["c", "a", "b"])
    assert conversations.list.currentItem().data(Qt.ItemDataRole.UserRole) == "b"


def test_a_hidden_list_does_not_hold_the_move(qtbot, conversations) -> None:
    pointer_enters(conversations)
    finished(conversations, "c", "Pytest fixtures")
    assert shown_order(conversations) == ["a", "b", "c"]
    conversations.hide()  # another page, chosen by the keyboard: no Leave comes
    assert shown_order(conversations) == ["c", "a", "b"]
    finished(conversations, "b", "Trip to Lisbon")
    assert shown_order(conversations) == ["b", "c", "a"]


def test_new_chats_appear_on_top_even_under_the_pointer(conversations) -> None:
    pointer_enters(conversations)
    conversations.upsert(ConversationSummary("d", "New chat", NOW))
    assert shown_order(conversations) == ["d", "a", "b", "c"]
    conversations.remove("b")
    assert shown_order(conversations) == ["d", "a", "c"]


def test_the_undo_bar_cuts_a_long_title_and_keeps_it_whole_in_the_tooltip(qtbot, conversations) -> None:
    title = "A very long conversation title about planning a trip to Lisbon and Porto in June"
    conversations.upsert(ConversationSummary("e", title, NOW))
    conversations.request_delete("e")
    bar = conversations.undo_bar
    qtbot.waitUntil(lambda: bar.label.width() > 0)
    assert bar.text() == f"Deleted “{title}”"
    shown = bar.label.text()
    assert "…" in shown and shown != bar.text()
    assert bar.label.fontMetrics().horizontalAdvance(shown) <= bar.label.width()
    assert bar.label.toolTip() == bar.text()
    # The Undo button is whole and inside the bar.
    button = conversations.undo_button
    assert button.isVisibleTo(conversations)
    assert bar.rect().contains(button.geometry())
    assert button.width() >= button.sizeHint().width()
    # Wider, the whole text fits: no "…" and no tooltip needed.
    conversations.resize(900, 500)
    qtbot.waitUntil(lambda: bar.label.text() == bar.text())
    assert bar.label.toolTip() == ""
