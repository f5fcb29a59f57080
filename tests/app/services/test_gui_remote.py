"""Remote servers through the real widgets: Settings → Remote servers adds a Hearth server
on loopback, the picker lists its model, and a chat with it streams, stops, regenerates,
persists, shows the server's stats, and survives the server being killed mid-reply
(interrupted, then continued once it is back). Wrong keys, unreachable hosts and bad URLs
are one-line messages; the window keeps working."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.api import ServerConfig
from app.chat import MessageState
from app.platform.paths import AppPaths
from app.services.remote_servers import SERVERS_KEY
from app.settings.key_vault import SERVICE, KeyVault
from app.state.remote import ListingState
from app.store.history import MessageState as Stored
from app.store.history import Store
from app.widgets.library_panel import REMOTE_ROLE
from app.widgets.nav_rail import Page
from app.window.main_window import MainWindow
from engine import RemoteEndpoint, RemoteModelInfo
from engine.chat import Role
from engine.devtools.tiny_models import TinyTextSpec, write_tiny_text_model
from engine.machine.hardware import HardwareSnapshot
from tests.api_support import Serve, ServerThread, load
from tests.app.chat.test_gui_thinking import MARKERS, TEMPLATE
from tests.conftest import SCRIPT_TEXT
from tests.helpers import (
    WAIT,
    MemoryKeyring,
    add_and_select,
    click_footer,
    last,
    open_window,
    send,
    set_max_tokens,
)

KEY = "s3cret-remote-key"


@pytest.fixture()
def keyring() -> MemoryKeyring:
    return MemoryKeyring()


@pytest.fixture()
def remote_window(qtbot, app_paths: AppPaths, hardware: HardwareSnapshot, keyring: MemoryKeyring):
    win = open_window(qtbot, app_paths, hardware, keys=KeyVault(keyring))
    yield win
    win.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def add_server(qtbot, window: MainWindow, url: str, key: str = "", name: str = "") -> None:
    """Settings → Remote servers: fill in the form, press Add server, wait for its listing."""
    window.settings_action.trigger()
    page = window.settings_dialog.remote_page
    qtbot.waitExposed(window.settings_dialog)
    page.name_edit.setText(name)
    page.url_edit.setText(url)
    page.key_edit.setText(key)
    qtbot.mouseClick(page.add_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: bool(window.remote_servers.listings())
        and all(x.state is not ListingState.CHECKING for x in window.remote_servers.listings()),
        timeout=WAIT,
    )


def picker_rows(window: MainWindow) -> list[str]:
    """Every row of the library tree, children indented."""
    model = window.library_panel.model
    rows: list[str] = []

    def walk(parent, depth: int) -> None:
        for r in range(model.rowCount(parent)):
            index = model.index(r, 0, parent)
            rows.append("  " * depth + index.data())
            walk(index, depth + 1)

    from PySide6.QtCore import QModelIndex

    walk(QModelIndex(), 0)
    return rows


def use_remote_model(qtbot, window: MainWindow, model_id: str) -> None:
    """In the picker (Models), select the remote model and press Chat with this model."""
    window.show_page(Page.MODELS)
    (listing,) = [x for x in window.remote_servers.listings() if x.models]
    info = next(m for m in listing.models if m.model_id == model_id)
    assert window.library_panel.select_remote(info.key)
    assert window.library_panel.tree.currentIndex().data(REMOTE_ROLE) == info
    assert window.details_stack.currentWidget() is window.remote_panel
    qtbot.mouseClick(window.remote_panel.use_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.session.remote is not None, timeout=WAIT)
    assert window.current_page() is Page.CHATS


def test_settings_add_a_server_and_the_picker_lists_its_model(
    qtbot, remote_window: MainWindow, scripted_server: ServerThread, keyring: MemoryKeyring
) -> None:
    add_server(qtbot, remote_window, scripted_server.base_url, KEY, name="Closet box")
    page = remote_window.settings_dialog.remote_page
    item = page.tree.topLevelItem(0)
    assert (item.text(0), item.text(1), item.text(2)) == ("Closet box", scripted_server.base_url, "1 model")
    assert "system keyring" in page.key_note.text()
    assert picker_rows(remote_window) == ["Closet box — 1 model", "  scripted"]
    # The key went to the keyring, and nowhere in Hearth's own files.
    assert keyring.saved == {(SERVICE, scripted_server.base_url): KEY}
    saved = remote_window.store.get_setting(SERVERS_KEY)
    assert saved == [{"base_url": scripted_server.base_url, "name": "Closet box"}]
    database = remote_window.paths.database_file
    for path in (database, database.with_name(database.name + "-wal")):
        if path.exists():
            assert KEY.encode() not in path.read_bytes()
    use_remote_model(qtbot, remote_window, "scripted")
    where = f"127.0.0.1:{scripted_server.port}"
    header = remote_window.chats_page.header.model
    assert header.full_text() == f"scripted answers, via {where}"
    assert remote_window.badge.label.text() == f"scripted · remote, via {where}"
    assert remote_window.badge.unload_button.text() == "Disconnect"


def test_a_chat_with_a_remote_model_streams_regenerates_and_persists(
    qtbot, remote_window: MainWindow, scripted_server: ServerThread, app_paths: AppPaths,
    hardware: HardwareSnapshot, keyring: MemoryKeyring,
) -> None:  # fmt: skip
    add_server(qtbot, remote_window, scripted_server.base_url)
    use_remote_model(qtbot, remote_window, "scripted")
    set_max_tokens(remote_window, 64)
    send(qtbot, remote_window, "hello")
    reply = last(remote_window, Role.ASSISTANT)
    assert reply.text == SCRIPT_TEXT
    assert reply.state is MessageState.DONE
    where = f"127.0.0.1:{scripted_server.port}"
    assert reply.author == f"scripted · via {where}"
    stats = remote_window.message_view.stats_text(reply.id)
    assert "tok/s" in stats and "to first token" in stats and "prompt tokens" in stats
    assert reply.stats.completion_tokens == 9  # the server's usage

    # Regenerate: a second version, the first a ‹ away.
    click_footer(qtbot, remote_window.message_view, reply.id, "Regenerate")
    qtbot.waitUntil(lambda: remote_window.chat.streaming == 0, timeout=WAIT)
    qtbot.waitUntil(lambda: last(remote_window, Role.ASSISTANT).state is MessageState.DONE, timeout=WAIT)
    again = last(remote_window, Role.ASSISTANT)
    assert (again.text, again.version, again.version_count) == (SCRIPT_TEXT, 2, 2)

    conversation = remote_window.chat.current_id
    remote_window.close()
    # Reopened from the file: the chat, who wrote it and its stats are all there.
    store = Store(app_paths.database_file)
    try:
        stored = store.messages(conversation)
        assert [(m.role, m.state, m.text) for m in stored] == [
            (Role.USER, Stored.COMPLETE, "hello"),
            (Role.ASSISTANT, Stored.COMPLETE, SCRIPT_TEXT),
        ]
        assert stored[1].model.name == "scripted" and stored[1].model.file == scripted_server.base_url
        assert stored[1].stats["completion_tokens"] == 9
        assert stored[1].version_count == 2
    finally:
        store.close()
    # And a new window lists the server again, its key read back from the keyring.
    window = open_window(qtbot, app_paths, hardware, keys=KeyVault(keyring))
    try:
        qtbot.waitUntil(
            lambda: [x.state for x in window.remote_servers.listings()] == [ListingState.ONLINE], timeout=WAIT
        )
        window.chat.select(conversation)
        assert last(window, Role.ASSISTANT).text == SCRIPT_TEXT
    finally:
        window.close()


def test_escape_stops_a_remote_reply(qtbot, remote_window: MainWindow, looping_model: Path) -> None:
    served = load(looping_model, parallel=1)
    try:
        with ServerThread(lambda: served) as server:
            add_server(qtbot, remote_window, server.base_url)
            use_remote_model(qtbot, remote_window, "looping")
            set_max_tokens(remote_window, 100_000)
            send(qtbot, remote_window, "go on forever", wait=False)
            qtbot.waitUntil(lambda: len(last(remote_window, Role.ASSISTANT).text) > 10, timeout=WAIT)
            qtbot.keyClick(remote_window.composer.input, Qt.Key.Key_Escape)
            qtbot.waitUntil(lambda: remote_window.chat.streaming == 0, timeout=WAIT)
            reply = last(remote_window, Role.ASSISTANT)
            assert reply.state is MessageState.CANCELLED
            stored = remote_window.store.messages(remote_window.chat.current_id)[-1]
            assert stored.state is Stored.CANCELLED and stored.text == reply.text
    finally:
        served.unload()


def test_a_server_killed_mid_reply_leaves_it_interrupted_and_continue_goes_on(
    qtbot, remote_window: MainWindow, looping_model: Path
) -> None:
    port = free_port()
    args = (str(looping_model), "--port", str(port), "--ctx", "512", "--parallel", "1")
    serve = Serve(*args)
    try:
        url = serve.address()
        add_server(qtbot, remote_window, url)
        use_remote_model(qtbot, remote_window, "looping")
        set_max_tokens(remote_window, 100_000)
        send(qtbot, remote_window, "go on", wait=False)
        qtbot.waitUntil(lambda: len(last(remote_window, Role.ASSISTANT).text) > 20, timeout=WAIT)
        serve.kill()
        qtbot.waitUntil(lambda: remote_window.chat.streaming == 0, timeout=WAIT)
        reply = last(remote_window, Role.ASSISTANT)
        assert reply.state is MessageState.INTERRUPTED
        message = f"Interrupted: the connection to 127.0.0.1:{port} was lost mid-reply"
        assert remote_window.message_view.status_text(reply.id) == f"{message} — continue or regenerate"
        assert remote_window.status_label.text() == message
        stored = remote_window.store.messages(remote_window.chat.current_id)[-1]
        assert stored.state is Stored.INTERRUPTED and stored.text == reply.text and len(stored.text) > 20

        # Continue while it is still away: refused in one line, the reply kept as it was.
        click_footer(qtbot, remote_window.message_view, reply.id, "Continue")
        qtbot.waitUntil(lambda: remote_window.chat.streaming == 0, timeout=WAIT)
        refused = f"Cannot reach 127.0.0.1:{port}: connection refused."
        assert remote_window.status_label.text() == refused
        still = last(remote_window, Role.ASSISTANT)
        assert (still.id, still.state, still.text) == (reply.id, MessageState.INTERRUPTED, reply.text)
        assert remote_window.message_view.status_text(reply.id) == f"{refused[:-1]} — continue or regenerate"

        # Back on the same port: Continue goes on from the text it had.
        serve = Serve(*args)
        serve.address()
        set_max_tokens(remote_window, 12)
        click_footer(qtbot, remote_window.message_view, reply.id, "Continue")
        qtbot.waitUntil(lambda: remote_window.chat.streaming == 0, timeout=WAIT)
        continued = last(remote_window, Role.ASSISTANT)
        assert continued.id == reply.id and continued.state is MessageState.DONE
        assert continued.text.startswith(reply.text) and len(continued.text) > len(reply.text)
        stored = remote_window.store.messages(remote_window.chat.current_id)[-1]
        assert stored.state is Stored.COMPLETE and stored.text == continued.text
    finally:
        if serve.proc.poll() is None:
            serve.kill()


def test_a_wrong_key_is_one_line_in_the_settings_and_in_the_chat(
    qtbot, remote_window: MainWindow, scripted
) -> None:
    with ServerThread(lambda: scripted, ServerConfig(port=0, api_key=KEY)) as server:
        add_server(qtbot, remote_window, server.base_url, "wrong")
        where = f"127.0.0.1:{server.port}"
        refused = f"{where} refused the API key (401): check the key under Settings → Remote servers."
        (listing,) = remote_window.remote_servers.listings()
        assert listing.state is ListingState.OFFLINE and listing.error == refused
        assert remote_window.settings_dialog.remote_page.tree.topLevelItem(0).text(2) == f"offline: {refused}"
        assert picker_rows(remote_window) == [f"{where} — offline"]
        assert refused in remote_window.library_panel.model.item(0, 0).toolTip()
        # A model chosen while the key was right, asked with a wrong one: the reply fails, in one line.
        wrong = RemoteModelInfo(RemoteEndpoint(server.base_url, "wrong"), "scripted")
        remote_window.use_remote(wrong)
        send(qtbot, remote_window, "hello")
        reply = last(remote_window, Role.ASSISTANT)
        assert reply.state is MessageState.FAILED
        assert remote_window.message_view.status_text(reply.id) == refused
        # The right key, added again: listed, and the chat works.
        add_server(qtbot, remote_window, server.base_url, KEY)
        use_remote_model(qtbot, remote_window, "scripted")
        send(qtbot, remote_window, "hello again")
        assert last(remote_window, Role.ASSISTANT).state is MessageState.DONE


def test_an_unreachable_host_and_a_bad_url_are_shown_and_the_app_goes_on(
    qtbot, remote_window: MainWindow
) -> None:
    port = free_port()
    add_server(qtbot, remote_window, f"127.0.0.1:{port}")
    (listing,) = remote_window.remote_servers.listings()
    assert listing.state is ListingState.OFFLINE
    assert listing.error == f"Cannot reach 127.0.0.1:{port}: connection refused."
    page = remote_window.settings_dialog.remote_page
    page.url_edit.setText("ftp://box/v1")
    qtbot.mouseClick(page.add_button, Qt.MouseButton.LeftButton)
    assert page.error_label.text() == "ftp://box/v1 is not an http:// or https:// address."
    assert len(remote_window.remote_servers.servers()) == 1
    page.tree.setCurrentItem(page.tree.topLevelItem(0))
    qtbot.mouseClick(page.remove_button, Qt.MouseButton.LeftButton)
    assert remote_window.remote_servers.servers() == ()
    assert picker_rows(remote_window) == []


def test_without_a_keyring_the_key_is_kept_for_the_session_only(
    qtbot, app_paths: AppPaths, hardware: HardwareSnapshot, scripted
) -> None:
    window = open_window(qtbot, app_paths, hardware, keys=KeyVault(None))
    try:
        with ServerThread(lambda: scripted, ServerConfig(port=0, api_key=KEY)) as server:
            add_server(qtbot, window, server.base_url, KEY)
            assert "session only" in window.settings_dialog.remote_page.key_note.text()
            assert [x.state for x in window.remote_servers.listings()] == [ListingState.ONLINE]
            assert KEY not in str(window.store.get_setting(SERVERS_KEY))
    finally:
        window.close()


def test_a_remote_reasoning_models_thinking_shows_apart_from_its_answer(
    qtbot, remote_window: MainWindow, tmp_path: Path
) -> None:
    # The server sends the thinking as reasoning_content; the window shows it as it shows
    # a local model's: in its block, never in the reply's text.
    spec = TinyTextSpec(
        script=("<think>", "\u2581a", "b", "</think>", "c", "d", "<|im_end|>"),
        control_tokens=MARKERS,
        chat_template=TEMPLATE,
    )
    served = load(write_tiny_text_model(tmp_path / "thinker.gguf", spec), parallel=1)
    try:
        with ServerThread(lambda: served) as server:
            add_server(qtbot, remote_window, server.base_url)
            use_remote_model(qtbot, remote_window, "thinker")
            send(qtbot, remote_window, "hi")
            reply = last(remote_window, Role.ASSISTANT)
            assert reply.text == "cd" and reply.state is MessageState.DONE
            assert reply.thought is not None and reply.thought.text.strip() == "ab"
            stored = remote_window.store.get_message(reply.id)
            assert stored.text == "cd" and stored.thinking.text.strip() == "ab"
    finally:
        served.unload()


def test_a_listing_arriving_leaves_the_local_model_being_edited_alone(
    qtbot, remote_window: MainWindow, scripted_server: ServerThread, tiny_model: Path
) -> None:
    add_and_select(qtbot, remote_window, tiny_model)
    remote_window.model_panel.ctx_spin.setValue(768)
    add_server(qtbot, remote_window, scripted_server.base_url)
    remote_window.remote_servers.refresh()
    servers = remote_window.remote_servers
    qtbot.waitUntil(lambda: [x.state for x in servers.listings()] == [ListingState.ONLINE], timeout=WAIT)
    assert remote_window.library_panel.selected_path() == tiny_model
    assert remote_window.details_stack.currentWidget() is remote_window.model_panel
    assert remote_window.model_panel.ctx_spin.value() == 768
    assert picker_rows(remote_window)[-2:] == [f"127.0.0.1:{scripted_server.port} — 1 model", "  scripted"]


def test_editing_a_message_to_a_remote_model_branches_as_with_a_local_one(
    qtbot, remote_window: MainWindow, scripted_server: ServerThread
) -> None:
    add_server(qtbot, remote_window, scripted_server.base_url)
    use_remote_model(qtbot, remote_window, "scripted")
    send(qtbot, remote_window, "first question")
    view = remote_window.message_view
    click_footer(qtbot, view, view.messages()[0].id, "Edit")
    remote_window.composer.set_text("a better question")
    qtbot.keyClick(remote_window.composer.input, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: remote_window.chat.streaming == 0 and len(view.messages()) == 2, timeout=WAIT)
    assert [m.text for m in view.messages()] == ["a better question", SCRIPT_TEXT]
    assert view.version_text(view.messages()[0].id) == "2/2"
