"""The files beside the database: each image once under ``images/``, named by the sha256
of its bytes and written atomically; durable renames; removing files nothing refers to.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from collections.abc import Set
from pathlib import Path

_MAGIC: tuple[tuple[bytes, int, str, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", 0, ".png", "image/png"),
    (b"\xff\xd8\xff", 0, ".jpg", "image/jpeg"),
    (b"GIF87a", 0, ".gif", "image/gif"),
    (b"GIF89a", 0, ".gif", "image/gif"),
    (b"WEBP", 8, ".webp", "image/webp"),
    (b"BM", 0, ".bmp", "image/bmp"),
)
_MIME_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "image/bmp": ".bmp",
    "image/tiff": ".tiff",
}


def _sniff(data: bytes, mime: str) -> tuple[str, str]:
    """(extension, mime). The bytes decide when they can, so the same bytes always get the
    same file name whatever the caller called them."""
    for magic, offset, extension, sniffed in _MAGIC:
        if data[offset : offset + len(magic)] == magic:
            return extension, mime or sniffed
    return _MIME_EXTENSIONS.get(mime.lower(), ".bin"), mime or "application/octet-stream"


def fsync_directory(directory: Path) -> None:
    # Makes a rename durable across power loss. POSIX only: Windows cannot open a directory.
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


TMP_FILE_MAX_AGE = 600.0  # seconds: an image tmp file older than this is a crash leftover


def write_image(images_dir: Path, data: bytes, mime: str) -> tuple[str, str, str]:
    """Write the bytes once under ``images_dir`` (atomically: tmp, fsync, rename, fsync the
    folder) and return (sha256, mime, file relative to ``images_dir``). Runs before the
    transaction that refers to the file, so a row never points at a missing file; a crash
    in between leaves an orphan file for ``remove_unreferenced``."""
    sha256 = hashlib.sha256(data).hexdigest()
    extension, mime = _sniff(data, mime)
    folder = images_dir / sha256[:2]
    existing = next(folder.glob(f"{sha256}.*"), None) if folder.is_dir() else None
    if existing is not None and existing.stat().st_size == len(data):
        return sha256, mime, f"{sha256[:2]}/{existing.name}"
    name = existing.name if existing is not None else sha256 + extension
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{name}.{secrets.token_hex(4)}.tmp"
    try:
        with open(partial, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, folder / name)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    fsync_directory(folder)
    return sha256, mime, f"{sha256[:2]}/{name}"


def remove_unreferenced(images_dir: Path, referenced: Set[str]) -> int:
    """Remove image files whose ``folder/name`` is not in ``referenced``, and temporary files
    left by a crash. Returns how many files went."""
    if not images_dir.is_dir():
        return 0
    removed = 0
    now = time.time()  # file mtimes are wall-clock, whatever clock the store was given
    for folder in images_dir.iterdir():
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            if path.name.startswith("."):
                # Another process could be writing it right now: only old ones are leftovers.
                if path.name.endswith(".tmp") and now - path.stat().st_mtime > TMP_FILE_MAX_AGE:
                    path.unlink(missing_ok=True)
                    removed += 1
                continue
            if f"{folder.name}/{path.name}" not in referenced:
                path.unlink(missing_ok=True)
                removed += 1
    return removed
