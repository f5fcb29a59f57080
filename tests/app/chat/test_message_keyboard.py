"""Every message action by keyboard: Tab and Shift+Tab walk Copy, Edit, Regenerate,
Continue, Delete and the ‹ 2/2 › arrows message by message, each drawn in a focus ring;
Enter or Space act; the view shows a ring when the keyboard brings the focus to it. And
Continue is offered on the last reply only."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QGuiApplication, QImage
from PySide6.QtWidgets import QLineEdit, QVBoxLayout, QWidget

from app.chat import MessageAction, MessageData, MessageState, MessageView
from app.chat.theme import ChatColors
from engine.chat import Role
from tests.helpers import show_widget

A = MessageAction


@pytest.fixture()
def window(qtbot) -> tuple[QWidget, QLineEdit, MessageView]:
    """A text box, then the view: Tab from the box goes into the view, as in the window."""
    host = QWidget()
    before = QLineEdit()
    view = MessageView()
    layout = QVBoxLayout(host)
    layout.addWidget(before)
    layout.addWidget(view, 1)
    show_widget(qtbot, host, 800, 600, exposed=True)
    view.set_messages(
        [
            MessageData("u1", Role.USER, "What is 2 + 2?"),
            MessageData("a1", Role.ASSISTANT, "It is 4.", version=2, version_count=2),
        ]
    )
    qtbot.waitUntil(lambda: view.measured_rows() == 2)
    before.setFocus()
    qtbot.waitUntil(before.hasFocus)
    return host, before, view


def item_rect(view: MessageView, message_id: str, action: MessageAction) -> QRect:
    """Where an action is drawn, in viewport coordinates."""
    i = view._rows.find(message_id)
    top = view.message_rect(message_id).top()
    item = next(item for item in view._footer(i) if item.action is action)
    return item.rect.translated(view._column_x(), top)


def grab(view: MessageView) -> QImage:
    return view.viewport().grab().toImage()


def differs(a: QImage, b: QImage, rect: QRect) -> bool:
    return any(
        a.pixel(x, y) != b.pixel(x, y)
        for y in range(rect.top(), rect.bottom())
        for x in range(rect.left(), rect.right())
    )


def test_tab_walks_every_action_and_enter_or_space_acts(qtbot, window) -> None:
    _host, before, view = window
    qtbot.keyClick(before, Qt.Key.Key_Tab)
    assert view.hasFocus() and view.has_focus_ring()
    walked = [view.focused_item()]
    for _ in range(5):
        qtbot.keyClick(view, Qt.Key.Key_Tab)
        walked.append(view.focused_item())
    assert walked == [
        ("u1", A.COPY),
        ("u1", A.EDIT),
        ("u1", A.DELETE),
        ("a1", A.PREVIOUS_VERSION),  # the ‹ of ‹ 2/2 › (› leads nowhere: not a stop)
        ("a1", A.COPY),
        ("a1", A.REGENERATE),
    ]
    assert "Regenerate" in view.accessibleDescription()
    with qtbot.waitSignal(view.regenerate_requested) as regenerate:
        qtbot.keyClick(view, Qt.Key.Key_Space)
    assert regenerate.args == ["a1"]
    qtbot.keyClick(view, Qt.Key.Key_Backtab)
    assert view.focused_item() == ("a1", A.COPY)
    qtbot.keyClick(view, Qt.Key.Key_Return)
    assert QGuiApplication.clipboard().text() == "It is 4."
    qtbot.keyClick(view, Qt.Key.Key_Backtab)
    with qtbot.waitSignal(view.version_requested) as version:
        qtbot.keyClick(view, Qt.Key.Key_Enter)
    assert version.args == ["a1", -1]
    qtbot.keyClick(view, Qt.Key.Key_Backtab)
    qtbot.keyClick(view, Qt.Key.Key_Backtab)
    assert view.focused_item() == ("u1", A.EDIT)
    with qtbot.waitSignal(view.edit_requested) as edit:
        qtbot.keyClick(view, Qt.Key.Key_Return)
    assert edit.args == ["u1"]
    # Past the last action, Tab leaves the view (here, round to the text box).
    view.focus_item("a1", A.DELETE)
    with qtbot.waitSignal(view.delete_requested) as delete:
        qtbot.keyClick(view, Qt.Key.Key_Return)
    assert delete.args == ["a1"]
    qtbot.keyClick(view, Qt.Key.Key_Tab)
    assert before.hasFocus() and view.focused_item() is None and not view.has_focus_ring()


def test_the_focused_action_and_the_view_are_drawn_with_a_ring(qtbot, window) -> None:
    _host, before, view = window
    qtbot.keyClick(before, Qt.Key.Key_Tab)
    assert view.focused_item() == ("u1", A.COPY)
    qtbot.wait(20)
    on_copy = grab(view)
    qtbot.keyClick(view, Qt.Key.Key_Tab)  # to Edit
    qtbot.wait(20)
    on_edit = grab(view)
    copy, edit = item_rect(view, "u1", A.COPY), item_rect(view, "u1", A.EDIT)
    assert differs(on_copy, on_edit, copy) and differs(on_copy, on_edit, edit)
    # The ring round the view: its edge is the accent colour while the keyboard is in it.
    accent = ChatColors.from_palette(view.palette()).accent
    middle = on_edit.height() // 2

    def near(color: int) -> bool:
        c = QImage(1, 1, QImage.Format.Format_ARGB32)
        c.setPixel(0, 0, color)
        got = c.pixelColor(0, 0)
        return (
            max(
                abs(got.red() - accent.red()),
                abs(got.green() - accent.green()),
                abs(got.blue() - accent.blue()),
            )
            < 60
        )

    assert near(on_edit.pixel(1, middle)) and near(on_edit.pixel(on_edit.width() - 2, middle))
    before.setFocus()
    qtbot.waitUntil(lambda: not view.hasFocus())
    qtbot.wait(20)
    away = grab(view)
    assert not near(away.pixel(1, middle))
    assert differs(on_edit, away, edit)


def test_a_click_focuses_without_a_ring_until_the_keyboard_is_used(qtbot, window) -> None:
    _host, _before, view = window
    body = view.message_rect("a1")
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=body.center())
    assert view.hasFocus() and not view.has_focus_ring() and view.focused_item() is None
    qtbot.keyClick(view, Qt.Key.Key_Tab)  # starts at the first action on screen
    assert view.has_focus_ring() and view.focused_item() == ("u1", A.COPY)


def test_left_and_right_step_between_actions_without_leaving_the_view(qtbot, window) -> None:
    _host, before, view = window
    qtbot.keyClick(before, Qt.Key.Key_Tab)
    qtbot.keyClick(view, Qt.Key.Key_Right)
    assert view.focused_item() == ("u1", A.EDIT)
    qtbot.keyClick(view, Qt.Key.Key_Left)
    qtbot.keyClick(view, Qt.Key.Key_Left)  # nothing before the first: it stays
    assert view.focused_item() == ("u1", A.COPY) and view.hasFocus()


def test_the_keyboard_stays_on_the_arrow_as_versions_change(qtbot, window) -> None:
    _host, _before, view = window
    view.setFocus(Qt.FocusReason.TabFocusReason)
    assert view.focus_item("a1", A.PREVIOUS_VERSION)
    # What the controller does on ‹: the other version in place of the reply.
    view.replace_from(1, [MessageData("a1-v1", Role.ASSISTANT, "Four.", version=1, version_count=2)])
    assert view.focused_item() == ("a1-v1", A.NEXT_VERSION)  # the ‹ is gone: the › it is
    assert not view.focus_item("a1-v1", A.PREVIOUS_VERSION)


def test_continue_is_offered_on_the_last_reply_only(qtbot) -> None:
    view = show_widget(qtbot, MessageView(), 800, 600)
    interrupted = MessageData("a1", Role.ASSISTANT, "It is", MessageState.INTERRUPTED)
    view.set_messages([MessageData("u1", Role.USER, "What is 2 + 2?"), interrupted])
    assert A.CONTINUE in view.available_actions("a1")
    # The user asked again and that reply was deleted: the old reply is not the last.
    view.set_messages(
        [MessageData("u1", Role.USER, "What is 2 + 2?"), interrupted, MessageData("u2", Role.USER, "Well?")]
    )
    assert A.CONTINUE not in view.available_actions("a1")
    assert A.REGENERATE in view.available_actions("a1")
