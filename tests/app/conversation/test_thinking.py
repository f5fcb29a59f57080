"""A reasoning model's thinking kept apart from its answer: the split of a streamed reply
(tokens and time of the thinking), and the message view's block for it, driven with
pytest-qt (offscreen). The window with scripted tiny models is in test_gui_thinking.py."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication

from app.chat import MessageAction, MessageData, MessageState, MessageView, Thought
from app.chat.focus_stops import THOUGHT
from app.conversation.thinking import ReplySplit
from app.store.history import MIGRATIONS, SCHEMA_VERSION, Store, Thinking
from app.store.history import MessageState as StoredState
from engine import ChatTraits, Role
from tests.app.chat.test_chat_widgets import LONG_REPLY, PaintedRects, stream_in_chunks
from tests.helpers import show_widget

OPENS = ChatTraits(opens_thinking=True, thinks=True)
# A reasoning reply token by token, its tags cut across tokens: 10 thinking tokens.
TOKENS = ("<think>", "\n", "Let", " me", " see", ".", "\n</", "thi", "nk", ">\n\n", "It", " is", " 4.")


def feed_all(split: ReplySplit, deltas: list[tuple[str, ...]], times: list[float]) -> tuple[str, str]:
    thought = answer = ""
    for pieces, now in zip(deltas, times, strict=True):
        more_thought, more_answer = split.feed("".join(pieces), pieces, now)
        thought += more_thought
        answer += more_answer
    tail = split.finish(times[-1] + 1)
    return thought + tail[0], answer + tail[1]


# -- the split ------------------------------------------------------------------------


def test_tags_cut_across_tokens_never_reach_the_answer_whatever_the_deltas() -> None:
    """Every way of grouping the tokens into deltas gives the same thinking, answer and count."""
    for cuts in itertools.combinations(range(1, len(TOKENS)), 3):
        bounds = (0, *cuts, len(TOKENS))
        deltas = [TOKENS[a:b] for a, b in itertools.pairwise(bounds)]
        split = ReplySplit(ChatTraits(thinks=True))
        thought, answer = feed_all(split, deltas, [float(k) for k in range(len(deltas))])
        assert (thought, answer) == ("Let me see.", "It is 4."), deltas
        assert (split.thought, split.answer) == (thought, answer)
        assert split.tokens == 10  # <think> through ">\n\n", which closes it
        assert "<" not in answer and "think" not in answer


def test_tags_cut_anywhere_in_the_text_never_show() -> None:
    text = "".join(TOKENS)
    for cuts in itertools.combinations(range(1, len(text)), 3):
        bounds = (0, *cuts, len(text))
        pieces = tuple(text[a:b] for a, b in itertools.pairwise(bounds))
        split = ReplySplit(ChatTraits(thinks=True))
        assert feed_all(split, [pieces], [1.0]) == ("Let me see.", "It is 4."), pieces
        assert 1 <= split.tokens <= 4


def test_the_thinking_time_runs_from_its_first_token_to_its_end() -> None:
    split = ReplySplit(ChatTraits(thinks=True))
    assert split.feed("Hm", ("Hm",), 0.5) == ("", "Hm")  # not thinking: an answer
    assert split.so_far(9.0) == Thinking("", 0, None)

    split = ReplySplit(ChatTraits(thinks=True))
    assert split.feed("  ", (" ", " "), 1.0) == ("", "")  # may still open <think>
    assert split.feed("<think>a", ("<think>", "a"), 1.5) == ("a", "")
    assert split.thinking and split.so_far(2.0).seconds is None  # still thinking
    assert split.feed("b</think>", ("b", "</think>"), 4.7) == ("b", "")
    assert not split.thinking
    assert split.feed("ok", ("ok",), 5.0) == ("", "ok")
    # The two spaces before <think> count with it: 2 + <think>, a, b, </think>.
    assert split.so_far(6.0) == Thinking("ab", 6, pytest.approx(3.2))

    # The first token's own time, when the handle said when it was sampled.
    split = ReplySplit(OPENS)
    split.started(1.2)
    split.feed("a</think>b", ("a", "</think>", "b"), 1.25)
    assert split.so_far(2.0).seconds == pytest.approx(0.05)


def test_the_header_says_what_the_thinking_took() -> None:
    assert Thought("a", 118, 3.2).summary() == "Thought for 3.2 s · 118 tokens"
    assert Thought("a", 1, 0.01).summary() == "Thought for under 0.1 s · 1 token"
    assert Thought("a", 2_345, 75.0).summary() == "Thought for 1 min 15 s · 2,345 tokens"
    assert Thought("a", 42, active=True).summary() == "Thinking… · 42 tokens"
    assert Thought("a", 42).summary() == "Thought · 42 tokens"  # cut off by a crash: time unknown


def test_a_reply_that_opens_inside_its_thinking() -> None:
    split = ReplySplit(OPENS)
    assert split.thinking  # before any token: the prompt opened it
    assert split.feed("x y", ("x", " y"), 2.0) == ("x y", "")
    assert split.feed("</think>\n\nDone", ("</think>", "\n\n", "Done"), 3.0) == ("", "Done")
    assert split.so_far(4.0) == Thinking("x y", 3, 1.0)


def test_a_reply_without_thinking_is_unchanged() -> None:
    split = ReplySplit(None)  # a model without traits (no template): the same rules
    text = "  <thinking> is a word, </think> too\n"
    pieces = ("  <", "thinking", ">", " is a word, </think>", " too", "\n")
    assert feed_all(split, [pieces], [1.0]) == ("", text)
    assert split.so_far(2.0) == Thinking("", 0, None)


def test_thinking_that_never_ends_ends_with_the_reply() -> None:
    split = ReplySplit(OPENS)
    split.feed("a b", ("a", " b"), 1.0)
    assert split.finish(3.5) == ("", "")
    assert split.so_far(4.0) == Thinking("a b", 2, 2.5)


def test_a_continued_reply_goes_on_inside_or_after_its_thinking() -> None:
    # Stopped while thinking: the turn starts inside it again, its time and tokens kept.
    split, prefix = ReplySplit.resuming(ChatTraits(thinks=True), "", Thinking("a b", 4, 1.5), 10.0)
    assert prefix == "<think>\na b" and split.thinking
    split.feed(" c</think>d", (" c", "</think>", "d"), 12.0)
    assert (split.thought, split.answer) == ("a b c", "d")
    assert split.so_far(13.0) == Thinking("a b c", 6, 3.5)
    # Cut off in its answer (the template opened <think>): after the thinking.
    split, prefix = ReplySplit.resuming(OPENS, "It is", Thinking("a", 2, 0.5), 10.0)
    assert prefix == "a\n</think>\n\nIt is" and not split.thinking
    split.feed(" 4.", (" 4.",), 11.0)
    assert split.answer == "It is 4." and split.so_far(12.0) == Thinking("a", 2, 0.5)
    # An answer after an empty thinking the template opened: after that.
    split, prefix = ReplySplit.resuming(OPENS, "Hello", Thinking(), 10.0)
    assert prefix == "\n</think>\n\nHello" and not split.thinking
    split.feed(" you", (" you",), 11.0)
    assert split.answer == "Hello you" and split.thought == ""
    # A reply of a model that does not think goes on as its text.
    split, prefix = ReplySplit.resuming(ChatTraits(), "Hello", Thinking(), 10.0)
    assert prefix == "Hello" and not split.thinking
    split, prefix = ReplySplit.resuming(OPENS, "", Thinking(), 10.0)
    assert prefix == "" and split.thinking  # nothing said yet: it starts over


# -- the view -------------------------------------------------------------------------


def reply(text: str = "", thought: Thought | None = None, state: MessageState = MessageState.DONE):
    return MessageData(2, Role.ASSISTANT, text, state, thought=thought)


@pytest.fixture()
def view(qtbot) -> MessageView:
    widget = show_widget(qtbot, MessageView(), 700, 500)
    widget.set_messages([MessageData(1, Role.USER, "What is 2 + 2?")])
    return widget


def header_point(view: MessageView, message_id: object) -> QPoint:
    view._apply_pending()
    view._scroll.settle()
    i = view._rows.find(message_id)
    row = view._rows[i]
    if row.geom is None:
        view._measure(row, keep=True)
    rect = row.geom.thought
    return QPoint(
        view._column_x() + rect.center().x(), view.message_rect(message_id).top() + rect.center().y()
    )


def settled(qtbot, view: MessageView) -> None:
    view._apply_pending()
    view._scroll.settle()
    qtbot.wait(1)


def test_the_block_is_open_while_thinking_streams_and_folds_when_the_answer_starts(
    qtbot, view: MessageView
) -> None:
    view.append_message(reply(state=MessageState.PENDING))
    view.update_thought(2, Thought("Let me see", 3, active=True))
    settled(qtbot, view)
    assert view.message(2).state is MessageState.STREAMING
    assert view.thought_open(2) and view.thought_summary(2) == "Thinking… · 3 tokens"
    assert view.message(2).text == ""
    open_height = view.message_rect(2).height()

    view.update_thought(2, Thought("Let me see. 2 + 2 is 4.", 118, 3.2))
    view.append_delta(2, "It is **4**.")
    settled(qtbot, view)
    assert not view.thought_open(2)
    assert view.thought_summary(2) == "Thought for 3.2 s · 118 tokens"
    assert view.message(2).text == "It is **4**."  # never the thinking
    view.set_state(
        2, MessageState.DONE, text="It is **4**.", thought=Thought("Let me see. 2 + 2 is 4.", 118, 3.2)
    )
    settled(qtbot, view)
    assert not view.thought_open(2) and view.message_rect(2).height() < open_height + 40

    view.trigger_action(2, MessageAction.COPY)
    assert QGuiApplication.clipboard().text() == "It is **4**."


def test_a_click_or_the_keyboard_opens_and_folds_the_block(qtbot, view: MessageView) -> None:
    thought = Thought("First, the question.\nThen the sum: 4.", 24, 1.25)
    view.append_message(reply("It is 4.", thought))
    settled(qtbot, view)
    folded = view.message_rect(2).height()
    assert not view.thought_open(2) and view.thought_summary(2) == "Thought for 1.2 s · 24 tokens"

    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=header_point(view, 2))
    settled(qtbot, view)
    assert view.thought_open(2)
    assert view.message_rect(2).height() > folded  # the thinking's two lines show
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=header_point(view, 2))
    settled(qtbot, view)
    assert not view.thought_open(2) and view.message_rect(2).height() == folded

    # The click left the keyboard on the header: Enter and Space toggle it.
    assert view.focused_item() == (2, THOUGHT)
    qtbot.keyClick(view, Qt.Key.Key_Return)
    assert view.thought_open(2)
    qtbot.keyClick(view, Qt.Key.Key_Space)
    assert not view.thought_open(2)
    # Tab goes on from the header to the reply's actions, past the last of them to the
    # next widget; Shift+Tab comes back (the view paints its rows: it keeps this focus).
    qtbot.keyClick(view, Qt.Key.Key_Tab)
    assert view.focused_item() == (2, MessageAction.COPY)
    qtbot.keyClick(view, Qt.Key.Key_Backtab)
    assert view.focused_item() == (2, THOUGHT)
    qtbot.keyClick(view, Qt.Key.Key_Enter)
    assert view.thought_open(2)


def test_a_block_the_user_folded_while_thinking_stays_folded(qtbot, view: MessageView) -> None:
    view.append_message(reply(state=MessageState.PENDING))
    view.update_thought(2, Thought("hm", 1, active=True))
    settled(qtbot, view)
    view.toggle_thought(2)
    assert not view.thought_open(2)
    view.update_thought(2, Thought("hm, so", 3, active=True))
    settled(qtbot, view)
    assert not view.thought_open(2)
    view.toggle_thought(2)
    view.set_state(2, MessageState.DONE, text="so", thought=Thought("hm, so", 3, 0.4))
    settled(qtbot, view)
    assert view.thought_open(2)  # opened by the user: still open when done


def test_an_answer_streaming_under_a_folded_thought_repaints_only_its_tail(qtbot) -> None:
    """The partial repaint of a streamed reply holds with a thinking block above it: the
    block and the answer's earlier pieces are not painted again, every changed pixel is."""
    view = show_widget(qtbot, MessageView(), 800, 600, exposed=True)
    view.set_messages([MessageData("r", Role.ASSISTANT, "", MessageState.PENDING)])
    view.update_thought("r", Thought("Plan the code first.", 5, active=True))
    view._scroll.settle_now()
    view.update_thought("r", Thought("Plan the code first.", 5, 0.8))
    text = LONG_REPLY[: LONG_REPLY.index("def total_3")] + "    value"
    for _text in stream_in_chunks(view, "r", text):
        pass
    qtbot.wait(20)
    assert not view.thought_open("r")
    viewport = view.viewport()
    painted = PaintedRects(viewport)
    for chunk in (" = comp", "ute(x", ", y)"):
        rects = painted.after_delta(qtbot, view, "r", chunk)
        geom = view._rows[0].geom
        top = view.message_rect("r").top()
        assert rects and all(r.top() >= top + geom.body.y() + geom.pieces[-1][0] for r in rects)
        assert all(r.top() > top + geom.thought.bottom() for r in rects)  # the block stays
    assert view.message("r").text == text + " = compute(x, y)"


