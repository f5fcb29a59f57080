"""An indexing run's counts and clocks, and the progress events and the report made of them.

The rate is chunks embedded per second of work (parsing and writing included, pauses left
out); the time left is by bytes, since the files still to do are known by their size and not
yet by their chunks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from engine.documents.index_types import IndexPhase, IndexProgress, IndexReport

Progress = Callable[[IndexProgress], None]


@dataclass
class RunMeter:
    collection: str
    indexed: int = 0
    unchanged: int = 0
    touched: int = 0
    moved: int = 0
    removed: int = 0
    refused: int = 0
    embedded: int = 0
    reused: int = 0
    stored: int = 0
    embed_seconds: float = 0.0
    work_seconds: float = 0.0
    paused_seconds: float = 0.0
    files_total: int = 0
    files_done: int = 0
    bytes_todo: int = 0
    bytes_done: int = 0
    current: Path | None = None
    started: float = field(default_factory=time.monotonic)
    _file_began: float | None = None
    _file_paused: float = 0.0

    def begin_file(self, path: Path) -> None:
        self.current = path
        self._file_began, self._file_paused = time.monotonic(), self.paused_seconds

    def end_file(self, size: int | None, done: bool) -> None:
        self.work_seconds += self._file_seconds()
        self._file_began = None
        if done:
            self.bytes_done += size or 0
            self.files_done += 1

    def _file_seconds(self) -> float:
        """Time spent on the current file, its pauses left out."""
        if self._file_began is None:
            return 0.0
        return time.monotonic() - self._file_began - (self.paused_seconds - self._file_paused)

    def progress(self, phase: IndexPhase, file_chunks: int = 0) -> IndexProgress:
        """The event for now; ``file_chunks``: embedded so far of the file in progress."""
        work = self.work_seconds + self._file_seconds()
        left = None
        if phase is IndexPhase.DONE:
            left = 0.0
        elif self.bytes_done > 0 and self.work_seconds > 0:
            left = max(0.0, (self.bytes_todo - self.bytes_done) * self.work_seconds / self.bytes_done)
        return IndexProgress(
            phase=phase,
            files_done=self.files_done,
            files_total=self.files_total,
            chunks_done=self.stored + file_chunks,
            chunks_per_s=self.embedded / work if work > 0 else 0.0,
            seconds_left=left,
            current=self.current,
        )

    def report(self, files: int, cancelled: bool) -> IndexReport:
        return IndexReport(
            collection=self.collection,
            files=files,
            indexed=self.indexed,
            unchanged=self.unchanged,
            touched=self.touched,
            moved=self.moved,
            removed=self.removed,
            refused=self.refused,
            chunks_embedded=self.embedded,
            chunks_reused=self.reused,
            cancelled=cancelled,
            seconds=time.monotonic() - self.started,
        )


def switching(report: IndexReport, phase: IndexPhase = IndexPhase.SWITCHING) -> IndexProgress:
    """A reindex's last events: its new generation built, being switched to (then done)."""
    return IndexProgress(
        phase=phase,
        files_done=report.files,
        files_total=report.files,
        chunks_done=report.chunks_embedded + report.chunks_reused,
        chunks_per_s=0.0,
        seconds_left=0.0,
        current=None,
    )


def without_done(progress: Progress | None) -> Progress | None:
    """A reindex's build reports everything but its DONE: the switch comes after it."""
    if progress is None:
        return None

    def forward(event: IndexProgress) -> None:
        if event.phase is not IndexPhase.DONE:
            progress(event)

    return forward
