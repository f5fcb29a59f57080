"""Before a message is sent: the context count while typing, the one-click fix for a chat
that outgrew the loaded context, images a text-only model cannot see, errors that do not
outlive their cause; and closing the window while a reply streams."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

from PIL import Image

from app.platform.paths import AppPaths
from app.store.history import MessageState as Stored
from app.store.history import Store
from app.widgets.nav_rail import Page
from app.window.main_window import MainWindow
from engine.chat import Role
from engine.machine.hardware import HardwareSnapshot
from tests.helpers import WAIT, click_footer, load, open_window, send, set_max_tokens

LONG = "lighthouse " * 170  # about 1,500 tokens on the tiny model (9 a word): more than its 1,024


def count(window: MainWindow) -> tuple[int, int]:
    text = window.composer.context_usage_text()  # "1,234 / 4,096 tokens"
    used, limit = text.replace(" tokens", "").replace(",", "").split(" / ")
    return int(used), int(limit)


def test_the_context_count_follows_the_draft(qtbot, window: MainWindow, tiny_model: Path) -> None:
    load(qtbot, window, tiny_model)
    window.new_chat()
    qtbot.waitUntil(lambda: window.composer.context_usage_text() != "", timeout=WAIT)
    empty, limit = count(window)
    assert limit == 1024
    window.composer.set_text("a few more words in the message")
    qtbot.waitUntil(lambda: count(window)[0] > empty, timeout=WAIT)
    assert window.chat.measured_size().fits


def test_a_chat_that_outgrew_the_context_offers_a_reload(qtbot, window: MainWindow, tiny_model: Path) -> None:
    load(qtbot, window, tiny_model)
    window.new_chat()
    window.composer.set_text(LONG)
    notice = window.chats_page.notice
    qtbot.waitUntil(lambda: notice.button.isVisible(), timeout=WAIT)
    used, limit = count(window)
    assert used > limit == 1024
    assert f"{used:,} tokens" in notice.text() and "1,024 per conversation" in notice.text()
    assert notice.button.text() == "Reload with 4,096 tokens"
    # Sending is refused at once, the text given back, nothing written as a failed reply.
    window.composer.submit()
    assert window.composer.text() == LONG.strip()
    assert "1,024 per conversation" in window.composer.error_label.text()
    assert window.chat.current_id is not None
    assert window.store.messages(window.chat.current_id) == []
    notice.button.click()
    qtbot.waitUntil(lambda: window.session.ready_model is not None, timeout=WAIT)
    assert window.session.plan.context_per_conversation == 4096
    # The draft is measured again once the model is ready: it fits now.
    qtbot.waitUntil(lambda: window.composer.context_usage_text().endswith(" / 4,096 tokens"), timeout=WAIT)
    assert not notice.isVisible()
    assert window.composer.error_label.isHidden(), "the refusal went with its cause"


def test_a_chat_longer_than_the_model_can_read_says_so(qtbot, window: MainWindow, tiny_model: Path) -> None:
    load(qtbot, window, tiny_model)
    window.new_chat()
    window.composer.set_text("lighthouse " * 500)  # past the tiny model's 4,096 training context
    notice = window.chats_page.notice
    qtbot.waitUntil(lambda: notice.isVisible(), timeout=WAIT)
    assert "more than it can read (4,096 tokens)" in notice.text()
    assert not notice.button.isVisible()


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (32, 32), (200, 40, 40)).save(out, "PNG")
    return out.getvalue()


def test_a_chat_with_images_goes_on_with_a_text_only_model(
    qtbot, window: MainWindow, tiny_model: Path, tiny_projector: Path, scripted_model: Path
) -> None:
    load(qtbot, window, tiny_model, tiny_projector)
    window.new_chat()
    window.composer.attach_images([("red.png", png())])
    set_max_tokens(window, 4)
    send(qtbot, window, "what colour is this?")
    conversation = window.chat.current_id
    assert window.store.messages(conversation)[0].images
    # The same tiny family pairs with the projector: load it without, as a text-only model.
    window.library.add_paths([scripted_model], select=scripted_model)
    qtbot.waitUntil(lambda: window.library_panel.selected_path() == scripted_model, timeout=WAIT)
    window.model_panel.projector_combo.setCurrentIndex(window.model_panel.projector_combo.findText("none"))
    window.model_panel.load_button.click()
    qtbot.waitUntil(lambda: window.session.ready_model is not None, timeout=WAIT)
    assert window.session.plan.model.path == scripted_model and not window.session.ready_model.has_vision
    window.chat.select(conversation)
    notice = window.chats_page.notice
    qtbot.waitUntil(lambda: "images in this conversation are left out" in notice.text(), timeout=WAIT)
    send(qtbot, window, "hello")
    reply = [m for m in window.store.messages(conversation) if m.role is Role.ASSISTANT][-1]
    assert reply.state is Stored.COMPLETE and reply.text
    assert window.store.messages(conversation)[0].images, "the image stays in the chat"


def test_a_refusal_does_not_outlive_a_new_chat(qtbot, window: MainWindow) -> None:
    window.new_chat()
    window.composer.set_text("is anyone there?")
    window.composer.submit()
    assert window.composer.error_label.isVisible()
    window.new_chat()
    assert window.composer.error_label.isHidden()


def test_closing_mid_reply_saves_it_as_interrupted(
    qtbot, app_paths: AppPaths, hardware: HardwareSnapshot, looping_model: Path, capfd
) -> None:
    window = open_window(qtbot, app_paths, hardware)
    load(qtbot, window, looping_model)
    set_max_tokens(window, 4000)
    send(qtbot, window, "go on and on", wait=False)
    conversation = window.chat.current_id
    qtbot.waitUntil(lambda: window.message_view.messages()[-1].text != "", timeout=WAIT)
    window.close()
    qtbot.wait(300)  # the request's last events arrive after the store closed
    assert "ProgrammingError" not in capfd.readouterr().err
    with Store(app_paths.database_file) as store:
        reply = store.messages(conversation)[-1]
        assert reply.state is Stored.INTERRUPTED and reply.text
    check = sqlite3.connect(app_paths.database_file)
    try:
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        check.close()


def footer_texts(window: MainWindow, message_id: int) -> list[str]:
    view = window.message_view
    i = view._rows.find(message_id)
    assert i is not None
    return [item.text for item in view._footer(i)]


def test_regenerate_is_not_offered_where_it_cannot_fit(qtbot, window: MainWindow, tiny_model: Path) -> None:
    load(qtbot, window, tiny_model)
    set_max_tokens(window, 4)
    send(qtbot, window, "lighthouse " * 75)  # about 680 tokens: fits in 1,024, not in 512
    reply = window.store.messages(window.chat.current_id)[-1]
    assert "Regenerate" in footer_texts(window, reply.id)
    window.show_page(Page.MODELS)
    window.model_panel.ctx_spin.setValue(512)
    window.model_panel.load_button.click()
    qtbot.waitUntil(
        lambda: (
            window.session.ready_model is not None and window.session.plan.context_per_conversation == 512
        ),
        timeout=WAIT,
    )
    click_footer(qtbot, window.message_view, reply.id, "Regenerate")
    qtbot.waitUntil(lambda: window.chat.streaming == 0, timeout=WAIT)
    failed = window.store.messages(window.chat.current_id)[-1]
    assert failed.state is Stored.FAILED and "512 per conversation" in (failed.error or "")
    qtbot.waitUntil(lambda: "Regenerate" not in footer_texts(window, failed.id), timeout=WAIT)
    notice = window.chats_page.notice
    qtbot.waitUntil(lambda: notice.button.isVisible(), timeout=WAIT)
    notice.button.click()  # reload with a context that holds the chat
    qtbot.waitUntil(lambda: window.session.ready_model is not None, timeout=WAIT)
    assert window.session.plan.context_per_conversation > 512
    qtbot.waitUntil(lambda: "Regenerate" in footer_texts(window, failed.id), timeout=WAIT)
