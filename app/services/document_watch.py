"""The folders and files of the collections watched: a change (edited, added, removed, renamed)
asks for a rescan of its collection once the folders have been quiet a moment; the index's
incremental run (size and mtime, then SHA-256, then chunk text) does the rest."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import QFileSystemWatcher, QObject, QTimer

if TYPE_CHECKING:
    from engine import CollectionInfo, DocumentInfo

# How long the folders must be quiet after a change before their collection is rescanned: an
# editor's save (temporary file, rename, attributes) or a copy of many files is one rescan.
RESCAN_DELAY_MS = 2000
# Paths watched at most (folders first): inotify's watches are a per-user limit shared with
# every other program.
MAX_WATCHED = 4000


class FolderWatch(QObject):
    """Per collection, the paths to watch; ``rescan(name)`` when one of them changed and then
    nothing more for ``delay_ms``. GUI thread only."""

    def __init__(self, rescan: Callable[[str], None], delay_ms: int = RESCAN_DELAY_MS,
                 parent: QObject | None = None) -> None:  # fmt: skip
        super().__init__(parent)
        self._rescan = rescan
        self.delay_ms = delay_ms
        self.watcher = QFileSystemWatcher(self)
        self.watcher.fileChanged.connect(self._path_changed)
        self.watcher.directoryChanged.connect(self._path_changed)
        self._watched: dict[str, frozenset[str]] = {}
        self._timers: dict[str, QTimer] = {}
        self._stopped = False

    def set_paths(self, name: str, paths: frozenset[str]) -> None:
        """What to watch for ``name`` (empty: the collection is gone)."""
        if self._stopped:
            return
        if paths:
            self._watched[name] = paths
        else:
            self._watched.pop(name, None)
            timer = self._timers.pop(name, None)
            if timer is not None:
                timer.stop()
        wanted: set[str] = set().union(*self._watched.values()) if self._watched else set()
        held = set(self.watcher.files()) | set(self.watcher.directories())
        if held - wanted:
            self.watcher.removePaths(sorted(held - wanted))
        if wanted - held:
            self.watcher.addPaths(sorted(wanted - held))

    def stop(self) -> None:
        self._stopped = True
        for timer in self._timers.values():
            timer.stop()
        paths = self.watcher.files() + self.watcher.directories()
        if paths:
            self.watcher.removePaths(paths)

    def _path_changed(self, path: str) -> None:
        for name, paths in self._watched.items():
            if path in paths:
                self._schedule(name)
        # A file replaced by a rename (how editors save) drops out of the watch: take it back.
        if os.path.exists(path) and path not in self.watcher.files() + self.watcher.directories():
            self.watcher.addPath(path)

    def _schedule(self, name: str) -> None:
        timer = self._timers.get(name)
        if timer is None:
            timer = QTimer(self)
            timer.setSingleShot(True)
            timer.timeout.connect(lambda n=name: self._fire(n))
            self._timers[name] = timer
        timer.start(self.delay_ms)  # restarted by each change: one rescan when quiet

    def _fire(self, name: str) -> None:
        if not self._stopped and name in self._watched:
            self._rescan(name)


def watch_list(info: CollectionInfo, documents: Sequence[DocumentInfo]) -> frozenset[str]:
    """What to watch for a collection: its sources, the folders under them (files added,
    removed or renamed), and its files (edited in place) — folders first, capped."""
    folders: list[str] = []
    files: list[str] = []
    for source in info.sources:
        if source.is_dir():
            folders.append(str(source))
            for root, dirs, _files in os.walk(source):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                folders.extend(os.path.join(root, d) for d in dirs)
                if len(folders) >= MAX_WATCHED:
                    break
        elif source.exists():
            files.append(str(source))
    files.extend(str(d.path) for d in documents if d.path.exists())
    ordered = list(dict.fromkeys(folders + files))
    return frozenset(ordered[:MAX_WATCHED])
