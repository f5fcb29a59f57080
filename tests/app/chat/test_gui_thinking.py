"""A reasoning model's thinking through the window, with scripted tiny models (offscreen):
the thinking shows in its own block above the reply, never in its text, is stored apart
from it, comes back with the history, and is not sent to the model again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import app.conversation.history_builder as history_builder_module
from app.platform.paths import AppPaths
from app.store.history import Thinking
from app.window.main_window import MainWindow
from engine.chat import Role
from engine.devtools.tiny_models import TinyTextSpec, write_tiny_text_model
from engine.machine.hardware import HardwareSnapshot
from tests.app.chat.test_gui_history import record_requests
from tests.conftest import SCRIPT_TEXT
from tests.helpers import last, load, open_window, send

MARKERS = ("<think>", "</think>")
# ChatML that drops the thinking of earlier replies, as Qwen3's template does.
TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n'"
    " + message['content'].split('</think>')[-1] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
# The same, its generation prompt opening the thinking: the output starts inside it.
OPENING_TEMPLATE = TEMPLATE.replace("assistant\\n' }}", "assistant\\n<think>\\n' }}")
# "</think>" spelled in byte and letter tokens: the tag arrives cut across eight tokens.
SPELLED_CLOSE = ("<0x3C>", "<0x2F>", "t", "h", "i", "n", "k", "<0x3E>")


@pytest.fixture(scope="module")
def spelled_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Thinks " ab" between <think> and a spelled-out </think>, then answers "cd":
    11 thinking tokens (<think>, " a", "b", the eight of the closing tag)."""
    spec = TinyTextSpec(
        script=("<think>", "\u2581a", "b", *SPELLED_CLOSE, "c", "d", "<|im_end|>"),
        control_tokens=MARKERS,
        chat_template=TEMPLATE,
    )
    return write_tiny_text_model(tmp_path_factory.mktemp("think") / "spelled.gguf", spec)


@pytest.fixture(scope="module")
def opening_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Its template opens <think>: says " ab</think>cd", 3 thinking tokens."""
    spec = TinyTextSpec(
        script=("\u2581a", "b", "</think>", "c", "d", "<|im_end|>"),
        control_tokens=MARKERS,
        chat_template=OPENING_TEMPLATE,
    )
    return write_tiny_text_model(tmp_path_factory.mktemp("opens") / "opening.gguf", spec)


def reply_shown(window: MainWindow):
    data = last(window, Role.ASSISTANT)
    return data, window.message_view


def test_tags_cut_across_tokens_never_show_and_the_block_counts_the_thinking(
    qtbot, monkeypatch: pytest.MonkeyPatch, window: MainWindow, spelled_model: Path
) -> None:
    load(qtbot, window, spelled_model)
    assert window.session.ready_model.chat_traits.thinks
    began = time.monotonic()
    send(qtbot, window, "hi")
    elapsed = time.monotonic() - began
    data, view = reply_shown(window)
    assert data.text == "cd"  # the answer alone: no tag, no thinking
    assert data.thought is not None and data.thought.text == "ab" and data.thought.tokens == 11
    assert data.thought.seconds is not None and 0.0 <= data.thought.seconds <= elapsed
    assert view.thought_summary(data.id) == data.thought.summary()
    assert view.thought_summary(data.id).startswith("Thought for ")
    assert view.thought_summary(data.id).endswith(" s · 11 tokens")
    assert not view.thought_open(data.id)  # folded: the answer has come

    stored = window.store.get_message(data.id)
    assert stored.text == "cd" and stored.tokens == ()  # ids would spell the thinking too
    assert stored.thinking == Thinking("ab", 11, data.thought.seconds)
    # The next turn sends the answer, not the thinking.
    requests = record_requests(monkeypatch, window)
    send(qtbot, window, "and?")
    sent = [m for m in requests[0].messages if m.role is Role.ASSISTANT]
    assert [(m.text, m.tokens) for m in sent] == [("cd", ())]


def test_thinking_streamed_token_by_token_shows_open_then_folds(
    qtbot, monkeypatch: pytest.MonkeyPatch, window: MainWindow, spelled_model: Path
) -> None:
    monkeypatch.setattr(history_builder_module, "STREAM_TEXT_INTERVAL_S", 0.0)  # one delta per token
    load(qtbot, window, spelled_model)
    view = window.message_view
    seen: list[tuple[str, object]] = []
    update_thought, append_delta = view.update_thought, view.append_delta

    def on_thought(message_id: object, thought) -> None:
        update_thought(message_id, thought)
        seen.append(("thought", (thought, view.thought_open(message_id))))

    def on_answer(message_id: object, text: str) -> None:
        append_delta(message_id, text)
        seen.append(("answer", text))

    monkeypatch.setattr(view, "update_thought", on_thought)
    monkeypatch.setattr(view, "append_delta", on_answer)
    send(qtbot, window, "hi")
    thoughts = [value for kind, value in seen if kind == "thought"]
    assert "".join(value for kind, value in seen if kind == "answer") == "cd"
    # While it thinks the block is open and counts up; it folds when the thinking ends,
    # before the answer's first text.
    active = [(t, shown) for t, shown in thoughts if t.active]
    assert active and all(shown for _t, shown in active)
    assert [t.tokens for t, _shown in active] == sorted(t.tokens for t, _shown in active)
    assert [t.text for t, _shown in active][-1] == "ab"
    ended = [(t, shown) for t, shown in thoughts if not t.active]
    assert ended[0][0].tokens == 11 and ended[0][0].seconds is not None and not ended[0][1]
    assert seen.index(("thought", ended[0])) < seen.index(("answer", "c"))


def test_a_reply_that_opens_inside_its_thinking(qtbot, window: MainWindow, opening_model: Path) -> None:
    load(qtbot, window, opening_model)
    traits = window.session.ready_model.chat_traits
    assert traits.opens_thinking and traits.thinks
    send(qtbot, window, "hi")
    data, view = reply_shown(window)
    assert data.text == "cd"
    assert (data.thought.text, data.thought.tokens) == ("ab", 3)
    assert view.thought_summary(data.id).endswith(" · 3 tokens")


def test_a_model_that_does_not_think_is_shown_as_before(
    qtbot, window: MainWindow, scripted_model: Path
) -> None:
    load(qtbot, window, scripted_model)
    send(qtbot, window, "hi")
    data, view = reply_shown(window)
    assert data.text == SCRIPT_TEXT and data.thought is None
    assert view.thought_summary(data.id) == ""
    stored = window.store.get_message(data.id)
    assert stored.thinking == Thinking() and stored.tokens  # its ids still go back next turn


def test_the_thinking_comes_back_with_the_history(
    qtbot, window: MainWindow, app_paths: AppPaths, hardware: HardwareSnapshot, spelled_model: Path
) -> None:
    load(qtbot, window, spelled_model)
    send(qtbot, window, "hi")
    before = last(window, Role.ASSISTANT)
    window.close()
    again = open_window(qtbot, app_paths, hardware)
    try:
        data = last(again, Role.ASSISTANT)
        assert (data.id, data.text, data.thought) == (before.id, "cd", before.thought)
        view = again.message_view
        assert not view.thought_open(data.id)
        assert view.thought_summary(data.id) == before.thought.summary()
        assert view.thought_summary(data.id).endswith(" s · 11 tokens")
        view.toggle_thought(data.id)
        assert view.thought_open(data.id)
    finally:
        again.close()
