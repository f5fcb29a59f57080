"""The model library: the folders and files the user gave Hearth, indexed where they lie.

Plain Python (no Qt): the GUI wraps it and runs ``rescan`` off the GUI thread.

- Folders are scanned recursively for ``*.gguf``; dropped files are indexed in place,
  never copied. A split model (``x-00001-of-00003.gguf`` ...) is one entry, its first
  part, with the other parts grouped under it.
- Files that fail validation stay in the library as entries with the reason, so the UI
  can say why a model cannot be used.
- Each projector is paired with the text models whose embedding size equals its
  projection size, best guess first (same name stem, then same folder).
- Folders, files and removals are remembered across runs in a JSON file (written
  atomically), together with the inspection results, so a restart or a rescan only
  re-reads files whose size or modification time changed.
- Files that disappear simply drop out on the next rescan. ``remove`` only forgets:
  it never deletes anything on disk.

This module holds ``Library``, its ``LibraryEntry`` values and the state file; finding the
files on disk is ``engine/library/scan.py``, pairing projectors with models
``engine/library/pairing.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from engine.catalog import (
    InvalidModelFile,
    ModelInfo,
    ModelKind,
    inspect,
    known_architectures,
    split_part_paths,
)
from engine.library.pairing import pair_files
from engine.library.scan import Candidate, Identity, absolute, discover, identity_of, is_within

_log = logging.getLogger(__name__)

_STATE_VERSION = 1
# Bump when catalog.inspect starts reporting something different for the same file, so
# results cached by an older Hearth are not reused.
_INSPECT_VERSION = 2


@dataclass(frozen=True)
class LibraryEntry:
    """One model file (or split model) in the library.

    Exactly one of ``info`` and ``error`` is set: ``error`` is the one-line reason the
    file cannot be used. ``projectors`` (for a text model) and ``models`` (for a
    projector) list the files it pairs with, best match first.
    """

    path: Path  # the file; for a split model, its first part
    info: ModelInfo | None
    error: str | None
    projectors: tuple[Path, ...] = ()
    models: tuple[Path, ...] = ()
    parts: tuple[Path, ...] = ()  # split model: every part on disk, in order; else ()
    root: Path | None = None  # the library folder it was found in; None when added as a file
    size: int = 0  # bytes on disk, all parts together

    @property
    def ok(self) -> bool:
        return self.info is not None

    @property
    def kind(self) -> ModelKind | None:
        return self.info.kind if self.info is not None else None

    @property
    def is_projector(self) -> bool:
        return self.info is not None and self.info.kind is ModelKind.PROJECTOR

    @property
    def display_name(self) -> str:
        return self.info.display_name if self.info is not None else self.path.stem


@dataclass(frozen=True)
class _Cached:
    identity: Identity
    info: ModelInfo | None
    error: str | None


class Library:
    """Folders and files of GGUF models, with validation results and projector pairing.

    ``state_path`` (optional) is the JSON file where the library is remembered; it is
    read on construction and rewritten atomically after every change. ``inspector`` is
    the function that validates one file (``catalog.inspect``; replaceable in tests).

    Reading: ``entries``, ``get(path)``, ``models()``, ``projectors()``, ``invalid()``,
    ``projectors_for(model)``, ``folders``, ``files``. Changing (each rescans and saves):
    ``add(path)`` for a drop, ``add_folder``, ``add_file``, ``remove``, ``rescan()``.
    ``load_error`` / ``save_error`` say why the state file could not be read / written
    (the library keeps working in memory).

    Thread-safety: every method may be called from any thread. ``entries`` returns an
    immutable snapshot; scans are serialised. Calls that scan block for the scan, so the
    GUI should make them from a worker thread.
    """

    def __init__(
        self,
        state_path: Path | str | None = None,
        *,
        inspector: Callable[[Path], ModelInfo] = inspect,
        max_workers: int | None = None,
    ) -> None:
        self._state_path = Path(state_path) if state_path is not None else None
        self._inspect = inspector
        self._max_workers = max_workers or min(4, os.cpu_count() or 1)
        self._lock = threading.RLock()  # guards the fields below
        self._scan_lock = threading.Lock()  # one scan at a time
        self._folders: list[Path] = []
        self._files: list[Path] = []
        self._excluded: set[Path] = set()
        self._cache: dict[Path, _Cached] = {}
        # Entries and an index of every path (split parts too), replaced together so a
        # reader on another thread never sees one without the other.
        self._snapshot: tuple[tuple[LibraryEntry, ...], dict[Path, LibraryEntry]] = ((), {})
        self.load_error: str | None = None  # why the saved state could not be read
        self.save_error: str | None = None  # why the last save failed (None: saved)
        self._saved_text: str | None = None
        self._load()

    # ---------------------------------------------------------------- reading

    @property
    def folders(self) -> tuple[Path, ...]:
        """The remembered folders, in the order they were added."""
        with self._lock:
            return tuple(self._folders)

    @property
    def files(self) -> tuple[Path, ...]:
        """The remembered individual files, in the order they were added."""
        with self._lock:
            return tuple(self._files)

    @property
    def entries(self) -> tuple[LibraryEntry, ...]:
        """Every entry of the last scan, valid or not, sorted by path."""
        return self._snapshot[0]

    def get(self, path: Path | str) -> LibraryEntry | None:
        """The entry for ``path`` (any part of a split model), or None."""
        return self._snapshot[1].get(absolute(path))

    def models(self) -> tuple[LibraryEntry, ...]:
        """Valid text models (first parts only for split models)."""
        return tuple(e for e in self.entries if e.info is not None and e.info.kind is ModelKind.TEXT)

    def projectors(self) -> tuple[LibraryEntry, ...]:
        """Valid projectors (mmproj)."""
        return tuple(e for e in self.entries if e.is_projector)

    def invalid(self) -> tuple[LibraryEntry, ...]:
        """Entries that failed validation, with their reason in ``error``."""
        return tuple(e for e in self.entries if e.error is not None)

    def projectors_for(self, model: LibraryEntry | Path | str) -> tuple[LibraryEntry, ...]:
        """The projector entries that fit the text model ``model``, best first."""
        entry = self.get(model.path if isinstance(model, LibraryEntry) else model)
        if entry is None:
            return ()
        index = self._snapshot[1]
        return tuple(index[p] for p in entry.projectors if p in index)

    # ---------------------------------------------------------------- changing

    def add(self, path: Path | str) -> tuple[LibraryEntry, ...]:
        """Add what the user dropped: a folder (scanned recursively) or a file.

        Returns the entries that came from ``path``. A file that is not a valid GGUF is
        still added, as an entry with its reason.
        """
        target = absolute(path)
        if target.is_dir():
            return self.add_folder(target)
        return (self.add_file(target),)

    def add_folder(self, path: Path | str) -> tuple[LibraryEntry, ...]:
        """Remember ``path`` and scan it; return the entries found under it."""
        folder = absolute(path)
        with self._lock:
            self._excluded.discard(folder)
            if folder not in self._folders:
                self._folders.append(folder)
        entries = self.rescan()
        return tuple(e for e in entries if is_within(e.path, folder))

    def add_file(self, path: Path | str) -> LibraryEntry:
        """Remember one file (indexed where it is) and return its entry.

        Any part of a split model adds the model (its first part).
        """
        file = absolute(path)
        parts = split_part_paths(file)
        if parts:
            file = parts[0]
        with self._lock:
            self._excluded.discard(file)
            if file not in self._files:
                self._files.append(file)
        self.rescan()
        entry = self.get(file)
        if entry is None:  # vanished between adding and scanning
            return LibraryEntry(path=file, info=None, error="file not found")
        return entry

    def remove(self, path: Path | str) -> bool:
        """Take ``path`` (a file, split model or folder) out of the library.

        Never touches the disk. A file inside a library folder is remembered as removed
        so the next scan does not bring it back. Returns False when ``path`` was not in
        the library.
        """
        target = absolute(path)
        entry = self.get(target)
        if entry is not None:
            target = entry.path
        changed = False
        with self._lock:
            if target in self._folders:
                self._folders.remove(target)
                changed = True
            if target in self._files:
                self._files.remove(target)
                changed = True
            if any(is_within(target, f) and target != f for f in self._folders):
                self._excluded.add(target)
                changed = True
            if not changed:
                return False
        self.rescan()
        return True

    def rescan(self) -> tuple[LibraryEntry, ...]:
        """Walk the folders and files again; return the new entries.

        Only files whose size or modification time changed are inspected again.
        Missing folders and files produce no entries and no error.
        """
        with self._scan_lock:
            with self._lock:
                folders, files, excluded = list(self._folders), list(self._files), set(self._excluded)
            candidates = discover(folders, files, excluded)
            results = self._inspect_all(candidates)
            entries = _paired(results)
            index: dict[Path, LibraryEntry] = {}
            for entry in entries:
                for part in entry.parts or (entry.path,):
                    index[part] = entry
                index[entry.path] = entry
            with self._lock:
                self._snapshot = (entries, index)
                live = {c.path for c in candidates}
                # Forget cached results of files no longer in the library.
                self._cache = {p: c for p, c in self._cache.items() if p in live}
            self._save()
            return entries

    # ---------------------------------------------------------------- internals

    def _inspect_all(self, candidates: list[Candidate]) -> list[LibraryEntry]:
        pending: list[tuple[int, Candidate, Identity]] = []
        results: list[LibraryEntry | None] = [None] * len(candidates)
        for i, c in enumerate(candidates):
            identity = identity_of(c.parts or (c.path,))
            if identity is None:
                continue  # vanished while we were looking
            if c.missing is not None:
                results[i] = _entry(c, None, c.missing, identity)
                continue
            with self._lock:
                cached = self._cache.get(c.path)
            if cached is not None and cached.identity == identity:
                results[i] = _entry(c, cached.info, cached.error, identity)
            else:
                pending.append((i, c, identity))

        def run(item: tuple[int, Candidate, Identity]) -> tuple[int, LibraryEntry]:
            i, c, identity = item
            info, error = self._inspect_one(c.path)
            if error is None or not error.startswith("cannot read"):
                # Read failures may be passing (permissions, a drive waking up): retry
                # them next scan even if the file itself did not change.
                with self._lock:
                    self._cache[c.path] = _Cached(identity, info, error)
            return i, _entry(c, info, error, identity)

        # Inspection reads files and runs numpy, both of which release the GIL, so a
        # few threads overlap disk waits on a cold cache.
        if len(pending) > 1 and self._max_workers > 1:
            with ThreadPoolExecutor(self._max_workers, thread_name_prefix="hearth-scan") as pool:
                done = list(pool.map(run, pending))
        else:
            done = [run(item) for item in pending]
        for i, entry in done:
            results[i] = entry
        return [r for r in results if r is not None]

    def _inspect_one(self, path: Path) -> tuple[ModelInfo | None, str | None]:
        try:
            return self._inspect(path), None
        except InvalidModelFile as exc:
            return None, exc.reason
        except OSError as exc:  # e.g. the file vanished or a drive went away mid-read
            return None, f"cannot read the file: {exc.strerror or exc}"
        except Exception as exc:
            # A bug on one odd file must not take the whole scan (and the GUI) down:
            # list the file with the failure, and leave a trace for the developers.
            _log.exception("inspecting %s failed", path)
            return None, f"could not be read: internal error ({type(exc).__name__})"

    # ---------------------------------------------------------------- persistence

    def _load(self) -> None:
        if self._state_path is None or not self._state_path.exists():
            return
        try:
            state = json.loads(self._state_path.read_text(encoding="utf-8"))
            if not isinstance(state, dict) or state.get("version") != _STATE_VERSION:
                raise ValueError("unknown format")
            self._folders = _unique_paths(state.get("folders", ()))
            self._files = _unique_paths(state.get("files", ()))
            self._excluded = set(_unique_paths(state.get("excluded", ())))
        except (OSError, ValueError, TypeError) as exc:
            self.load_error = f"could not read the saved library ({exc}); starting empty"
            return
        cache = state.get("cache")
        if isinstance(cache, dict) and cache.get("fingerprint") == _fingerprint():
            for key, item in (cache.get("items") or {}).items():
                with contextlib.suppress(KeyError, TypeError, ValueError, AttributeError):
                    path = Path(key)
                    identity = tuple((str(n), int(s), int(m)) for n, s, m in item["identity"])
                    info = ModelInfo.from_json(item["info"]) if item.get("info") is not None else None
                    error = item.get("error")
                    if (info is None) == (error is None):
                        continue
                    self._cache[path] = _Cached(identity, info, error)

    def _save(self) -> None:
        if self._state_path is None:
            return
        with self._lock:
            state = {
                "version": _STATE_VERSION,
                "folders": [str(p) for p in self._folders],
                "files": [str(p) for p in self._files],
                "excluded": sorted(str(p) for p in self._excluded),
                "cache": {
                    "fingerprint": _fingerprint(),
                    "items": {
                        str(path): {
                            "identity": [list(x) for x in c.identity],
                            "info": c.info.to_json() if c.info is not None else None,
                            "error": c.error,
                        }
                        for path, c in self._cache.items()
                    },
                },
            }
        text = json.dumps(state, indent=1, ensure_ascii=False)
        if text == self._saved_text:
            return  # a rescan that changed nothing costs no write and no fsync
        try:
            _atomic_write(self._state_path, text)
            self._saved_text = text
        except OSError as exc:
            self.save_error = f"could not save the library: {exc.strerror or exc}"
        else:
            self.save_error = None


def _entry(c: Candidate, info: ModelInfo | None, error: str | None, identity: Identity) -> LibraryEntry:
    return LibraryEntry(
        path=c.path,
        info=info,
        error=error,
        parts=c.parts,
        root=c.root,
        size=sum(size for _, size, _ in identity),
    )


def _paired(entries: list[LibraryEntry]) -> tuple[LibraryEntry, ...]:
    """The entries with what each valid one pairs with (``pairing.pair_files``)."""
    files = [(e.path, e.info) for e in entries if e.info is not None]
    matches = iter(pair_files(files))  # one per valid entry, in order
    out: list[LibraryEntry] = []
    for e in entries:
        if e.info is None:
            out.append(e)
        elif e.info.kind is ModelKind.TEXT:
            out.append(dataclasses.replace(e, projectors=next(matches)))
        else:
            out.append(dataclasses.replace(e, models=next(matches)))
    return tuple(out)


# -------------------------------------------------------------------- the state file


def _atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a crash leaves either the old or the new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


_fingerprint_cache: list[str] = []


def _fingerprint() -> str:
    """Changes when cached inspection results may no longer hold (new Hearth, new llama.cpp)."""
    if not _fingerprint_cache:
        h = hashlib.sha256(f"{_INSPECT_VERSION}".encode())
        for name in sorted(known_architectures()):
            h.update(name.encode() + b"\0")
        _fingerprint_cache.append(h.hexdigest()[:16])
    return _fingerprint_cache[0]


def _unique_paths(items: Iterable[object]) -> list[Path]:
    out: list[Path] = []
    for item in items:
        if not isinstance(item, str):
            raise TypeError("paths must be strings")
        p = absolute(item)
        if p not in out:
            out.append(p)
    return out


__all__ = ["Library", "LibraryEntry"]
