"""One Hearth per data folder, and a second launch that brings the first one's window
forward instead of only saying it runs: the first listens on a local socket named for its
data folder; the second, refused by the folder's lock, asks it to show itself and exits."""

from __future__ import annotations

import hashlib
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

RAISE = b"raise\n"
CONNECT_TIMEOUT_MS = 1000


def instance_name(data_dir: Path) -> str:
    """The socket's name: one per data folder (the same folder by any spelling of its path)."""
    digest = hashlib.sha256(str(data_dir.expanduser().resolve()).encode()).hexdigest()[:16]
    return f"hearth-{digest}"


class InstanceServer(QObject):
    """The running Hearth's end: ``raise_requested`` when a second launch asks."""

    raise_requested = Signal()

    def __init__(self, data_dir: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = instance_name(data_dir)
        self._server = QLocalServer(self)
        self._server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        self._server.newConnection.connect(self._on_connection)

    def listen(self) -> bool:
        """Start listening (the caller holds the data folder's lock, so a socket left by a
        Hearth that crashed is stale and removed first)."""
        QLocalServer.removeServer(self.name)
        return self._server.listen(self.name)

    def close(self) -> None:
        self._server.close()

    def _on_connection(self) -> None:
        while self._server.hasPendingConnections():
            socket = self._server.nextPendingConnection()
            socket.readyRead.connect(lambda s=socket: self._read(s))
            socket.disconnected.connect(socket.deleteLater)
            if socket.bytesAvailable():
                self._read(socket)

    def _read(self, socket: QLocalSocket) -> None:
        if bytes(socket.readAll().data()).startswith(RAISE.strip()):
            self.raise_requested.emit()
        socket.disconnectFromServer()


def ask_running_to_raise(data_dir: Path, timeout_ms: int = CONNECT_TIMEOUT_MS) -> bool:
    """From a second launch: ask the Hearth running on ``data_dir`` to bring its window
    forward. False when none answers (one that is starting, or hung)."""
    socket = QLocalSocket()
    socket.connectToServer(instance_name(data_dir))
    if not socket.waitForConnected(timeout_ms):
        return False
    socket.write(RAISE)
    written = socket.waitForBytesWritten(timeout_ms)
    socket.disconnectFromServer()
    if socket.state() != QLocalSocket.LocalSocketState.UnconnectedState:
        socket.waitForDisconnected(timeout_ms)
    return written
