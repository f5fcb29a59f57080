"""Several downloads at once, at most ``max_parallel`` running (2 by default); pause,
resume and cancel from any thread; unfinished downloads found again after a restart."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from engine.base.errors import EngineError
from engine.hub.download import Downloader
from engine.hub.download_job import DownloadControl, DownloadProgress, DownloadSpec, DownloadState

DEFAULT_PARALLEL = 2

Listener = Callable[[DownloadProgress], None]


@dataclass
class _Job:
    spec: DownloadSpec
    progress: DownloadProgress
    control: DownloadControl = field(default_factory=DownloadControl)
    thread: threading.Thread | None = None


class DownloadManager:
    """Jobs keyed by ``DownloadSpec.key``. ``listener`` is called from worker threads."""

    def __init__(self, downloader: Downloader, listener: Listener | None = None,
                 max_parallel: int = DEFAULT_PARALLEL) -> None:  # fmt: skip
        self.downloader = downloader
        self.listener = listener or (lambda _p: None)
        self._lock = threading.Lock()
        self._slot_freed = threading.Condition(self._lock)
        self._limit = max(1, max_parallel)
        self._jobs: dict[str, _Job] = {}
        self._running = 0
        self.max_running_seen = 0  # for tests and the benchmark: the limit held

    @property
    def max_parallel(self) -> int:
        return self._limit

    def set_max_parallel(self, limit: int) -> None:
        """From now on at most ``limit`` run; those running beyond it finish, queued ones wait."""
        with self._lock:
            self._limit = max(1, limit)
            self._slot_freed.notify_all()

    def jobs(self) -> tuple[DownloadProgress, ...]:
        with self._lock:
            return tuple(j.progress for j in self._jobs.values())

    def progress(self, key: str) -> DownloadProgress | None:
        with self._lock:
            job = self._jobs.get(key)
            return job.progress if job else None

    def restore(self) -> tuple[DownloadProgress, ...]:
        """Unfinished downloads of an earlier run, listed as paused (resume continues them)."""
        restored = []
        for spec in self.downloader.pending():
            with self._lock:
                if spec.key in self._jobs:
                    continue
                progress = DownloadProgress(
                    spec.key,
                    spec.title,
                    DownloadState.PAUSED,
                    self.downloader.done_bytes(spec),
                    spec.total_size,
                )
                self._jobs[spec.key] = _Job(spec, progress)
            restored.append(progress)
            self.listener(progress)
        return tuple(restored)

    def enqueue(self, spec: DownloadSpec) -> str:
        """Start (or resume) ``spec``; a download already running is left as it is."""
        with self._lock:
            job = self._jobs.get(spec.key)
            if job is not None and job.thread is not None and job.thread.is_alive():
                return spec.key
            progress = DownloadProgress(
                spec.key, spec.title, DownloadState.QUEUED,
                job.progress.done_bytes if job else 0, spec.total_size,
            )  # fmt: skip
            job = _Job(spec, progress)
            self._jobs[spec.key] = job
            job.thread = threading.Thread(
                target=self._work, args=(job,), name=f"hearth-download-{spec.key[:8]}"
            )
            job.thread.daemon = True
        self.listener(progress)
        job.thread.start()
        return spec.key

    def resume(self, key: str) -> None:
        with self._lock:
            job = self._jobs.get(key)
        if job is not None and not (job.thread and job.thread.is_alive()):
            self.enqueue(job.spec)

    def pause(self, key: str) -> None:
        with self._lock:
            job = self._jobs.get(key)
        if job is not None:
            job.control.pause.set()

    def cancel(self, key: str) -> None:
        with self._lock:
            job = self._jobs.get(key)
        if job is None:
            return
        job.control.cancel.set()
        if job.thread is None or not job.thread.is_alive():
            self.downloader.discard(job.spec)
            self._update(job, replace(job.progress, state=DownloadState.CANCELLED, done_bytes=0))

    def wait(self, key: str, timeout: float | None = None) -> DownloadProgress | None:
        with self._lock:
            job = self._jobs.get(key)
        if job is not None and job.thread is not None:
            job.thread.join(timeout)
        return self.progress(key)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Pause everything (the parts stay for the next start) and wait for the workers."""
        with self._lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            job.control.pause.set()
        for job in jobs:
            if job.thread is not None:
                job.thread.join(timeout)

    def _update(self, job: _Job, progress: DownloadProgress) -> None:
        with self._lock:
            job.progress = progress
        self.listener(progress)

    def _work(self, job: _Job) -> None:
        if not self._take_slot(job):
            state = DownloadState.CANCELLED if job.control.cancel.is_set() else DownloadState.PAUSED
            if state is DownloadState.CANCELLED:
                self.downloader.discard(job.spec)
            self._update(job, replace(job.progress, state=state))
            return
        try:
            final = self.downloader.run(job.spec, job.control, lambda p: self._update(job, p))
            self._update(job, final)
        except EngineError as exc:
            self._update(job, replace(job.progress, state=DownloadState.FAILED, error=exc.message, speed=0.0))
        except Exception as exc:  # a bug must not kill the worker silently
            self._update(job, replace(job.progress, state=DownloadState.FAILED, error=f"{exc}", speed=0.0))
        finally:
            with self._lock:
                self._running -= 1
                self._slot_freed.notify_all()

    def _take_slot(self, job: _Job) -> bool:
        """Wait until fewer than the limit run; False when the job was paused or cancelled
        while it waited (a pause or cancel of a queued download must not wait for a slot)."""
        with self._lock:
            while self._running >= self._limit:
                if job.control.stop_requested:
                    return False
                self._slot_freed.wait(timeout=0.05)
            self._running += 1
            self.max_running_seen = max(self.max_running_seen, self._running)
            return True
