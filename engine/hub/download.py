"""Resumable, verified downloads of a quantization (every part of a split GGUF).

Each file streams into ``<models>/.hearth-downloads/<id>.part`` (never a ``.gguf``, so
the library never lists it), resumes with a ``Range`` from the part's size after a dropped
connection, a pause, a restart or a SIGKILL, is hashed while it streams (the bytes already
there are hashed first on resume) and enters the library only when its SHA-256 is the one
the Hub publishes: parts 2..N are renamed first, the first part last, each atomically.

huggingface_hub's ``hf_hub_download`` resumes too, but it cannot be paused or cancelled
from another thread, reports progress only to tqdm and does not check the SHA-256; so the
loop is here, on huggingface_hub's URLs, headers and session hooks, its bodies read through
``engine.hub.stdlib_transport`` into the buffers of ``engine.hub.download_buffers``.

What a download is (spec, state, progress, control) is ``engine/hub/download_job.py``.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from engine.base.errors import (
    ChecksumMismatch,
    HubError,
    HubProtocolError,
    HubUnreachable,
    NotEnoughSpace,
)
from engine.base.units import format_bytes
from engine.hub.access import HubAccess, status_error
from engine.hub.download_buffers import BufferPool, ChunkReader, Sink
from engine.hub.download_job import (
    DownloadControl,
    DownloadProgress,
    DownloadSpec,
    DownloadState,
    ProgressMeter,
    Report,
)
from engine.hub.files import HubFile, safe_target

STAGING = ".hearth-downloads"
CHUNK = 1 << 20
SINK_BATCH = 1 << 20  # the size of a receive buffer, handed to the writer thread when full
SINK_BUFFERS = 4
SINK_FLUSH_S = 0.2
SPACE_MARGIN = 64 << 20  # keep some room: a full disk breaks more than this download


class _Stopped(Exception):
    pass


class _Restart(Exception):
    """The server ignored our range and is sending the whole file: start the part over."""


class _Transient(Exception):
    """Worth another try from where the part ends (a dropped connection, a 429, a 5xx)."""

    def __init__(self, error: HubError, wait: float = 0.0) -> None:
        super().__init__(error.message)
        self.error = error
        self.wait = wait


FreeSpace = Callable[[Path], int]


def _free_space(path: Path) -> int:
    return shutil.disk_usage(path).free


class Downloader:
    """Runs one ``DownloadSpec`` at a time per call of ``run``; thread-safe across calls."""

    def __init__(
        self,
        access: HubAccess,
        models_dir: Path,
        *,
        session: Any = None,
        read_timeout_s: float = 30.0,
        retries: int = 5,
        backoff_s: float = 0.5,
        free_space: FreeSpace = _free_space,
    ) -> None:
        self.access = access
        self.models_dir = models_dir
        self.staging = models_dir / STAGING
        self._session = session
        self.read_timeout_s = read_timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.free_space = free_space

    @property
    def session(self) -> Any:
        """The client the bodies come through: given, or one on the standard library's
        ``http.client`` (engine/hub/stdlib_transport.py) with huggingface_hub's hooks; its
        bodies are read straight into this module's buffers, where httpx's own transport
        cost more than the SHA-256 at loopback speed."""
        if self._session is None:
            from huggingface_hub import get_session

            from engine.hub.stdlib_transport import body_client

            self._session = body_client(get_session())
        return self._session

    # -- the parts on disk ----------------------------------------------------------------

    def part_path(self, spec: DownloadSpec, f: HubFile) -> Path:
        # Named by repository, commit and path rather than content: two repositories may
        # publish the same file, and two downloads must never write one part.
        name = hashlib.sha256(f"{spec.repo_id}@{spec.commit}/{f.path}".encode()).hexdigest()[:40]
        return self.staging / f"{name}.part"

    def job_file(self, spec: DownloadSpec) -> Path:
        return self.staging / f"{spec.key}.json"

    def targets(self, spec: DownloadSpec) -> list[Path]:
        return [safe_target(self.models_dir, spec.repo_id, f.path) for f in spec.files]

    def done_bytes(self, spec: DownloadSpec) -> int:
        done = 0
        for f, target in zip(spec.files, self.targets(spec), strict=True):
            if _size(target) == f.size:
                done += f.size
            else:
                done += min(f.size, _size(self.part_path(spec, f)))
        return done

    def pending(self) -> list[DownloadSpec]:
        """Downloads started before (this run or an earlier one) and not finished."""
        found = []
        for job in sorted(self.staging.glob("*.json")):
            try:
                found.append(DownloadSpec.from_json(json.loads(job.read_text())))
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return found

    def discard(self, spec: DownloadSpec) -> None:
        for f in spec.files:
            self.part_path(spec, f).unlink(missing_ok=True)
        self.job_file(spec).unlink(missing_ok=True)

    # -- running ----------------------------------------------------------------------------

    def run(self, spec: DownloadSpec, control: DownloadControl | None = None,
            report: Report | None = None) -> DownloadProgress:  # fmt: skip
        """Download ``spec``; return its final progress (DONE, PAUSED or CANCELLED).

        Raises the typed error (space, checksum, access, network) when it fails; the parts
        stay for a resume except after a checksum mismatch.
        """
        control = control or DownloadControl()
        targets = self.targets(spec)  # every name checked before a byte is written
        self.staging.mkdir(parents=True, exist_ok=True)
        lock = self.staging / f"{spec.key}.lock"
        with _exclusive(lock, spec):
            final = self._run(spec, targets, control, ProgressMeter(spec, report or (lambda _p: None)))
            if final.state.finished:
                lock.unlink(missing_ok=True)  # still held: a later taker makes a new one
            return final

    def _run(self, spec: DownloadSpec, targets: list[Path], control: DownloadControl,
             meter: ProgressMeter) -> DownloadProgress:  # fmt: skip
        meter.done = self.done_bytes(spec)
        self._check_space(spec, meter.done)
        _atomic_write(self.job_file(spec), json.dumps(spec.to_json()))
        try:
            for f, target in zip(spec.files, targets, strict=True):
                if _size(target) == f.size and not self.part_path(spec, f).exists():
                    continue  # renamed by an earlier run that stopped before the first part
                self._fetch(spec, f, control, meter)
            meter.emit(DownloadState.VERIFYING)
            # Parts 2..N first: the first part is what makes the model visible.
            for f, target in reversed(list(zip(spec.files, targets, strict=True))):
                part = self.part_path(spec, f)
                if part.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(part, target)
            self.job_file(spec).unlink(missing_ok=True)
            return meter.emit(DownloadState.DONE, targets[0])
        except _Stopped:
            if control.cancel.is_set():
                self.discard(spec)
                return meter.emit(DownloadState.CANCELLED)
            return meter.emit(DownloadState.PAUSED)

    def _check_space(self, spec: DownloadSpec, done: int) -> None:
        need = spec.total_size - done
        free = self.free_space(self.staging)
        if need + SPACE_MARGIN > free:
            raise NotEnoughSpace(
                f"Not enough space for {spec.title}: {format_bytes(need)} to download, "
                f"{format_bytes(free)} free in {self.models_dir} "
                f"(keeping {format_bytes(SPACE_MARGIN)} spare)."
            )

    def _fetch(self, spec: DownloadSpec, f: HubFile, control: DownloadControl, meter: ProgressMeter) -> None:
        part = self.part_path(spec, f)
        hasher = f.new_hasher()
        have = _size(part)
        if have > f.size:
            part.unlink()
            meter.done -= f.size
            have = 0
        if have:
            with open(part, "rb") as fh:
                while chunk := fh.read(CHUNK):
                    hasher.update(chunk)
        failures = 0
        while have < f.size:
            if control.stop_requested:
                raise _Stopped
            before = have
            try:
                have = self._stream(spec, f, part, have, hasher, control, meter)
                if have == before:
                    raise _Transient(HubProtocolError(f"The server sent no data for {f.name}."))
            except _Restart:
                part.unlink(missing_ok=True)
                meter.done -= have
                have, hasher = 0, f.new_hasher()
                continue
            except _Transient as exc:
                have = _size(part)
                failures += 1
                if failures > self.retries:
                    percent = int(have * 100 / f.size) if f.size else 0
                    raise type(exc.error)(
                        f"{exc.error.message} Gave up after {self.retries} retries; "
                        f"it resumes from {percent}% next time."
                    ) from None
                _sleep_unless(control, max(exc.wait, self.backoff_s * 2 ** (failures - 1)))
                continue
            failures = 0
        digest, expected = hasher.hexdigest(), f.expected_digest
        if expected is not None and digest != expected:
            part.unlink(missing_ok=True)
            meter.done -= f.size
            check = "SHA-256" if f.sha256 else "git SHA-1"
            raise ChecksumMismatch(
                f"{f.name} failed its {check} check (got {digest[:12]}…, the Hub says {expected[:12]}…); "
                "it was deleted, nothing entered the library."
            )

    def _stream(self, spec: DownloadSpec, f: HubFile, part: Path, have: int, hasher: Any,
                control: DownloadControl, meter: ProgressMeter) -> int:  # fmt: skip
        """One request from ``have``; returns the new size of the part."""
        import httpx

        from engine.hub.stdlib_transport import readinto_of

        url = self.access.resolve_url(spec.repo_id, spec.commit, f.path)
        headers = {**self.access.headers(), "Accept-Encoding": "identity"}
        if have:
            headers["Range"] = f"bytes={have}-"
        timeout = httpx.Timeout(30.0, read=self.read_timeout_s)
        try:
            request = self.session.build_request("GET", url, headers=headers, timeout=timeout)
            response = self.session.send(request, stream=True)
        except httpx.TimeoutException:
            raise _Transient(HubUnreachable(f"The Hub did not answer for {f.name}.")) from None
        except (httpx.ConnectError, httpx.NetworkError, httpx.RemoteProtocolError):
            raise _Transient(HubUnreachable(f"Cannot reach the Hub to download {f.name}.")) from None
        try:
            status = response.status_code
            if status == 429 or status >= 500:
                raise _Transient(
                    status_error(status, f.name), _retry_after(response.headers.get("Retry-After"))
                )
            if status not in (200, 206):
                raise status_error(status, f.name)
            if status == 200 and have:
                raise _Restart
            if status == 206:
                start = _range_start(response.headers.get("Content-Range"))
                if start != have:
                    raise _Transient(HubProtocolError(f"The server sent the wrong byte range for {f.name}."))
            # Unbuffered: chunks are large, and a full disk must fail in write(), not in close().
            with open(part, "r+b" if have else "wb", buffering=0) as out:
                if have:
                    out.seek(have)
                    out.truncate()
                # else "wb" has emptied it: a truncate to zero would make ext4 (auto_da_alloc)
                # start writing the whole part out when it is closed, 50 ms of a 250 MB file.
                read = readinto_of(response) or ChunkReader(response.iter_raw()).readinto
                pool = BufferPool(SINK_BUFFERS, SINK_BATCH)
                sink = Sink(out, pool)
                buffer, filled = pool.take(), 0
                flushed = time.monotonic()
                try:
                    while have < f.size:
                        # Never more than the file has: the rest is not read at all.
                        space = buffer[filled : filled + min(len(buffer) - filled, f.size - have)]
                        # As the network delivers it: one read, what has arrived.
                        n = read(space)
                        if not n:
                            break
                        # Hashed here, just read and still in this core's cache; the sink
                        # thread only writes.
                        hasher.update(space[:n])
                        filled += n
                        have += n
                        meter.add(n)
                        # A slow download reaches the disk often too: a kill loses little.
                        if filled == len(buffer) or time.monotonic() - flushed > SINK_FLUSH_S:
                            sink.put(buffer, filled)
                            buffer, filled, flushed = pool.take(), 0, time.monotonic()
                        if sink.error is not None:
                            break
                        if control.stop_requested:
                            raise _Stopped
                except httpx.TimeoutException:
                    raise _Transient(HubUnreachable(f"The download of {f.name} stalled.")) from None
                except (httpx.RemoteProtocolError, httpx.NetworkError):
                    # Dropped, or a Content-Length that promised more than came.
                    raise _Transient(
                        HubProtocolError(f"The connection broke while downloading {f.name}.")
                    ) from None
                finally:
                    # What came is kept, whatever ended the loop: a resume starts after it.
                    sink.put(buffer, filled)
                    error = sink.close()
                    if error is not None:
                        if error.errno in (errno.ENOSPC, errno.EDQUOT):
                            raise NotEnoughSpace(
                                f"The disk filled up while downloading {f.name} "
                                f"({format_bytes(meter.done)} of {format_bytes(spec.total_size)}); "
                                "free some space and resume."
                            ) from None
                        raise error
                have = out.tell()
            # A body that ended early with honest framing (a short range) is progress too.
            return have
        finally:
            response.close()


@contextlib.contextmanager
def _exclusive(lock: Path, spec: DownloadSpec) -> Iterator[None]:
    """One writer per download across processes (the window and ``hearth pull`` share the
    models folder); the kernel drops the lock when its holder dies, SIGKILL included."""
    import fcntl

    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise HubError(f"{spec.title} is already being downloaded by another Hearth.") from None
        yield
    finally:
        os.close(fd)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _range_start(value: str | None) -> int | None:
    if not value or not value.startswith("bytes "):
        return None
    try:
        return int(value[6:].split("-", 1)[0])
    except ValueError:
        return None


def _retry_after(value: str | None) -> float:
    try:
        return min(30.0, max(0.0, float(value))) if value else 0.0
    except ValueError:
        return 0.0


def _sleep_unless(control: DownloadControl, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not control.stop_requested:
        time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
