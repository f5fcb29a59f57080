"""The files a user's paths stand for: folders expanded, what cannot be read listed with why.

``scan_paths(paths) -> ScanResult(files, refusals)``. A folder is walked recursively, in
name order; hidden entries (".git", ".venv", dotfiles) and build clutter (node_modules,
__pycache__) are skipped, and inside folders only the kinds Hearth reads are taken, quietly:
a folder of photos and notes yields the notes. A path the user named itself is another
matter: an unsupported or broken one is a refusal with its line.

Symlinks are followed, as a user who links a folder in expects, but each folder is entered
once (by device and inode): a link back to a folder being walked is a refusal ("symlink
loop"), a second way into a folder already walked is skipped, and so is a second link to a
file already taken. Files are only listed here; reading them (and refusing binary ones,
scans, ...) is ``parse_document``'s job, file by file.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from engine.documents.errors import DocumentRefused
from engine.documents.parsing import kind_for, unsupported_reason
from engine.documents.source_file import os_error_reason

# Folders no one means to index even when they do not start with a dot.
SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__", "site-packages", "__MACOSX"})


class ScanResult(NamedTuple):
    files: tuple[Path, ...]
    refusals: tuple[DocumentRefused, ...]


def is_skipped_name(name: str) -> bool:
    return name.startswith(".") or name in SKIPPED_FOLDERS


class _Scan:
    def __init__(self) -> None:
        self.files: list[Path] = []
        self.refusals: list[DocumentRefused] = []
        self._seen_files: set[tuple[int, int]] = set()
        self._seen_folders: set[tuple[int, int]] = set()

    def refuse(self, path: Path, reason: str) -> None:
        self.refusals.append(DocumentRefused(path, reason))

    def add_path(self, path: Path) -> None:
        try:
            info = os.stat(path)
        except OSError as error:
            self.refuse(path, os_error_reason(path, error))
            return
        if stat.S_ISDIR(info.st_mode):
            self.walk(path, info, ancestors=frozenset())
        elif kind_for(path) is None:
            self.refuse(path, unsupported_reason(path))
        else:
            # A FIFO or device named like a document is taken, and refused by the parser
            # with its own line: listing must never open it.
            self.add_file(path, info)

    def add_file(self, path: Path, info: os.stat_result) -> None:
        key = (info.st_dev, info.st_ino)
        if key not in self._seen_files:
            self._seen_files.add(key)
            self.files.append(path)

    def walk(self, folder: Path, info: os.stat_result, ancestors: frozenset[tuple[int, int]]) -> None:
        key = (info.st_dev, info.st_ino)
        if key in self._seen_folders:
            return
        self._seen_folders.add(key)
        inside = ancestors | {key}
        try:
            with os.scandir(folder) as entries:
                listed = sorted(entries, key=lambda entry: entry.name)
        except OSError as error:
            self.refuse(folder, os_error_reason(folder, error))
            return
        for entry in listed:
            if is_skipped_name(entry.name):
                continue
            path = Path(entry.path)
            try:
                is_link = entry.is_symlink()
                target = os.stat(path) if is_link else entry.stat(follow_symlinks=False)
            except OSError as error:
                # A loop or a broken link: worth a line only where it poses as a document.
                if kind_for(path) is not None or _is_folder_like(path):
                    self.refuse(path, os_error_reason(path, error))
                continue
            if stat.S_ISDIR(target.st_mode):
                target_key = (target.st_dev, target.st_ino)
                if target_key in inside:
                    self.refuse(path, "symlink loop: it leads back into a folder that holds it")
                    continue
                self.walk(path, target, inside)
            elif kind_for(path) is not None:
                self.add_file(path, target)


def _is_folder_like(path: Path) -> bool:
    # A dangling or looping link without a suffix may have been a folder; with an
    # unsupported suffix it was a file Hearth would have skipped anyway.
    return not path.suffix


def scan_paths(paths: Iterable[Path | str]) -> ScanResult:
    """Every document file under ``paths`` (files as given, folders walked), in order,
    each once; and a refusal for each path or entry that could not be listed."""
    scan = _Scan()
    for path in paths:
        scan.add_path(Path(path))
    return ScanResult(files=tuple(scan.files), refusals=tuple(scan.refusals))
