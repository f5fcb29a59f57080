"""The Discover tab's handle on the Hub: searches, listings, remote plans and downloads run
on worker threads; results come back as Qt signals in the GUI thread."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.platform.paths import AppPaths
from app.services.planning import planning_hardware
from app.settings.hub_settings import HubSettings, header_cache_dir, hub_access, load_settings
from engine import (
    Downloader,
    DownloadManager,
    DownloadProgress,
    DownloadSpec,
    DownloadState,
    EngineError,
    HardwareSnapshot,
    HeaderCache,
    HubAccess,
    HubClient,
    HubUnreachable,
    LoadPlan,
    LoadRequest,
    ModelInfo,
    QuantOption,
    RemoteInspection,
    RepoFiles,
    RepoSummary,
    WorkerInfo,
    inspect_remote,
    inspect_remote_projector,
    plan_load,
)

SEARCH_LIMIT = 1000
RESULT_BATCH = 500  # results handed to the view at a time: the list grows while pages arrive


SummaryRow = tuple[str, str, int, int, str | None, str | None, bool]


def summary_row(r: RepoSummary) -> SummaryRow:
    """A search result as a plain tuple. The garbage collector stops tracking a tuple of
    strings and numbers, so 50,000 results held by the view (or waiting in queued signals)
    do not lengthen every full collection: as dataclasses they made GUI stalls of 60-100 ms."""
    return (r.repo_id, r.author, r.downloads, r.likes, r.last_modified, r.license, r.gated)


@dataclass(frozen=True)
class QuantPlan:
    """A quantization planned from its remote header, or why it could not be."""

    repo_id: str
    label: str
    plan: LoadPlan | None
    inspection: RemoteInspection | None
    error: str | None
    projector: str | None = None  # the vision projector whose memory the plan counts


class DiscoverController(QObject):
    search_started = Signal(str)
    results_appended = Signal(object)  # tuple[SummaryRow, ...] (see summary_row)
    search_finished = Signal(int)  # results in all
    search_failed = Signal(str)
    search_offline = Signal(str)  # the Hub cannot be reached (also search_failed): what still works
    repo_loaded = Signal(object)  # RepoFiles
    repo_failed = Signal(str)
    plan_ready = Signal(object)  # QuantPlan
    download_changed = Signal(object)  # DownloadProgress
    download_finished = Signal(object)  # Path of the model (first part) now in the models folder
    download_failed = Signal(str)
    settings_changed = Signal()  # endpoint, token or downloads at once (reconfigure)
    _results = Signal(int, object)
    _search_done = Signal(int, int, object, bool)  # generation, count, error, offline
    _repo = Signal(int, object, object)
    _plan = Signal(int, object)
    _download = Signal(object)

    def __init__(self, paths: AppPaths, hardware: HardwareSnapshot | None = None,
                 parent: QObject | None = None, max_parallel: int | None = None,
                 workers: Callable[[], Iterable[WorkerInfo]] = tuple) -> None:  # fmt: skip
        super().__init__(parent)
        # The user's RPC workers (read on this thread): plans are for this machine and them.
        self._workers = workers
        self.paths = paths
        self.settings: HubSettings = load_settings(paths)
        self.access: HubAccess = hub_access(paths, self.settings)
        self._hardware = hardware
        self._pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="hearth-hub")
        self._search_gen = 0
        self.search_limit = SEARCH_LIMIT
        self._repo_gen = 0
        self.cache = HeaderCache(header_cache_dir(paths))
        self.repo: RepoFiles | None = None
        self.plans: dict[str, QuantPlan] = {}
        self._downloads: dict[str, DownloadProgress] = {}
        self._specs: dict[str, DownloadSpec] = {}
        self.manager = DownloadManager(
            Downloader(self.access, paths.models_dir),
            listener=self._download.emit,  # from worker threads: queued into this one
            max_parallel=max_parallel or self.settings.max_parallel,
        )
        self._results.connect(self._on_results)
        self._search_done.connect(self._on_search_done)
        self._repo.connect(self._on_repo)
        self._plan.connect(self._on_plan)
        self._download.connect(self._on_download)
        self._shut_down = False
        self._warmed = False

    def warm_up(self) -> None:
        """Import huggingface_hub and httpx (~0.1-0.3 s, much of it holding the GIL) on a
        worker when the page is first shown, not with the window: start-up and the first
        chat do not wait for them, and the first search does not either."""
        if not self._warmed:
            self._warmed = True
            self._pool.submit(_warm_up)

    def set_hardware(self, hardware: HardwareSnapshot) -> None:
        self._hardware = hardware

    def reconfigure(self) -> None:
        """The settings changed (endpoint, token): use them from the next request on."""
        self.settings = load_settings(self.paths)
        self.access = hub_access(self.paths, self.settings)
        self.manager.downloader.access = self.access
        self.manager.set_max_parallel(self.settings.max_parallel)
        self.settings_changed.emit()

    def restore_downloads(self) -> None:
        """Downloads an earlier run left unfinished, listed as paused."""

        # Here, not on a worker: a few small JSON files and stat calls, and the window's
        # start-up gets no extra thread to share the GIL with.
        self.manager.restore()  # each one reported through the listener

    # -- search ---------------------------------------------------------------------------

    def search(self, query: str) -> None:
        self._search_gen += 1
        gen = self._search_gen
        self.search_started.emit(query)
        access = self.access

        def job() -> None:
            batch: list = []
            count = 0
            try:
                client = HubClient(access)
                for summary in client.iter_search(query, limit=self.search_limit):
                    if gen != self._search_gen or self._shut_down:
                        return
                    batch.append(summary_row(summary))
                    count += 1
                    if len(batch) >= RESULT_BATCH:
                        self._results.emit(gen, tuple(batch))
                        batch = []
                if batch:
                    self._results.emit(gen, tuple(batch))
                self._search_done.emit(gen, count, None, False)
            except HubUnreachable as exc:
                self._search_done.emit(gen, count, exc.message, True)
            except EngineError as exc:
                self._search_done.emit(gen, count, exc.message, False)

        self._pool.submit(job)

    def _on_results(self, gen: int, batch: tuple) -> None:
        if gen == self._search_gen:
            self.results_appended.emit(batch)

    def _on_search_done(self, gen: int, count: int, error: str | None, offline: bool) -> None:
        if gen != self._search_gen:
            return
        if error is None:
            self.search_finished.emit(count)
            return
        self.search_failed.emit(error)
        if offline:
            self.search_offline.emit(error)

    # -- one repository and its plans ---------------------------------------------------------

    def open_repo(self, repo_id: str) -> None:
        self._repo_gen += 1
        gen = self._repo_gen
        self.repo = None
        self.plans = {}
        access = self.access
        workers = tuple(self._workers())

        def job() -> None:
            try:
                listing = HubClient(access).repo_files(repo_id)
            except EngineError as exc:
                self._repo.emit(gen, None, exc.message)
                return
            self._repo.emit(gen, listing, None)
            hardware = planning_hardware(self._hardware, workers)
            projector = self._projector(access, listing)
            for option in listing.quants:
                if gen != self._repo_gen or self._shut_down:
                    return
                self._plan.emit(gen, self._plan_one(access, listing, option, hardware, projector))

        self._pool.submit(job)

    def _projector(self, access: HubAccess, listing: RepoFiles) -> ModelInfo | None:
        """The projector the page offers (``listing.projectors[0]``), read once per repository:
        a model that comes with one is planned with it, as a local model paired with one is.
        One that cannot be read leaves the plans text-only."""
        if not listing.projectors:
            return None
        try:
            return inspect_remote_projector(access, listing, listing.projectors[0], self.cache).info
        except EngineError:
            return None

    def _plan_one(self, access: HubAccess, listing: RepoFiles, option: QuantOption,
                  hardware: HardwareSnapshot, projector: ModelInfo | None = None) -> QuantPlan:  # fmt: skip
        try:
            inspection = inspect_remote(access, listing, option, self.cache)
            plan = plan_load(inspection.info, hardware, LoadRequest(projector=projector))
            name = listing.projectors[0].name if projector is not None else None
            return QuantPlan(listing.repo_id, option.label, plan, inspection, None, name)
        except EngineError as exc:
            return QuantPlan(listing.repo_id, option.label, None, None, exc.message)

    def _on_repo(self, gen: int, listing: RepoFiles | None, error: str | None) -> None:
        if gen != self._repo_gen:
            return
        if listing is None:
            self.repo_failed.emit(error or "")
            return
        self.repo = listing
        self.repo_loaded.emit(listing)

    def _on_plan(self, gen: int, plan: QuantPlan) -> None:
        if gen != self._repo_gen:
            return
        self.plans[plan.label] = plan
        self.plan_ready.emit(plan)

    # -- downloads ----------------------------------------------------------------------------

    def download(self, option: QuantOption) -> str | None:
        if self.repo is None:
            return None
        spec = DownloadSpec.of(self.repo.repo_id, self.repo.commit, option)
        self._specs[spec.key] = spec
        return self.manager.enqueue(spec)

    def pause(self, key: str) -> None:
        self.manager.pause(key)

    def resume(self, key: str) -> None:
        self.manager.resume(key)

    def cancel(self, key: str) -> None:
        self.manager.cancel(key)

    def downloads(self) -> tuple[DownloadProgress, ...]:
        return tuple(self._downloads.values())

    def _on_download(self, progress: DownloadProgress) -> None:
        if self._shut_down:
            return
        before = self._downloads.get(progress.key)
        self._downloads[progress.key] = progress
        self.download_changed.emit(progress)
        if before is not None and before.state is progress.state:
            return
        if progress.state is DownloadState.DONE and progress.target is not None:
            self.download_finished.emit(Path(progress.target))
        elif progress.state is DownloadState.FAILED and progress.error:
            self.download_failed.emit(progress.error)

    def shutdown(self) -> None:
        """Pause the downloads (their parts resume on the next start) and stop the workers."""
        self._shut_down = True
        self._search_gen += 1
        self._repo_gen += 1
        self.manager.shutdown()
        self._pool.shutdown(wait=True, cancel_futures=True)


def _warm_up() -> None:
    import datetime

    from huggingface_hub import HfApi, get_session

    del HfApi
    get_session()
    # What the first search would import on its worker while results stream in (the
    # Hub's dates, its URLs' host names), holding the GIL from the GUI thread.
    datetime.datetime.strptime("2024-01-01T00:00:00", "%Y-%m-%dT%H:%M:%S")
    "huggingface.co".encode("idna")
