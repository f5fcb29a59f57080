"""Quitting and launching: Ctrl+Q quits, asking while a reply is generating (the reply is
kept); a second launch on the same data folder brings the first window forward; opening
the Local server panel to look does not start the server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from PySide6.QtCore import QLockFile, Qt, QTimer
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QApplication, QMessageBox

from app.platform.paths import AppPaths
from app.platform.single_instance import InstanceServer, ask_running_to_raise, instance_name
from app.state.serving import ServerStatus
from app.store.history import MessageState as Stored
from app.store.history import Store
from app.window.main_window import MainWindow
from engine.chat import Role
from engine.machine.hardware import HardwareSnapshot
from tests.conftest import REPO
from tests.helpers import WAIT, last, load, open_window, send, set_max_tokens


def answer_question(button_text: str, asked: list[str]) -> None:
    """Press ``button_text`` in the question box once it is up (it runs its own loop)."""

    def press() -> None:
        box = QApplication.activeModalWidget()
        if not isinstance(box, QMessageBox):
            QTimer.singleShot(20, press)
            return
        asked.append(box.text())
        next(b for b in box.buttons() if b.text().replace("&", "") == button_text).click()

    QTimer.singleShot(0, press)


def test_ctrl_q_quits_at_once_when_nothing_is_generating(
    qtbot, app_paths: AppPaths, hardware: HardwareSnapshot
) -> None:
    window = open_window(qtbot, app_paths, hardware)
    assert window.quit_action.shortcut().toString() == "Ctrl+Q"
    qtbot.keyClick(window, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
    assert not window.isVisible()  # closed, with no question


def test_ctrl_q_asks_while_a_reply_generates_and_the_reply_is_kept(
    qtbot, app_paths: AppPaths, hardware: HardwareSnapshot, looping_model: Path
) -> None:
    window = open_window(qtbot, app_paths, hardware)
    load(qtbot, window, looping_model)
    set_max_tokens(window, 100_000)
    send(qtbot, window, "go on forever", wait=False)
    qtbot.waitUntil(lambda: len(last(window, Role.ASSISTANT).text) > 10, timeout=WAIT)
    asked: list[str] = []
    answer_question("Cancel", asked)
    qtbot.keyClick(window, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
    assert asked == ["1 reply is still generating. Quit anyway?"]
    assert window.isVisible() and window.chat.streaming == 1  # stayed, still writing
    conversation = window.chat.current_id
    answer_question("Quit", asked)
    window.quit_action.trigger()
    assert len(asked) == 2 and not window.isVisible()
    store = Store(app_paths.database_file)
    try:
        reply = store.messages(conversation)[-1]
        assert reply.state is Stored.INTERRUPTED and len(reply.text) > 10  # kept: Continue goes on
    finally:
        store.close()


class WindowManagerClose(QCloseEvent):
    """The close event the window manager's close button sends: the platform marks it
    spontaneous, which only a windowing system can; the offscreen one has no close button."""

    def spontaneous(self) -> bool:
        return True


def test_the_close_button_asks_too_while_a_reply_generates(
    qtbot, app_paths: AppPaths, hardware: HardwareSnapshot, looping_model: Path
) -> None:
    window = open_window(qtbot, app_paths, hardware)
    load(qtbot, window, looping_model)
    set_max_tokens(window, 100_000)
    send(qtbot, window, "go on forever", wait=False)
    qtbot.waitUntil(lambda: len(last(window, Role.ASSISTANT).text) > 10, timeout=WAIT)
    asked: list[str] = []
    answer_question("Cancel", asked)
    event = WindowManagerClose()
    window.closeEvent(event)
    assert asked and not event.isAccepted()
    assert window.isVisible() and window.chat.streaming == 1
    conversation = window.chat.current_id
    answer_question("Quit", asked)
    event = WindowManagerClose()
    window.closeEvent(event)
    assert len(asked) == 2 and event.isAccepted()
    store = Store(app_paths.database_file)
    try:
        assert store.messages(conversation)[-1].state is Stored.INTERRUPTED
    finally:
        store.close()
    # A close by the program itself (the session ending) does not ask.
    window.close()
    assert len(asked) == 2 and not window.isVisible()


def test_a_second_launch_brings_the_first_window_forward(
    qtbot, app_paths: AppPaths, hardware: HardwareSnapshot, tmp_path: Path
) -> None:
    window = open_window(qtbot, app_paths, hardware)
    lock = QLockFile(str(app_paths.data_dir / "hearth.lock"))  # as run_gui holds it
    assert lock.tryLock(100)
    instance = InstanceServer(app_paths.data_dir)
    instance.raise_requested.connect(window.bring_forward)
    assert instance.listen()
    try:
        window.showMinimized()
        qtbot.waitUntil(window.isMinimized)
        second = subprocess.Popen(
            [sys.executable, "-m", "app", "--data-dir", str(app_paths.data_dir), "--models-dir",
             str(app_paths.models_dir)],
            cwd=REPO, env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            with qtbot.waitSignal(instance.raise_requested, timeout=WAIT):
                pass
            qtbot.waitUntil(lambda: second.poll() is not None, timeout=WAIT)
        finally:
            if second.poll() is None:
                second.kill()
        out, err = second.communicate()
        assert second.returncode == 0, err
        assert "already running" in out and "brought forward" in out
        assert not window.isMinimized() and window.isVisible()
    finally:
        instance.close()
        lock.unlock()
        window.close()


def test_no_running_hearth_means_no_one_to_ask(tmp_path: Path) -> None:
    assert not ask_running_to_raise(tmp_path / "nobody-here", timeout_ms=200)
    assert instance_name(tmp_path / "a") != instance_name(tmp_path / "b")
    assert instance_name(tmp_path / "a") == instance_name(tmp_path / "x" / ".." / "a")


def test_opening_the_local_server_panel_does_not_start_the_server(window: MainWindow) -> None:
    window.server_action.trigger()
    assert window.server_dock.isVisible()
    assert window.local_server.status is ServerStatus.OFF
    assert not window.server_panel.switch.isChecked()
    assert "Off" in window.server_panel.status.text()
    with socket.socket() as probe:  # nothing listens on the server's port
        assert probe.connect_ex(("127.0.0.1", window.local_server.port)) != 0
    window.server_action.trigger()  # and it closes the same way
    assert not window.server_dock.isVisible()
    assert window.local_server.status is ServerStatus.OFF
