"""The window's Local server: the switch serves whatever model is loaded, on the window's
own event loop (qasync); API requests share the engine with the chats and show on the
dashboard as their own sequences; the switch and the port are remembered."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from app.dashboard import kv_rows
from app.platform.paths import AppPaths
from app.services.local_server import LocalServer
from app.state.serving import ServerStatus
from app.store.history import Store
from app.window.main_window import MainWindow
from engine import SlotState
from tests.conftest import SCRIPT_TEXT
from tests.helpers import WAIT, load, open_window, set_max_tokens

GREEDY = {"temperature": 0, "repeat_penalty": 1.0}


@pytest.fixture()
def served(qtbot, qapp, app_paths: AppPaths, hardware):
    """A window on a running qasync loop: ``run(coroutine)`` runs it there, as the app does."""
    import qasync

    loop = qasync.QEventLoop(qapp)
    asyncio.set_event_loop(loop)
    window = open_window(qtbot, app_paths, hardware)
    window.local_server.set_port(0)  # any free port
    yield window, loop.run_until_complete
    window.close()
    loop.run_until_complete(window.local_server.stopped())
    loop.close()
    asyncio.set_event_loop(None)


async def until(condition: Callable[[], bool], what: str, timeout: float = WAIT / 1000) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.02)

    try:
        await asyncio.wait_for(poll(), timeout)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


def client(window: MainWindow):
    import openai

    return openai.OpenAI(base_url=window.local_server.address, api_key="x", max_retries=0, timeout=60)


def test_the_switch_serves_the_loaded_model_and_lists_requests(qtbot, served, scripted_model: Path) -> None:
    window, run = served
    load(qtbot, window, scripted_model)
    # The toolbar's Local server opens the panel: looking does not start the server.
    window.server_action.trigger()
    assert window.server_dock.isVisible() and window.server_action.isChecked()
    assert window.local_server.status is ServerStatus.OFF and not window.server_panel.switch.isChecked()
    assert window.server_action.text() == "Local server"
    window.server_panel.switch.click()

    async def scenario() -> None:
        await until(lambda: window.local_server.status is ServerStatus.ON, "the server")
        reply = await asyncio.to_thread(
            lambda: client(window).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], extra_body=GREEDY
            )
        )
        assert reply.choices[0].message.content == SCRIPT_TEXT
        await until(lambda: window.server_panel.table.rowCount() == 1, "the request's row")

    run(scenario())
    panel = window.server_panel
    assert window.server_action.text() == "Local server · on" and panel.switch.isChecked()
    assert window.server_dock.isVisible()
    assert panel.address.text() == window.local_server.address
    assert panel.address.text().startswith("http://127.0.0.1:") and panel.address.text().endswith("/v1")
    assert "Serving Tiny Llama" in panel.status.text()
    row = [panel.table.item(0, c).text() for c in range(panel.table.columnCount())]
    assert row[1] == "OpenAI/Python"  # the program; the address (always 127.0.0.1 here) in the tooltip
    assert panel.table.item(0, 1).toolTip().startswith("127.0.0.1 · OpenAI/Python")
    assert row[2].endswith("+ 9") and row[4] == "200"
    panel.copy_button.click()
    from PySide6.QtGui import QGuiApplication

    assert QGuiApplication.clipboard().text() == window.local_server.address
    port = window.local_server.bound_port
    assert window.server_button.isVisible() and window.server_button.text() == f"API on port {port}"
    panel.switch.click()  # off, from the panel

    run(until(lambda: window.local_server.status is ServerStatus.OFF, "the server to stop"))
    assert window.server_action.text() == "Local server" and panel.address.text() == ""
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_api_requests_and_chats_share_the_engine(qtbot, served, looping_model: Path) -> None:
    window, run = served
    load(qtbot, window, looping_model, ctx=4096)  # room for the chat to outlast the editor's stream
    model = window.session.ready_model
    window.set_serving(True)
    set_max_tokens(window, 100_000)  # the window's chat runs until stopped
    window.composer.set_text("a chat in the window")
    window.composer.submit()
    conversation = str(window.chat.current_id)
    stop_api = threading.Event()
    api_text: list[str] = []

    def editor() -> None:
        stream = client(window).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "from an editor"}], max_tokens=100_000,
            stream=True, user="editor", extra_body=GREEDY,
        )  # fmt: skip
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                api_text.append(chunk.choices[0].delta.content)
            if stop_api.is_set():
                stream.close()  # the editor goes away mid-stream
                return

    def owners() -> list[str]:
        return sorted(s.owner for s in model.stats().sequences if s.state is SlotState.ACTIVE)

    async def scenario() -> None:
        await until(lambda: window.local_server.status is ServerStatus.ON, "the server")
        thread = threading.Thread(target=editor)
        thread.start()
        await until(lambda: owners() == sorted([conversation, "API · editor"]), "both in the engine", 30)
        rows = kv_rows(model.stats(), {}, window._conversation_title)
        names = {r.name for r in rows if r.state == SlotState.ACTIVE}
        assert "API · editor" in names  # its own sequence on the dashboard, next to the chat
        assert window.store.get_conversation(int(conversation)).title in names
        await until(lambda: len(api_text) >= 3, "the editor's stream")
        stop_api.set()
        await asyncio.to_thread(thread.join, 30)
        await until(lambda: owners() == [conversation], "the editor's sequence to be freed", 10)
        shown = len(window.message_view.messages()[-1].text)
        await until(lambda: len(window.message_view.messages()[-1].text) > shown, "the chat to keep going")
        assert window.chat.streaming == 1
        window.stop_generating()
        await until(lambda: window.chat.streaming == 0, "the chat to stop")

    run(scenario())


def test_the_switch_and_port_are_remembered(tmp_path: Path) -> None:
    store = Store(tmp_path / "hearth.db")
    try:
        server = LocalServer(store, lambda: None)
        assert server.port == 8080 and not server.remembered_on
        server.set_port(9123)
        store.set_setting("server.enabled", True)
        again = LocalServer(store, lambda: None)
        assert again.port == 9123 and again.remembered_on
        store.set_setting("server.port", "nonsense")
        assert LocalServer(store, lambda: None).port == 8080
    finally:
        store.close()


def test_a_window_reopened_serves_again_on_its_port(qtbot, qapp, app_paths: AppPaths, hardware) -> None:
    import qasync

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    loop = qasync.QEventLoop(qapp)
    asyncio.set_event_loop(loop)
    try:
        first = open_window(qtbot, app_paths, hardware)
        first.server_panel.port_spin.setValue(port)
        first.set_serving(True)
        loop.run_until_complete(until(lambda: first.local_server.status is ServerStatus.ON, "the server"))
        first.close()
        loop.run_until_complete(first.local_server.stopped())
        second = open_window(qtbot, app_paths, hardware)
        assert second.server_panel.port_spin.value() == port
        loop.run_until_complete(until(lambda: second.local_server.status is ServerStatus.ON, "it back on"))
        assert second.local_server.address == f"http://127.0.0.1:{port}/v1"
        assert second.server_panel.switch.isChecked()
        second.close()
        loop.run_until_complete(second.local_server.stopped())
    finally:
        loop.close()
        asyncio.set_event_loop(None)


def test_a_port_in_use_says_so_and_switches_off(qtbot, served) -> None:
    window, run = served
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        window.local_server.set_port(port)
        window.set_serving(True)
        run(until(lambda: window.local_server.status is ServerStatus.FAILED, "the failure"))
    message = f"Port {port} is in use on 127.0.0.1: choose another port."
    assert window.server_panel.status.text() == message
    assert window.status_label.text() == message
    assert window.server_action.text() == "Local server" and not window.server_panel.switch.isChecked()
