"""Helpers for the GUI tests: drive the main window the way a user does (offscreen).

The fixtures that build a window (``app_paths``, ``window``) live in tests/app/conftest.py.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QWidget

from app.application import build_window
from app.chat import MessageView
from app.platform.paths import AppPaths
from app.settings.key_vault import KeyVault
from app.state.session import SessionState
from app.window.main_window import MainWindow
from engine.chat import Role
from engine.machine.hardware import HardwareSnapshot

WAIT = 30_000
"""How long (ms) a GUI test waits for the window: a scan, a load, a reply."""


def show_widget(qtbot, widget: QWidget, width: int, height: int, *, exposed: bool = False) -> QWidget:
    """Give ``widget`` to qtbot (closed after the test), size it and show it."""
    qtbot.addWidget(widget)
    widget.resize(width, height)
    widget.show()
    if exposed:
        qtbot.waitExposed(widget)
    return widget


def open_window(
    qtbot, paths: AppPaths, hardware: HardwareSnapshot, keys: KeyVault | None = None
) -> MainWindow:
    """A shown, started main window on ``paths``, once its library scan has finished;
    ``keys``: where remote servers' keys go (the system keyring when None)."""
    window = build_window(paths, hardware=hardware, keys=keys)
    qtbot.addWidget(window)
    window.show()
    window.start()
    qtbot.waitUntil(lambda: not window.library.busy, timeout=WAIT)
    return window


def _mime(*paths: Path) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    return mime


def drag_enter(window: MainWindow, *paths: Path) -> QDragEnterEvent:
    """Drag ``paths`` over the window; the event says whether it would take them."""
    mime = _mime(*paths)  # the event does not own it: keep it alive while the window reads it
    event = QDragEnterEvent(
        window.rect().center(),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    event.setAccepted(False)
    window.dragEnterEvent(event)
    return event


def drop(window: MainWindow, *paths: Path) -> QDropEvent:
    """Drag ``paths`` onto the window (the drag must be accepted) and drop them."""
    assert drag_enter(window, *paths).isAccepted()
    mime = _mime(*paths)
    event = QDropEvent(
        QPointF(window.rect().center()),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    window.dropEvent(event)
    return event


def add_and_select(qtbot, window: MainWindow, *paths: Path, timeout: int = WAIT) -> None:
    """Drop ``paths`` onto the window and wait until the library panel selects the first."""
    drop(window, *paths)
    qtbot.waitUntil(lambda: window.library_panel.selected_path() == paths[0], timeout=timeout)


def load(
    qtbot, window: MainWindow, model: Path, projector: Path | None = None, parallel: int = 4, ctx: int = 1024
) -> None:
    """Drop ``model`` (and ``projector``), load it with ``ctx`` context per conversation, wait until ready."""
    add_and_select(qtbot, window, *(p for p in (model, projector) if p is not None))
    panel = window.model_panel
    panel.ctx_spin.setValue(ctx)
    panel.parallel_spin.setValue(parallel)
    if projector is not None:
        panel.projector_combo.setCurrentIndex(panel.projector_combo.findText(projector.name))
    qtbot.mouseClick(panel.load_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.session.state is SessionState.READY, timeout=WAIT)


def send(qtbot, window: MainWindow, text: str, wait: bool = True) -> None:
    """Type ``text`` and press Enter; with ``wait``, until no reply is streaming."""
    window.composer.set_text(text)
    qtbot.keyClick(window.composer.input, Qt.Key.Key_Return)
    if wait:
        qtbot.waitUntil(lambda: window.chat.streaming == 0, timeout=WAIT)


def last(window: MainWindow, role: Role | None = None):
    """The last message shown (of ``role``, if given)."""
    messages = window.message_view.messages()
    if role is not None:
        messages = [m for m in messages if m.role is role]
    return messages[-1]


def set_max_tokens(window: MainWindow, max_tokens: int) -> None:
    """Set the reply length in the sampling panel, as if the user had changed it."""
    panel = window.sampling_panel
    settings = panel.settings()
    panel.set_settings(type(settings)(**{**settings.to_dict(), "max_tokens": max_tokens}))
    panel.changed.emit(panel.settings())


def footer_point(view: MessageView, message_id: object, text: str) -> QPoint:
    """Viewport coordinates of what the actions line under a message shows as ``text``
    ("Copy", "Regenerate", "‹", "2/3"...), as laid out now."""
    i = view._rows.find(message_id)
    assert i is not None, f"{message_id} is not shown"
    top = view.message_rect(message_id).top()
    for item in view._footer(i):
        if item.text == text:
            return QPoint(view._column_x() + item.rect.center().x(), top + item.rect.center().y())
    raise AssertionError(f"{text!r} not shown under {message_id}")


def click_footer(qtbot, view: MessageView, message_id: object, text: str) -> None:
    """Scroll a message into view and click ``text`` on the actions line under it."""
    view.scroll_to_message(message_id)
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=footer_point(view, message_id, text))


class MemoryKeyring:
    """A system keyring stand-in: the tests never touch the user's own."""

    def __init__(self) -> None:
        self.saved: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.saved.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.saved[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.saved.pop((service, username), None)
