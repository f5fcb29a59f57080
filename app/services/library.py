"""The GUI's handle on the model library: scans run on a worker thread, results come back
as Qt signals in the GUI thread."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from engine import Library, LibraryEntry, ModelInfo, plural


@dataclass(frozen=True)
class LibraryCounts:
    models: int
    projectors: int
    invalid: int

    def describe(self) -> str:
        """The status line: "1 model · 2 projectors · 1 unusable"."""
        text = f"{plural(self.models, 'model')} · {plural(self.projectors, 'projector')}"
        return text + (f" · {self.invalid:,} unusable" if self.invalid else "")


class LibraryController(QObject):
    entries_changed = Signal(object)  # tuple[LibraryEntry, ...]
    scan_finished = Signal()
    busy_changed = Signal(bool)
    select_requested = Signal(object)  # Path of an entry to select after a drop
    _job_done = Signal(object, object)  # (entries, path to select)

    def __init__(
        self,
        state_file: Path,
        default_folders: Iterable[Path] = (),
        parent: QObject | None = None,
        library: Library | None = None,
    ) -> None:
        super().__init__(parent)
        self.library = library or Library(state_file)
        self._default_folders = tuple(default_folders)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hearth-library")
        self._pending = 0
        self._shut_down = False
        self._entries: tuple[LibraryEntry, ...] = self.library.entries
        self._job_done.connect(self._on_job_done)

    # -- reading (GUI thread, from the latest snapshot) ----------------------------------

    def entries(self) -> tuple[LibraryEntry, ...]:
        return self._entries

    def counts(self) -> LibraryCounts:
        models = sum(1 for e in self._entries if e.ok and not e.is_projector)
        projectors = sum(1 for e in self._entries if e.is_projector)
        return LibraryCounts(models, projectors, sum(1 for e in self._entries if not e.ok))

    def projectors_for(self, entry: LibraryEntry) -> tuple[ModelInfo, ...]:
        found = (self.library.get(p) for p in entry.projectors)
        return tuple(e.info for e in found if e is not None and e.info is not None)

    @property
    def busy(self) -> bool:
        return self._pending > 0

    # -- changing (runs on the worker) ----------------------------------------------------

    def rescan(self) -> None:
        def job() -> None:
            for folder in self._default_folders:
                if folder.is_dir() and folder not in self.library.folders:
                    self.library.add_folder(folder)
            self.library.rescan()

        self._run(job)

    def add_paths(self, paths: Iterable[Path], select: Path | None = None) -> None:
        paths = list(paths)

        def job() -> None:
            for path in paths:
                self.library.add(path)

        self._run(job, select)

    def remove(self, path: Path) -> None:
        self._run(lambda: self.library.remove(path))

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Block until queued scans are done (tests and shutdown)."""
        self._pool.submit(lambda: None).result(timeout)

    def shutdown(self) -> None:
        self._shut_down = True
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _run(self, job: Callable[[], object], select: Path | None = None) -> None:
        self._pending += 1
        if self._pending == 1:
            self.busy_changed.emit(True)

        def work() -> None:
            try:
                job()
            finally:
                # Emitted from the worker: Qt queues it into the GUI thread.
                self._job_done.emit(self.library.entries, select)

        self._pool.submit(work)

    def _on_job_done(self, entries: tuple[LibraryEntry, ...], select: Path | None) -> None:
        if self._shut_down:
            # A scan that ended as the window closed: its listeners (the store) may be gone.
            return
        self._pending -= 1
        self._entries = entries
        self.entries_changed.emit(entries)
        if select is not None:
            self.select_requested.emit(select)
        if self._pending == 0:
            self.busy_changed.emit(False)
            self.scan_finished.emit()
