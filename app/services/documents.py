"""The window's documents: collections indexed on a worker, progress as signals, the folders
watched (``document_watch``), excerpts for a question retrieved off the GUI thread.

``DocumentsService`` owns the index (its own SQLite file: indexing never locks the chat store)
and the embedder, both opened on a worker when first needed (numpy, llama.cpp; converting the
default embedder too), never when the service is made. One worker runs indexing jobs one at a
time in order (renames and removals too: they must not race a run); the other lists, creates
and answers questions, so a question is answered while a folder indexes (WAL).

The embedder is planned first for the machine as it is then (``planning_hardware``): one that
does not fit in the free RAM is refused (``EmbedderDoesNotFit``, the job's one line) and
nothing is opened. Its opening and its closing are announced (``embedder_changed``: its name
and memory, which the window hands the dashboard).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from app.platform.embedding_model import ensure_default_embedder
from app.platform.paths import AppPaths
from app.services.document_jobs import DocumentJob, JobKind, OpenEmbedder
from app.services.document_watch import RESCAN_DELAY_MS, FolderWatch, watch_list
from engine import EngineError

if TYPE_CHECKING:
    from engine import (
        ChunkSettings,
        CollectionInfo,
        DocumentIndex,
        DocumentInfo,
        Embedder,
        HardwareSnapshot,
        IndexProgress,
        IndexReport,
        Retrieval,
        TextEmbedder,
    )

# Progress events handed to the GUI at most this often within one file (every file's end and
# every change of phase always go): a fast run must not flood the event loop.
PROGRESS_INTERVAL_S = 0.1
# A collection's file list is read again at most this often while it indexes (each read is
# the whole list: reading it per file would be quadratic in the files).
LISTING_INTERVAL_S = 1.0

RetrieveCallback = Callable[["Retrieval | None", "str | None"], None]


class DocumentsService(QObject):
    collections_changed = Signal()  # collections() / collection_names() changed
    documents_changed = Signal(str)  # a collection's documents(name) changed
    job_started = Signal(str)  # a collection's indexing began
    progress = Signal(object)  # IndexProgress of the running job
    finished = Signal(str, object)  # collection, IndexReport
    failed = Signal(str, str)  # collection ("" for none), one line
    reindex_planned = Signal(object)  # ReindexPlan: to be agreed to before it starts
    embedder_changed = Signal(object)  # OpenEmbedder once it is open, None once it is closed
    _listed = Signal(object, object)  # list[CollectionInfo], {name: (docs, pages)}
    _started = Signal(object)  # DocumentJob
    _progressed = Signal(object)
    _done = Signal(object, object, object)  # DocumentJob, IndexReport | None, error | None
    _planned = Signal(object)
    _watch = Signal(str, object)  # collection, frozenset of paths to watch
    _answered = Signal(object, object, object)  # callback, Retrieval | None, error | None
    _failed_line = Signal(str, str)
    _embedder_opened = Signal(object)

    def __init__(
        self,
        paths: AppPaths,
        parent: QObject | None = None,
        *,
        embedder_path: Path | None = None,
        embedder_threads: int | None = None,
        rescan_delay_ms: int = RESCAN_DELAY_MS,
        hardware: Callable[[], HardwareSnapshot] | None = None,
    ) -> None:
        """``embedder_path``: a GGUF to embed with instead of the default (tests);
        ``embedder_threads``: its threads (None: the planner's choice); ``hardware``: the
        machine the embedder is planned for before it opens, asked each time (None:
        ``planning_hardware()``, this machine now)."""
        super().__init__(parent)
        self.db_path = paths.data_dir / "documents.sqlite3"
        self.embedders_dir = paths.embedders_dir
        self._embedder_path = embedder_path
        self._embedder_threads = embedder_threads
        self._hardware = hardware
        self._open_embedder: OpenEmbedder | None = None
        self._index_obj: DocumentIndex | None = None
        self._embedder_obj: Embedder | None = None
        self._open_lock = threading.Lock()
        self._embedder_lock = threading.Lock()
        # Created here, started by their first job: making the service costs nothing.
        self._jobs_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hearth-docs-index")
        self._reads_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hearth-docs-read")
        self._queue: list[DocumentJob] = []  # waiting or running, in order (GUI thread only)
        self._running: DocumentJob | None = None
        self._collections: list[CollectionInfo] = []
        self._documents: dict[str, list[DocumentInfo]] = {}
        self._pages: dict[str, dict[int, int]] = {}
        self._closed = False
        self._started_listing = False
        # Paths asked for while the collection needed a reindex first: added once it is agreed to.
        self._after_reindex: dict[str, tuple[Path, ...]] = {}
        self.last_progress: IndexProgress | None = None
        # Whether a chat is generating (read on the indexing worker): indexing waits between
        # decodes while it is, as two llama.cpp thread pools on 2 cores halved the chat's speed.
        self._chat_busy: Callable[[], bool] = lambda: False
        self.watch = FolderWatch(self._rescan_watched, rescan_delay_ms, self)
        self._listed.connect(self._on_listed)
        self._started.connect(self._on_started)
        self._progressed.connect(self._on_progress)
        self._done.connect(self._on_done)
        self._planned.connect(self.reindex_planned)
        self._watch.connect(self.watch.set_paths)
        self._answered.connect(self._on_answered)
        self._failed_line.connect(self.failed)
        self._embedder_opened.connect(self._on_embedder)

    # -- what the window reads -------------------------------------------------------------

    def start(self) -> None:
        """Open the index on a worker and list the collections (collections_changed)."""
        if self._started_listing or self._closed:
            return
        self._started_listing = True
        self._read(lambda: self._list(None, watch=True))

    def collections(self) -> list[CollectionInfo]:
        return list(self._collections)

    def collection_names(self) -> list[str]:
        return [c.name for c in self._collections]

    def documents(self, name: str) -> list[DocumentInfo]:
        """The collection's files as last listed (the list updates while it indexes)."""
        return list(self._documents.get(name, ()))

    def pages(self, name: str) -> dict[int, int]:
        """Pages of the collection's paged documents, by document id."""
        return dict(self._pages.get(name, {}))

    @property
    def busy(self) -> bool:
        return any(job.indexes for job in self._queue)

    @property
    def indexing(self) -> str | None:
        """The collection being indexed now."""
        job = self._running
        return job.collection if job is not None and job.indexes else None

    @property
    def paused(self) -> bool:
        job = self._running
        return job is not None and job.control.paused

    @property
    def open_embedder(self) -> OpenEmbedder | None:
        """The embedder open now (GUI thread's view: set when its opening is announced)."""
        return self._open_embedder

    # -- collections -----------------------------------------------------------------------

    def set_chat_busy(self, busy: Callable[[], bool]) -> None:
        """``busy()``: a chat is generating now; called from the indexing worker, so it must only read."""
        self._chat_busy = busy

    def create_collection(self, name: str) -> None:
        def create() -> None:
            self._index().create_collection(name)
            self._list([name.strip()])

        self._read(create, collection=name)

    def rename_collection(self, old: str, new: str) -> None:
        self._cancel_jobs(old)
        self._enqueue(DocumentJob(JobKind.RENAME, old, new_name=new))

    def remove_collection(self, name: str) -> None:
        """Forget the collection (its files stay where they are); a run of it is cancelled."""
        self._cancel_jobs(name)
        self._enqueue(DocumentJob(JobKind.REMOVE, name))

    # -- indexing --------------------------------------------------------------------------

    def add_paths(self, name: str, paths: Iterable[Path | str]) -> None:
        """Index files or folders into the collection, after the jobs already queued."""
        chosen = tuple(Path(os.path.abspath(os.path.expanduser(str(p)))) for p in paths)
        if chosen:
            self._enqueue(DocumentJob(JobKind.ADD, name, paths=chosen))

    def rescan(self, name: str) -> None:
        """Every source of the collection looked at again (only what changed is embedded)."""
        if any(
            j.kind is JobKind.RESCAN and j.collection == name and j is not self._running for j in self._queue
        ):
            return  # one waiting already will see this change too
        self._enqueue(DocumentJob(JobKind.RESCAN, name))

    def plan_reindex(self, name: str, max_tokens: int | None = None) -> None:
        """What building the collection again with the embedder (and chunks of ``max_tokens``)
        would take, as reindex_planned (it measures the embedder's rate once: a worker's job)."""

        def plan() -> None:
            from engine import ChunkSettings

            index = self._index()
            info = index.collection(name)
            chunking = info.chunking
            if max_tokens is not None:
                chunking = ChunkSettings(max_tokens=max_tokens, overlap=info.chunking.overlap)
            self._planned.emit(index.plan_reindex(name, self._embedder(), chunking))

        self._read(plan, collection=name)

    def reindex(self, name: str, chunking: ChunkSettings | None = None) -> None:
        """Build the collection again beside its index (which keeps answering), then switch."""
        self._enqueue(DocumentJob(JobKind.REINDEX, name, chunking=chunking))
        waiting = self._after_reindex.pop(name, ())
        if waiting:
            self.add_paths(name, waiting)

    def pause(self) -> None:
        if self._running is not None and self._running.indexes:
            self._running.control.pause()
            self._emit_paused()

    def resume(self) -> None:
        if self._running is not None:
            self._running.control.resume()

    def cancel(self) -> None:
        """Stop the running indexing job (what it finished is kept) and drop those waiting."""
        for job in [j for j in self._queue if j.indexes]:
            self._cancel(job)

    # -- questions -------------------------------------------------------------------------

    def retrieve_async(
        self, names: Sequence[str], question: str, context_tokens: int, callback: RetrieveCallback
    ) -> None:
        """Excerpts of the collections ``names`` for ``question`` on a worker; ``callback``
        runs on the GUI thread with (Retrieval, None) or (None, one line)."""
        wanted = list(names)

        def answer() -> None:
            from engine import retrieve

            try:
                index = self._index()
                embedder = self._embedder()
                result = retrieve(index, wanted, question, embedder, context_tokens=context_tokens)
            except EngineError as exc:
                self._answered.emit(callback, None, exc.message)
            except Exception as exc:  # a question must never take the window down
                self._answered.emit(callback, None, f"Could not search the documents: {exc}")
            else:
                self._answered.emit(callback, result, None)

        if self._closed:
            callback(None, "The documents are closed.")
            return
        self._reads_pool.submit(answer)

    # -- life ------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the workers (a run stops at its next checkpoint, its finished files kept),
        then close the embedder and the index."""
        if self._closed:
            return
        self._closed = True
        for job in list(self._queue):
            self._cancel(job)
        self.watch.stop()
        self._jobs_pool.shutdown(wait=True, cancel_futures=True)
        self._reads_pool.shutdown(wait=True, cancel_futures=True)
        if self._embedder_obj is not None:
            self._embedder_obj.close()
            self._embedder_obj = None
        if self._open_embedder is not None:
            self._open_embedder = None
            self.embedder_changed.emit(None)
        if self._index_obj is not None:
            self._index_obj.close()
            self._index_obj = None

    # -- workers' side ---------------------------------------------------------------------

    def _index(self) -> DocumentIndex:
        with self._open_lock:
            if self._index_obj is None:
                from engine import DocumentIndex

                self._index_obj = DocumentIndex(self.db_path)
            return self._index_obj

    def _embedder(self) -> Embedder:
        with self._embedder_lock:
            if self._embedder_obj is None:
                from app.services.planning import planning_hardware
                from engine import estimate_embedder_memory, open_embedder

                path = self._embedder_path or ensure_default_embedder(self.embedders_dir)
                if self._closed:
                    raise EngineError("The documents are closed.")
                # Planned for the machine as it is now: EmbedderDoesNotFit opens nothing.
                hardware = self._hardware() if self._hardware is not None else planning_hardware()
                self._embedder_obj = open_embedder(path, self._embedder_threads, hardware=hardware)
                info = self._embedder_obj.info
                self._embedder_opened.emit(
                    OpenEmbedder(info.model.display_name, estimate_embedder_memory(info))
                )
            return self._embedder_obj

    def _read(self, fn: Callable[[], None], collection: str = "") -> None:
        def run() -> None:
            try:
                fn()
            except EngineError as exc:
                self._failed_line.emit(collection, exc.message)

        if not self._closed:
            self._reads_pool.submit(run)

    def _list(self, names: Iterable[str] | None, *, watch: bool = False) -> None:
        """Collections listed, with the documents of ``names`` (None: all) — on a worker."""
        index = self._index()
        collections = index.collections()
        wanted = [c.name for c in collections] if names is None else list(names)
        known = {c.name for c in collections}
        listings: dict[str, Any] = {}
        for name in wanted:
            if name in known:
                listings[name] = (index.documents(name), index.document_pages(name))
        self._listed.emit(collections, listings)
        if watch:
            for info in collections:
                if info.name in listings:
                    self._watch.emit(info.name, watch_list(info, listings[info.name][0]))

    def _run(self, job: DocumentJob) -> None:
        self._started.emit(job)
        try:
            index = self._index()
            if job.kind is JobKind.RENAME:
                index.rename_collection(job.collection, job.new_name)
                self._watch.emit(job.collection, frozenset())
                self._list([job.new_name], watch=True)
                self._done.emit(job, None, None)
                return
            if job.kind is JobKind.REMOVE:
                index.remove_collection(job.collection)
                self._watch.emit(job.collection, frozenset())
                self._list(())
                self._done.emit(job, None, None)
                return
            embedder = self._embedder()
            info = index.collection(job.collection)
            moving = info.reindex_to is not None and info.reindex_to[0] == embedder.name
            if job.kind is not JobKind.REINDEX and info.embedder not in (None, embedder.name) and not moving:
                # Another model's vectors: the user agrees to the cost before anything starts;
                # the paths asked for are added after it (``_after_reindex``).
                self._planned.emit(index.plan_reindex(job.collection, embedder))
                self._done.emit(job, None, None)
                return
            from engine import CourteousEmbedder, Courtesy

            courteous = CourteousEmbedder(embedder, Courtesy(self._chat_busy))
            report = self._index_job(index, courteous, job)
        except EngineError as exc:
            self._done.emit(job, None, exc.message)
        except Exception as exc:  # a bug must not stop the queue for good
            self._done.emit(job, None, f"Indexing stopped: {exc}")
        else:
            self._done.emit(job, report, None)

    def _index_job(self, index: DocumentIndex, embedder: TextEmbedder, job: DocumentJob) -> IndexReport:
        from engine import IndexPhase

        last = [0.0, -1, None]  # time, files done, phase of the last event handed on
        listed = [time.monotonic()]

        def forward(event: IndexProgress) -> None:
            now = time.monotonic()
            news = event.files_done != last[1] or event.phase is not last[2]
            if news or now - last[0] >= PROGRESS_INTERVAL_S:
                last[:] = [now, event.files_done, event.phase]
                self._progressed.emit(event)
            due = event.phase is IndexPhase.INDEXING and now - listed[0] >= LISTING_INTERVAL_S
            if due or event.phase is IndexPhase.PAUSED:  # paused: the list as it stands
                listed[0] = now
                self._list([job.collection])

        if job.kind is JobKind.REINDEX:
            report = index.reindex(
                job.collection, embedder, job.chunking, progress=forward, control=job.control
            )
        elif job.kind is JobKind.RESCAN:
            report = index.rescan(job.collection, embedder, progress=forward, control=job.control)
        else:
            report = index.index_paths(
                job.collection, job.paths, embedder, progress=forward, control=job.control
            )
        self._list([job.collection], watch=True)
        return report

    # -- GUI side --------------------------------------------------------------------------

    def _enqueue(self, job: DocumentJob) -> None:
        if self._closed:
            return
        self._queue.append(job)
        job.future = self._jobs_pool.submit(self._run, job)

    def _cancel(self, job: DocumentJob) -> None:
        job.control.cancel()
        if job.future is not None and job.future.cancel():
            self._queue.remove(job)

    def _cancel_jobs(self, name: str) -> None:
        for job in [j for j in self._queue if j.indexes and j.collection == name]:
            self._cancel(job)

    def _emit_paused(self) -> None:
        last = self.last_progress
        if last is not None:
            # The run says so itself at its next checkpoint; the buttons change now.
            self._on_progress(_paused(last))

    def _on_started(self, job: DocumentJob) -> None:
        if job not in self._queue:
            return  # already done: its end overtook nothing, but a cancel may have dropped it
        self._running = job
        if job.indexes:
            self.last_progress = None
            self.job_started.emit(job.collection)

    def _on_progress(self, event: IndexProgress) -> None:
        self.last_progress = event
        self.progress.emit(event)

    def _on_done(self, job: DocumentJob, report: IndexReport | None, error: str | None) -> None:
        if job in self._queue:
            self._queue.remove(job)
        if self._running is job:
            self._running = None
        if error is not None:
            self.failed.emit(job.collection, error)
        elif report is not None:
            self.finished.emit(job.collection, report)
        if job.kind is JobKind.ADD and report is None and error is None:
            self._after_reindex[job.collection] = job.paths

    def _on_listed(self, collections: list[CollectionInfo], listings: dict[str, Any]) -> None:
        self._collections = list(collections)
        names = {c.name for c in collections}
        for gone in [n for n in self._documents if n not in names]:
            del self._documents[gone]
            self._pages.pop(gone, None)
        for name, (docs, pages) in listings.items():
            self._documents[name] = list(docs)
            self._pages[name] = dict(pages)
        self.collections_changed.emit()
        for name in listings:
            self.documents_changed.emit(name)

    def _on_embedder(self, opened: OpenEmbedder) -> None:
        if self._closed:
            return  # announced by a worker as the service closed: it is closed already
        self._open_embedder = opened
        self.embedder_changed.emit(opened)

    def _rescan_watched(self, name: str) -> None:
        if not self._closed:
            self.rescan(name)

    def _on_answered(self, callback: RetrieveCallback, result: Retrieval | None, error: str | None) -> None:
        callback(result, error)


def _paused(event: IndexProgress) -> IndexProgress:
    from dataclasses import replace

    from engine import IndexPhase

    return replace(event, phase=IndexPhase.PAUSED)
