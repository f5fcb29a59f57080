"""Finding model files on disk for the library: folders walked, split parts grouped, identities.

A split model (``x-00001-of-00003.gguf`` ...) is one candidate, its first part, with the other
parts grouped under it; one missing its first part is a candidate with the reason. A file's
identity (name, size, modification time of each part) tells the library when to inspect it again.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from engine.catalog import split_part_paths

SPLIT_RE = re.compile(r"^(?P<stem>.*)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)

Identity = tuple[tuple[str, int, int], ...]  # (file name, size, mtime_ns) for each part


@dataclass(frozen=True)
class Candidate:
    """A file found on disk, before inspection."""

    path: Path
    parts: tuple[Path, ...]
    missing: str | None  # set when a split model lacks its first part
    root: Path | None


def discover(folders: Iterable[Path], files: Iterable[Path], excluded: set[Path]) -> list[Candidate]:
    """Every GGUF under the folders plus the single files, split parts grouped."""
    found: dict[Path, Path | None] = {}  # file -> root folder (None for single files)
    for folder in folders:
        for file in _walk(folder, excluded):
            found.setdefault(file, folder)
    for file in files:
        if file in excluded:
            continue
        # A split model added as a file brings its other parts along.
        for part in split_part_paths(file) or (file,):
            if _is_file(part):
                found[part] = None  # a file added on its own is listed as such
    groups: dict[tuple[Path, str, int], dict[int, Path]] = {}
    candidates: list[Candidate] = []
    for file, root in found.items():
        m = SPLIT_RE.match(file.name)
        if m is None or int(m["count"]) < 2:
            candidates.append(Candidate(file, (), None, root))
            continue
        key = (file.parent, m["stem"], int(m["count"]))
        groups.setdefault(key, {})[int(m["index"])] = file
    for (parent, _stem, count), members in groups.items():
        first = members.get(1)
        if (first or parent / _part_name(members[min(members)], 1, count)) in excluded:
            continue  # the model was removed; its other parts go with it
        parts = tuple(members[i] for i in sorted(members))
        if first is None:
            lowest = parts[0]
            missing = f"split model is missing its first part ({_part_name(lowest, 1, count)})"
            candidates.append(Candidate(lowest, parts, missing, found[lowest]))
        else:
            candidates.append(Candidate(first, parts, None, found[first]))
    candidates.sort(key=lambda c: str(c.path).casefold())
    return candidates


def _walk(folder: Path, excluded: set[Path]) -> Iterator[Path]:
    # Follow symlinked folders (model collections often link into a download cache)
    # but visit each real directory once, so link cycles cannot loop.
    seen: set[tuple[int, int]] = set()
    stack = [folder]
    while stack:
        current = stack.pop()
        if current in excluded:
            continue
        try:
            st = current.stat()
            key = (st.st_dev, st.st_ino)
            if key in seen:
                continue
            seen.add(key)
            with os.scandir(current) as it:
                items = list(it)
        except OSError:
            continue  # unreadable or vanished: skip silently
        for item in items:
            path = current / item.name
            if path in excluded:
                continue
            try:
                if item.is_dir():
                    stack.append(path)
                elif item.name.lower().endswith(".gguf") and item.is_file():
                    yield path
            except OSError:
                continue


def identity_of(parts: Iterable[Path]) -> Identity | None:
    out: list[tuple[str, int, int]] = []
    for p in parts:
        try:
            st = p.stat()
        except OSError:
            return None
        out.append((p.name, st.st_size, st.st_mtime_ns))
    return tuple(out)


def _part_name(sample: Path, index: int, count: int) -> str:
    m = SPLIT_RE.match(sample.name)
    stem = m["stem"] if m else sample.stem
    return f"{stem}-{index:05d}-of-{count:05d}.gguf"


def absolute(path: Path | str) -> Path:
    # Absolute but not resolved: a model reached through a symlink keeps the name the
    # user sees.
    return Path(os.path.abspath(os.path.expanduser(os.fspath(path))))


def is_within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _is_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False

