"""What a Hub download is and how it is told: its spec, state, progress, control, the meter.

``DownloadSpec`` names the files (one quantization at one commit) and is what the staging
folder remembers (``to_json``) so a download resumes after a restart; ``DownloadProgress``
is what ``Downloader.run`` reports, at most ten times a second (``ProgressMeter``), and
``DownloadControl`` what another thread sets to pause or cancel it.
"""

from __future__ import annotations

import enum
import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.hub.files import HubFile, QuantOption

_REPORT_EVERY_S = 0.1
_SPEED_WINDOW_S = 3.0


class DownloadState(enum.Enum):
    QUEUED = "queued"
    RUNNING = "downloading"
    PAUSED = "paused"
    VERIFYING = "verifying"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (DownloadState.DONE, DownloadState.FAILED, DownloadState.CANCELLED)


@dataclass(frozen=True)
class DownloadSpec:
    """What to fetch: one quantization of a repository at one commit."""

    repo_id: str
    commit: str
    label: str
    files: tuple[HubFile, ...]

    @classmethod
    def of(cls, repo_id: str, commit: str, option: QuantOption) -> DownloadSpec:
        return cls(repo_id, commit, option.label, option.files)

    @property
    def key(self) -> str:
        text = f"{self.repo_id}@{self.commit}:" + "|".join(f.path for f in self.files)
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def title(self) -> str:
        return f"{self.repo_id} · {self.label}"

    def to_json(self) -> dict[str, Any]:
        return {
            "repo_id": self.repo_id,
            "commit": self.commit,
            "label": self.label,
            "files": [
                {"path": f.path, "size": f.size, "sha256": f.sha256, "git_oid": f.git_oid} for f in self.files
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DownloadSpec:
        files = tuple(
            HubFile(str(f["path"]), int(f["size"]), f.get("sha256"), f.get("git_oid")) for f in data["files"]
        )
        return cls(str(data["repo_id"]), str(data["commit"]), str(data["label"]), files)


@dataclass(frozen=True)
class DownloadProgress:
    key: str
    title: str
    state: DownloadState
    done_bytes: int
    total_bytes: int
    speed: float = 0.0  # bytes per second, over the last few seconds
    error: str | None = None
    target: Path | None = None  # the first part in the library, once DONE

    @property
    def fraction(self) -> float:
        return self.done_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def eta_s(self) -> float | None:
        left = self.total_bytes - self.done_bytes
        return left / self.speed if self.speed > 0 and left > 0 else None


@dataclass
class DownloadControl:
    """Set from any thread; the download loop looks at it between chunks."""

    pause: threading.Event = field(default_factory=threading.Event)
    cancel: threading.Event = field(default_factory=threading.Event)

    @property
    def stop_requested(self) -> bool:
        return self.pause.is_set() or self.cancel.is_set()


Report = Callable[[DownloadProgress], None]


class ProgressMeter:
    """Bytes done, speed over a sliding window, reports at most ten a second."""

    def __init__(self, spec: DownloadSpec, report: Report) -> None:
        self.spec = spec
        self.report = report
        self.done = 0
        self._samples: list[tuple[float, int]] = []
        self._last = 0.0

    def speed(self, now: float) -> float:
        self._samples.append((now, self.done))
        while len(self._samples) > 2 and now - self._samples[0][0] > _SPEED_WINDOW_S:
            self._samples.pop(0)
        t0, d0 = self._samples[0]
        return (self.done - d0) / (now - t0) if now > t0 else 0.0

    def add(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self._last >= _REPORT_EVERY_S:  # checked here: add runs per network read
            self._report(DownloadState.RUNNING, now, None)

    def emit(self, state: DownloadState, target: Path | None = None) -> DownloadProgress:
        """A change of state: always reported."""
        return self._report(state, time.monotonic(), target)

    def _report(self, state: DownloadState, now: float, target: Path | None) -> DownloadProgress:
        self._last = now
        spec = self.spec
        progress = DownloadProgress(
            spec.key, spec.title, state, self.done, spec.total_size, self.speed(now), None, target
        )
        self.report(progress)
        return progress
