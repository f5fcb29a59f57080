"""A GGUF header read from the Hub with HTTP range requests, through the same catalog
reader (and the same checks) as a file on disk, so a remote plan is the exact plan.

``RemoteBytes`` is the file-like the catalog's ``Reader`` reads from: forward-only streamed
ranges, the first one 1 MiB (most headers end there), later ones 8x larger, each closed as
soon as the header ends, the final URL (past the Hub's redirect to its CDN) reused.
What was read is kept, up to a hard cap, so a hostile header cannot make us hold or
download more than ``MAX_REMOTE_HEADER_BYTES``; the kept prefix is what ``HeaderCache``
stores, so planning the same file again costs nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from engine.base.errors import HubNotFound, HubProtocolError
from engine.catalog import ModelInfo, inspect_model, inspect_projector
from engine.catalog.gguf_reader import Reader, invalid_file
from engine.hub.access import HubAccess, hub_errors, status_error
from engine.hub.files import HubFile, QuantOption, RepoFiles

MAX_REMOTE_HEADER_BYTES = 32 << 20
FIRST_RANGE = 1 << 20
READ_WINDOW = 64 << 10  # the Reader's refill size: what it asks beyond the header is small
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")
_TIMEOUT_S = 30.0


@dataclass
class FetchStats:
    """HTTP requests made (redirects included) and body bytes received, for one plan."""

    requests: int = 0
    bytes: int = 0


class RemoteBytes:
    """``seek``/``read`` over one file on the Hub, fetched as streamed byte ranges."""

    def __init__(
        self,
        session: Any,  # httpx.Client (huggingface_hub's session)
        url: str,
        size: int,
        headers: dict[str, str],
        stats: FetchStats,
        cached: bytes = b"",
        cap: int = MAX_REMOTE_HEADER_BYTES,
        label: Path | None = None,
    ) -> None:
        self.session = session
        self.url = url
        self.size = size
        self.headers = headers
        self.stats = stats
        self.cap = cap
        self.label = label or Path(url)
        self.data = bytearray(cached[:cap])
        self.pos = 0
        self._response: Any = None
        self._chunks: Iterator[bytes] | None = None
        self._range_end = 0

    def seek(self, pos: int, whence: int = 0) -> int:
        self.pos = pos if whence == 0 else self.pos + pos
        return self.pos

    def tell(self) -> int:
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n < 0 else min(self.pos + n, self.size)
        if end > self.cap:
            raise invalid_file(
                self.label,
                f"corrupt metadata: header larger than {self.cap >> 20} MiB (not read from the Hub)",
            )
        self._fill(end)
        out = bytes(self.data[self.pos : end])
        self.pos = end
        return out

    def close(self) -> None:
        if self._response is not None:
            self._response.close()
            self._response = None
            self._chunks = None

    def _fill(self, end: int) -> None:
        while len(self.data) < end:
            if self._chunks is None:
                self._open(len(self.data), end)
            assert self._chunks is not None
            with hub_errors(f"the header of {self.label.name}"):
                chunk = next(self._chunks, None)
            if chunk is None or len(self.data) + len(chunk) > self._range_end:
                if chunk:
                    kept = chunk[: self._range_end - len(self.data)]
                    self.data += kept
                    self.stats.bytes += len(kept)
                # The range ended (or the server stopped early): ask again from here.
                self.close()
                continue
            self.data += chunk
            self.stats.bytes += len(chunk)

    def _open(self, start: int, need: int) -> None:
        import httpx

        # Most headers end inside the first MiB. Past it (a large vocabulary: Gemma 3's is
        # 6.6 MB), ranges 8x larger, streamed and closed as soon as the header ends: up to
        # 8 MiB in two ranges. An open-ended range would be one fewer request for the
        # largest headers but lets the socket buffers pull megabytes of weights.
        stop = FIRST_RANGE if start == 0 else max(need, start * 8)
        stop = min(stop, self.size, self.cap)
        headers = {**self.headers, "Range": f"bytes={start}-{stop - 1}", "Accept-Encoding": "identity"}
        what = f"the header of {self.label.name}"
        with hub_errors(what):
            request = self.session.build_request("GET", self.url, headers=headers, timeout=_TIMEOUT_S)
            response = self.session.send(request, stream=True)
        self.stats.requests += 1 + len(response.history)
        if response.history:
            self.url = str(response.url)  # the CDN's address: later ranges skip the redirect
        if response.status_code not in (200, 206):
            response.close()
            raise status_error(response.status_code, what)
        if response.status_code == 200:
            if start != 0:
                response.close()
                raise HubProtocolError(f"The server ignored the byte range asked for ({what}).")
            stop = min(self.size, self.cap)  # the whole file comes: read what the header needs
        if response.status_code == 206:
            m = _CONTENT_RANGE.match(response.headers.get("Content-Range", ""))
            if m is None or int(m[1]) != start:
                response.close()
                raise HubProtocolError(f"The server sent the wrong byte range ({what}).")
            stop = min(stop, int(m[2]) + 1)
        self._response = response
        self._range_end = stop
        progress_before = len(self.data)
        raw = response.iter_raw()  # as received: a chunker would lose its bytes on a drop

        def chunks() -> Iterator[bytes]:
            # a dropped connection or a lying Content-Length: what came is kept
            with contextlib.suppress(httpx.RemoteProtocolError):
                yield from raw
            if len(self.data) == progress_before:
                raise HubProtocolError(f"The server sent no data for {what}.")

        self._chunks = chunks()


class HeaderCache:
    """Header prefixes read from the Hub, one file per published SHA-256 (or commit and
    path): the bytes of a commit never change, so an entry never goes stale. The oldest
    entries go once the folder passes ``limit`` bytes (a large vocabulary's header is 5-8 MB,
    and browsing a few repositories reads dozens)."""

    def __init__(self, folder: Path | None, limit: int = 256 << 20) -> None:
        self.folder = folder
        self.limit = limit

    def _file(self, key: str) -> Path | None:
        return self.folder / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.bin" if self.folder else None

    def get(self, key: str) -> bytes:
        path = self._file(key)
        try:
            data = path.read_bytes()[:MAX_REMOTE_HEADER_BYTES] if path else b""
            if path is not None:
                os.utime(path)  # recently used: evicted last
            return data
        except OSError:
            return b""

    def put(self, key: str, data: bytes) -> None:
        path = self._file(key)
        if path is None or not data:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
            self._evict(keep=path)
        except OSError:
            pass  # a cache that cannot be written only costs a re-read

    def _evict(self, keep: Path) -> None:
        assert self.folder is not None
        entries = []
        for entry in self.folder.glob("*.bin"):
            with contextlib.suppress(OSError):
                st = entry.stat()
                entries.append((st.st_mtime_ns, st.st_size, entry))
        total = sum(size for _, size, _ in entries)
        for _, size, entry in sorted(entries, key=lambda e: e[0]):
            if total <= self.limit:
                break
            if entry != keep:
                entry.unlink(missing_ok=True)
                total -= size


@dataclass(frozen=True)
class RemoteInspection:
    info: ModelInfo
    requests: int  # HTTP requests made for the header(s), redirects included
    bytes_read: int  # body bytes received
    from_cache: bool


def cache_key(listing: RepoFiles, f: HubFile) -> str:
    return f.sha256 or f"{listing.repo_id}@{listing.commit}/{f.path}"


def remote_path(repo_id: str, file_path: str) -> Path:
    """The path a remote file's ``ModelInfo`` carries: ``owner/name/file`` (never opened)."""
    return Path(repo_id, *PurePosixPath(file_path).parts)


