"""A local fake of the parts of the Hugging Face Hub that ``huggingface_hub`` and Hearth use.

Real HTTP on loopback (``http.server`` in a thread), so tests, benchmarks and subprocesses
(``hearth pull``) all talk to it as they would to the Hub:

- ``GET /api/models?search=&filter=&sort=&limit=``: search, paginated with a ``Link`` header
  (``rel="next"``) as the Hub does, 1,000 per page;
- ``GET /api/models/{repo}`` and ``/api/models/{repo}/revision/{rev}`` (``?blobs=true`` adds
  sizes and LFS SHA-256), ``GET /api/models/{repo}/tree/{rev}``;
- ``GET|HEAD /{repo}/resolve/{rev}/{file}``: ``X-Repo-Commit``, ``X-Linked-Size``, ``ETag``,
  then a 302 to ``/cdn/{repo}/{file}`` on another host name (``localhost`` rather than
  ``127.0.0.1``) that serves bytes with ``Range`` support, as the Hub's CDN does.

A gated repository's metadata is public; its files want ``Authorization: Bearer <token>``
(401 without one, 403 with a wrong one), as on the Hub. ``Faults`` injects what real
networks and servers do: a connection dropped at byte N, a wrong published hash, 429s, a
slow trickle, a lying ``Content-Length``, a truncated range. Every request is logged
(``FakeHub.log``) with the bytes of body sent.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

PAGE_SIZE = 1000
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class FakeFile:
    path: str
    source: Path
    fixed_sha256: str | None = None  # for huge sparse files: hashing 100 GB of zeros takes minutes

    @property
    def size(self) -> int:
        return self.source.stat().st_size

    @property
    def sha256(self) -> str:
        return self.fixed_sha256 or _sha256_of(self.source)


_HASHES: dict[tuple[Path, int, int], str] = {}


def _sha256_of(path: Path) -> str:
    st = path.stat()
    key = (path.resolve(), st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        _HASHES[key] = h.hexdigest()
    return _HASHES[key]


@dataclass
class FakeRepo:
    repo_id: str
    files: list[FakeFile] = field(default_factory=list)
    gated: bool = False
    downloads: int = 0
    likes: int = 0
    license: str = "apache-2.0"
    last_modified: str = "2026-01-02T03:04:05.000Z"
    commit: str = COMMIT
    in_git: set[str] = field(default_factory=set)  # paths stored in git itself, not LFS

    def file(self, path: str) -> FakeFile | None:
        return next((f for f in self.files if f.path == path), None)


@dataclass
class Faults:
    """What goes wrong, set by a test; counters count down as they fire."""

    drop_at: int | None = None  # close the connection once this absolute offset is sent
    drops: int = 1  # how many requests drop at drop_at
    wrong_hash: set[str] = field(default_factory=set)  # file paths published with a wrong sha256
    rate_limited: int = 0  # the next N requests (any path) get 429
    trickle_bytes_per_s: int = 0  # CDN bodies sent this slowly
    lie_length: int = 0  # Content-Length claims this many bytes more than the body holds
    lies: int = 1
    truncate_ranges: int = 0  # the next N ranged CDN answers stop halfway (206, honest headers)
    status: dict[str, int] = field(default_factory=dict)  # path substring -> forced status


@dataclass(frozen=True)
class LoggedRequest:
    method: str
    path: str
    range: str | None
    authorization: str | None
    host: str
    status: int
    body_bytes: int


class FakeHub:
    def __init__(self, token: str = "hf_test_token") -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.faults = Faults()
        # How often each fault fired, by its field's name: a test asserts its fault was reached.
        self.fired: Counter[str] = Counter()
        self.token = token
        self._log: list[LoggedRequest] = []
        self._in_flight = 0
        self.bulk_results = 0  # a search for "bulk" returns this many synthetic repositories
        self._bulk: list[dict[str, object]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- setup ------------------------------------------------------------------------------

    def add_repo(
        self, repo_id: str, files: dict[str, Path], hashes: dict[str, str] | None = None, **kw: object
    ) -> FakeRepo:
        hashes = hashes or {}
        entries = [FakeFile(name, src, hashes.get(name)) for name, src in files.items()]
        repo = FakeRepo(repo_id, entries, **kw)  # type: ignore[arg-type]
        self.repos[repo_id] = repo
        return repo

    def start(self) -> FakeHub:
        hub = self

        class Handler(_Handler):
            fake = hub

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-hub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def cdn_url(self) -> str:
        return f"http://localhost:{self.port}"

    def record(self, entry: LoggedRequest) -> None:
        with self._lock:
            self._log.append(entry)

    def enter(self, delta: int) -> None:
        with self._lock:
            self._in_flight += delta

    def settle(self, timeout: float = 5.0) -> None:
        """Wait until no request is being answered: a client may have its answer before the
        handler has logged it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self._in_flight == 0:
                    return
            time.sleep(0.005)

    @property
    def log(self) -> list[LoggedRequest]:
        self.settle()
        with self._lock:
            return list(self._log)

    def clear_log(self) -> None:
        self.settle()
        with self._lock:
            self._log.clear()

    def take_rate_limit(self) -> bool:
        with self._lock:
            if self.faults.rate_limited > 0:
                self.faults.rate_limited -= 1
                self.fired["rate_limited"] += 1
                return True
        return False

    def take(self, name: str) -> bool:
        """Use up one of a counted fault (``drops``, ``lies``, ``truncate_ranges``)."""
        with self._lock:
            left = getattr(self.faults, name)
            if left > 0:
                setattr(self.faults, name, left - 1)
                self.fired[name] += 1
                return True
        return False

    # -- what the API says ---------------------------------------------------------------------

    def published_sha256(self, repo: FakeRepo, f: FakeFile) -> str:
        if f.path in self.faults.wrong_hash:
            self.fired["wrong_hash"] += 1
            return "0" * 64
        return f.sha256

    def published_git_oid(self, f: FakeFile) -> str:
        if f.path in self.faults.wrong_hash:
            self.fired["wrong_hash"] += 1
            return "0" * 40
        h = hashlib.sha1(f"blob {f.size}\0".encode())
        h.update(f.source.read_bytes())
        return h.hexdigest()

    def model_json(self, repo: FakeRepo, blobs: bool) -> dict[str, object]:
        siblings: list[dict[str, object]] = []
        for f in repo.files:
            entry: dict[str, object] = {"rfilename": f.path}
            if blobs and f.path in repo.in_git:
                entry |= {"size": f.size, "blobId": self.published_git_oid(f)}  # no LFS: git's own id
            elif blobs:
                sha = self.published_sha256(repo, f)
                entry |= {
                    "size": f.size,
                    "blobId": sha[:40],
                    "lfs": {"size": f.size, "sha256": sha, "pointerSize": 135},
                }
            siblings.append(entry)
        return {
            **self.summary_json(repo),
            "sha": repo.commit,
            "siblings": siblings,
            "cardData": {"license": repo.license},
        }

    def summary_json(self, repo: FakeRepo) -> dict[str, object]:
        return {
            "_id": hashlib.md5(repo.repo_id.encode()).hexdigest()[:24],
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "author": repo.repo_id.split("/")[0],
            "downloads": repo.downloads,
            "likes": repo.likes,
            "lastModified": repo.last_modified,
            "gated": "manual" if repo.gated else False,
            "private": False,
            "tags": ["gguf", f"license:{repo.license}"],
            "library_name": "gguf",
        }

    def search(self, query: str) -> list[dict[str, object]]:
        if query == "bulk" and self.bulk_results:
            if len(self._bulk) != self.bulk_results:  # built once, not once per page
                self._bulk = self._make_bulk()
            return self._bulk
        q = query.lower()
        found = [self.summary_json(r) for r in self.repos.values() if q in r.repo_id.lower()]
        return sorted(found, key=lambda r: -int(r["downloads"]))  # type: ignore[call-overload]

    def _make_bulk(self) -> list[dict[str, object]]:
        return [
            {
                "id": f"bulk-org/model-{i:05d}-GGUF",
                "author": "bulk-org",
                "downloads": self.bulk_results - i,
                "likes": i % 97,
                "lastModified": "2026-01-02T03:04:05.000Z",
                "gated": False,
                "tags": ["gguf", "license:mit"],
            }
            for i in range(self.bulk_results)
        ]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):  # clients hang up: that is the test
            super().handle_error(request, client_address)  # type: ignore[arg-type]


