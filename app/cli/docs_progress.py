"""``hearth docs add``'s progress on stderr: a bar redrawn in place on a terminal (files done /
total, chunks per second, time left), one plain line per file on a pipe or a log."""

from __future__ import annotations

import time
from typing import TextIO

from engine import IndexPhase, IndexProgress

# Redraws a second on a terminal at most: the indexer may report many times a second.
_REDRAWS_PER_S = 10
_BAR = 30


class IndexProgressBar:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self._last_draw = 0.0
        self._drawn = False
        self._files_done = -1

    def update(self, p: IndexProgress) -> None:
        if self.tty:
            self._draw(p)
        else:
            self._line(p)

    def _draw(self, p: IndexProgress) -> None:
        now = time.monotonic()
        if now - self._last_draw < 1 / _REDRAWS_PER_S and p.phase is IndexPhase.INDEXING:
            return
        self._last_draw = now
        fraction = p.files_done / p.files_total if p.files_total else 0.0
        filled = int(fraction * _BAR)
        current = f" {p.current.name}" if p.current is not None and p.phase is IndexPhase.INDEXING else ""
        self.out.write(
            f"\r[{'#' * filled}{'.' * (_BAR - filled)}] {p.files_done}/{p.files_total} files "
            f"{p.chunks_per_s:.1f} chunks/s{_left(p.seconds_left)} {p.phase.value}{current[:40]}\x1b[K"
        )
        self.out.flush()
        self._drawn = True

    def _line(self, p: IndexProgress) -> None:
        # One line per file finished (the event after a file names it) and one at the end:
        # a log stays readable.
        ended = p.phase in (IndexPhase.DONE, IndexPhase.CANCELLED)
        finished_one = (
            p.phase is IndexPhase.INDEXING and p.current is not None and p.files_done > self._files_done
        )
        if self._files_done >= 0 and (finished_one or ended):
            name = f" {p.current}" if finished_one else ""
            self.out.write(
                f"{p.files_done}/{p.files_total} files, {p.chunks_done} chunks, "
                f"{p.chunks_per_s:.1f} chunks/s{_left(p.seconds_left)} {p.phase.value}{name}\n"
            )
            self.out.flush()
        if p.phase is not IndexPhase.SCANNING:
            self._files_done = max(self._files_done, p.files_done)

    def finish(self) -> None:
        if self.tty and self._drawn:
            self.out.write("\n")
            self.out.flush()


def _left(seconds: float | None) -> str:
    if seconds is None:
        return ""
    s = int(seconds + 0.5)
    return f", {s // 60}:{s % 60:02d} left"