def test_a_reply_without_thinking_has_no_block(qtbot, view: MessageView) -> None:
    view.append_message(reply("Hello"))
    settled(qtbot, view)
    assert view.thought_summary(2) == "" and not view.thought_open(2)
    assert view._rows.get(2).geom.thought is None
    view.toggle_thought(2)  # nothing to toggle
    assert not view.thought_open(2)


# -- the store --------------------------------------------------------------------------


def test_a_version_3_database_is_backed_up_and_gains_thinking(tmp_path: Path) -> None:
    db_path = tmp_path / "hearth.sqlite3"
    # A version-3 database as Hearth 3 left it: its schema made by that code, rows as it wrote them.
    Store(db_path, migrations=MIGRATIONS[:3]).close()
    raw = sqlite3.connect(db_path)
    raw.execute("INSERT INTO conversations (title, created, updated) VALUES ('from version 3', 1.0, 2.0)")
    for position, (role, text) in enumerate((("user", "2 + 2?"), ("assistant", "<think>sum</think>4"))):
        raw.execute(
            "INSERT INTO messages (conversation_id, position, role, text, state, created, updated, parent_id)"
            " VALUES (1, ?, ?, ?, 'complete', 1.0, 1.0, ?)",
            (position, role, text, position or None),
        )
    raw.commit()
    raw.close()
    conversation_id = 1
    with Store(db_path) as store:
        assert store.schema_version == SCHEMA_VERSION
        assert store.backup_path == db_path.with_name("hearth.sqlite3.v3.bak")
        kept = store.messages(conversation_id)[-1]
        # Replies from before keep their text as written: no thinking is made up for them.
        assert (kept.text, kept.thinking) == ("<think>sum</think>4", Thinking())
        new = store.begin_reply(conversation_id)
        assert store.update_reply(new.id, "", Thinking("so far", 2, None))
        assert store.get_message(new.id).thinking == Thinking("so far", 2, None)
        store.finish_reply(new.id, "4", StoredState.COMPLETE, thinking=Thinking("2 + 2 = 4", 7, 0.8))
        resumed = store.resume_reply(new.id)
        assert resumed.thinking == Thinking("2 + 2 = 4", 7, 0.8)  # a continued reply keeps it
    copy = sqlite3.connect(db_path.with_name("hearth.sqlite3.v3.bak"))
    assert copy.execute("PRAGMA user_version").fetchone()[0] == 3
    assert "thinking" not in {row[1] for row in copy.execute("PRAGMA table_info(messages)")}
    copy.close()