def inspect_remote(
    access: HubAccess,
    listing: RepoFiles,
    option: QuantOption,
    cache: HeaderCache | None = None,
    session: Any = None,
) -> RemoteInspection:
    """``inspect_model`` of a quantization on the Hub, every part's header read by range."""
    return _inspect(access, listing, option.files, inspect_model, cache, session)


def inspect_remote_projector(
    access: HubAccess,
    listing: RepoFiles,
    projector: HubFile,
    cache: HeaderCache | None = None,
    session: Any = None,
) -> RemoteInspection:
    """``inspect_projector`` of a vision projector (mmproj) on the Hub, read by range: its
    memory belongs in the plan of every quantization it pairs with."""
    return _inspect(access, listing, (projector,), inspect_projector, cache, session)


def _inspect(
    access: HubAccess,
    listing: RepoFiles,
    files: tuple[HubFile, ...],
    inspect: Callable[..., ModelInfo],
    cache: HeaderCache | None,
    session: Any,
) -> RemoteInspection:
    from huggingface_hub import get_session

    session = session or get_session()
    cache = cache or HeaderCache(None)
    stats = FetchStats()
    by_path = {remote_path(listing.repo_id, f.path): f for f in files}
    opened: list[tuple[HubFile, RemoteBytes]] = []
    headers = access.headers()

    @contextlib.contextmanager
    def opener(path: Path) -> Iterator[Reader]:
        f = by_path.get(path)
        if f is None:
            raise HubNotFound(f"{path.name} is not in {listing.repo_id} at this commit.")
        url = access.resolve_url(listing.repo_id, listing.commit, f.path)
        fh = RemoteBytes(session, url, f.size, headers, stats, cache.get(cache_key(listing, f)), label=path)
        opened.append((f, fh))
        try:
            yield Reader(path, fh, f.size, read_size=READ_WINDOW)  # type: ignore[arg-type]
        finally:
            fh.close()

    info = inspect(remote_path(listing.repo_id, files[0].path), opener=opener)
    for f, fh in opened:
        cache.put(cache_key(listing, f), bytes(fh.data))
    return RemoteInspection(info, stats.requests, stats.bytes, from_cache=stats.requests == 0)
