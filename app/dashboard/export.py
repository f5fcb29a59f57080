"""Saving a dashboard session: the metrics as CSV, the plots as PNG, in one new folder."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from PySide6.QtWidgets import QWidget

from app.dashboard.metrics import MetricsHistory


@dataclass(frozen=True)
class ExportResult:
    folder: Path
    csv: Path
    images: tuple[Path, ...]
    rows: int  # data rows in the CSV

    @property
    def files(self) -> tuple[Path, ...]:
        return (self.csv, *self.images)


def slug(text: str) -> str:
    """A file-name-safe lower-case name: "KV cache — 4 sequences" -> "kv-cache-4-sequences"."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "plot"


def _unique_folder(parent: Path, name: str) -> Path:
    target = parent / name
    n = 2
    while target.exists():  # two exports in the same second must not overwrite each other
        target = parent / f"{name}-{n}"
        n += 1
    return target


def export_session(
    history: MetricsHistory,
    folder: str | Path,
    overview: QWidget,
    panels: Sequence[tuple[str, QWidget]],
    when: datetime | None = None,
) -> ExportResult:
    """Write ``metrics.csv``, ``dashboard.png`` (``overview``) and one PNG per panel
    into a new ``hearth-dashboard-<date>-<time>`` folder inside ``folder``.

    Raises OSError when a file cannot be written.
    """
    stamp = (when or datetime.now()).strftime("%Y%m%d-%H%M%S")
    target = _unique_folder(Path(folder), f"hearth-dashboard-{stamp}")
    target.mkdir(parents=True)
    csv_path = target / "metrics.csv"
    rows = history.to_csv(csv_path)
    images: list[Path] = []
    used: set[str] = set()
    for name, widget in [("dashboard", overview), *panels]:
        base = slug(name)
        stem, n = base, 2
        while stem in used:
            stem, n = f"{base}-{n}", n + 1
        used.add(stem)
        path = target / f"{stem}.png"
        # grab() renders the widget and its children whether or not they are scrolled into view.
        pixmap = widget.grab()
        if pixmap.isNull() or not pixmap.save(str(path), "PNG"):
            raise OSError(f"Could not write {path}")
        images.append(path)
    return ExportResult(target, csv_path, tuple(images), rows)


__all__ = ["ExportResult", "export_session", "slug"]