_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_INFO = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+?)(?:/revision/(?P<rev>[^/]+))?$")
_TREE = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/tree/(?P<rev>[^/]+)(?:/(?P<sub>.*))?$")
_CDN = re.compile(r"^/cdn/(?P<repo>[^/]+/[^/]+)/(?P<file>.+)$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self.fake.enter(1)
        try:
            self._serve(head=False)
        finally:
            self.fake.enter(-1)

    def do_HEAD(self) -> None:
        self.fake.enter(1)
        try:
            self._serve(head=True)
        finally:
            self.fake.enter(-1)

    # -- plumbing -------------------------------------------------------------------------

    def _record(self, status: int, sent: int) -> None:
        self.fake.record(
            LoggedRequest(
                self.command,
                self.path,
                self.headers.get("Range"),
                self.headers.get("Authorization"),
                self.headers.get("Host", ""),
                status,
                sent,
            )
        )

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self._record(status, 0 if self.command == "HEAD" else len(body))

    def _json(self, value: object, headers: dict[str, str] | None = None) -> None:
        self._send(200, json.dumps(value).encode(), {"Content-Type": "application/json", **(headers or {})})

    def _error(self, status: int, message: str, code: str | None = None) -> None:
        headers = {"Content-Type": "application/json", "X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        if status == 429:
            headers["Retry-After"] = "0"
        self._send(status, json.dumps({"error": message}).encode(), headers)

    def _authorized(self, repo: FakeRepo) -> bool:
        if not repo.gated:
            return True
        auth = self.headers.get("Authorization")
        if auth is None:
            self._error(401, "Access to this model is restricted. You must be authenticated.", "GatedRepo")
            return False
        if auth != f"Bearer {self.fake.token}":
            self._error(403, "Access to this model is restricted and you are not in the list.", "GatedRepo")
            return False
        return True

    def _serve(self, head: bool) -> None:
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = parse_qs(url.query)
        fake = self.fake
        for needle, status in fake.faults.status.items():
            if needle in path:
                fake.fired["status"] += 1
                self._error(status, f"forced {status}")
                return
        if fake.take_rate_limit():
            self._error(429, "You have been rate-limited.")
            return
        if path == "/api/models":
            self._search(query)
            return
        if m := _TREE.match(path):
            self._tree(m["repo"], m["rev"])
            return
        if m := _INFO.match(path):
            repo = fake.repos.get(m["repo"])
            if repo is None or (m["rev"] not in (None, "main", repo.commit)):
                self._error(404, "Repository not found", "RepoNotFound")
                return
            # As on the Hub: a gated repository's metadata is public, its files are not.
            self._json(fake.model_json(repo, blobs=query.get("blobs") == ["true"]))
            return
        if m := _RESOLVE.match(path):
            self._resolve(m["repo"], m["rev"], m["file"])
            return
        if m := _CDN.match(path):
            self._cdn(m["repo"], m["file"])
            return
        self._error(404, "Not found")

    def _search(self, query: dict[str, list[str]]) -> None:
        results = self.fake.search(query.get("search", [""])[0])
        limit = int(query.get("limit", [str(PAGE_SIZE)])[0])
        cursor = int(query.get("cursor", ["0"])[0])
        page_size = min(limit, PAGE_SIZE)
        page = results[cursor : cursor + page_size]
        headers = {}
        if cursor + page_size < len(results) and page_size < limit + cursor:
            params = "&".join(f"{k}={quote(v[0])}" for k, v in query.items() if k != "cursor")
            headers["Link"] = f'<{self.fake.url}/api/models?{params}&cursor={cursor + page_size}>; rel="next"'
        self._json(page, headers)

    def _tree(self, repo_id: str, rev: str) -> None:
        repo = self.fake.repos.get(repo_id)
        if repo is None:
            self._error(404, "Repository not found", "RepoNotFound")
            return
        items = []
        for f in repo.files:
            sha = self.fake.published_sha256(repo, f)
            items.append(
                {
                    "type": "file",
                    "oid": sha[:40],
                    "size": f.size,
                    "path": f.path,
                    "lfs": {"oid": sha, "size": f.size, "pointerSize": 135},
                }
            )
        self._json(items)

    def _resolve(self, repo_id: str, rev: str, file: str) -> None:
        repo = self.fake.repos.get(repo_id)
        if repo is None:
            self._error(404, "Repository not found", "RepoNotFound")
            return
        if not self._authorized(repo):
            return
        f = repo.file(file)
        if f is None or rev not in ("main", repo.commit):
            self._error(404, "Entry not found", "EntryNotFound")
            return
        sha = self.fake.published_sha256(repo, f)
        self._send(
            302,
            b"",
            {
                "Location": f"{self.fake.cdn_url}/cdn/{repo_id}/{quote(file)}",
                "X-Repo-Commit": repo.commit,
                "X-Linked-Size": str(f.size),
                "X-Linked-ETag": f'"{sha}"',
                "ETag": f'"{sha}"',
            },
        )

    def _cdn(self, repo_id: str, file: str) -> None:
        fake = self.fake
        repo = fake.repos.get(repo_id)
        f = repo.file(file) if repo else None
        if repo is None or f is None:
            self._error(404, "Not found")
            return
        size = f.size
        start, end = 0, size - 1
        status = 200
        if rng := self.headers.get("Range"):
            m = _RANGE.match(rng.strip())
            if m is None or int(m[1]) >= size:
                self._send(416, b"", {"Content-Range": f"bytes */{size}"})
                return
            start = int(m[1])
            end = min(int(m[2]), size - 1) if m[2] else size - 1
            status = 206
        if status == 206 and fake.take("truncate_ranges"):
            end = start + (end - start + 1) // 2 - 1  # a shorter range, honestly labelled
        count = end - start + 1
        claimed = count + (fake.faults.lie_length if fake.faults.lie_length and fake.take("lies") else 0)
        self.send_response(status)
        self.send_header("Content-Length", str(claimed))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{f.sha256}"')
        self.send_header("Content-Type", "application/octet-stream")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if self.command == "HEAD":
            self._record(status, 0)
            return
        stop = end + 1
        dropped = False
        if fake.faults.drop_at is not None and start <= fake.faults.drop_at < stop and fake.take("drops"):
            stop, dropped = fake.faults.drop_at, True
        sent = self._body(f.source, start, stop - start)
        self._record(status, sent)
        if dropped or claimed != count:
            self.close_connection = True
            try:
                self.wfile.flush()
                self.connection.shutdown(2)
            except OSError:
                pass

    def _body(self, source: Path, offset: int, count: int) -> int:
        rate = self.fake.faults.trickle_bytes_per_s
        sent = 0
        try:
            with open(source, "rb") as fh:
                if not rate:
                    # sendfile: the fake must not be what limits a throughput benchmark
                    self.wfile.flush()
                    while sent < count:
                        # in pieces, so a reader that hangs up early is logged with what it got
                        n = self.connection.sendfile(fh, offset + sent, min(count - sent, 64 << 10))
                        if n == 0:
                            break
                        sent += n
                    return sent
                fh.seek(offset)
                piece = max(1, rate // 20)
                while sent < count:
                    chunk = fh.read(min(piece, count - sent))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    self.wfile.flush()
                    sent += len(chunk)
                    time.sleep(len(chunk) / rate)
        except (ConnectionError, TimeoutError):
            self.close_connection = True
        return sent


def main() -> None:
    """``python -m tests.fake_hub [--bulk N] [--trickle B] FILE...``: serve files as repo
    ``test/models`` and, with ``--bulk``, N search results for "bulk" (``--trickle``: at most
    B bytes a second per body); prints the URL (manual runs, benchmarks
    that keep the fake out of the measured process)."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--bulk", type=int, default=0)
    parser.add_argument("--trickle", type=int, default=0, help="bytes per second per download")
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args()
    hub = FakeHub()
    hub.faults.trickle_bytes_per_s = args.trickle
    hub.add_repo("test/models", {p.name: p for p in args.files})
    hub.bulk_results = args.bulk
    if args.bulk:
        hub._bulk = hub._make_bulk()
    hub.start()
    print(hub.url, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
