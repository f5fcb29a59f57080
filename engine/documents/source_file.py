"""A user's file opened for reading, or refused with one line: never a hang, never a traceback.

Every OS error a path can raise (missing, permission, a symlink loop, a folder or a FIFO
where a file was expected) becomes a ``DocumentRefused`` with the reason a person
understands. A FIFO is the one that matters most: a plain ``open()`` of a named pipe waits
for a writer forever, so the file is opened non-blocking and checked with ``fstat`` (on the
descriptor, not the path: what is read is what was checked) before a byte is read.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from engine.base.units import format_bytes
from engine.documents.errors import DocumentRefused


def os_error_reason(path: Path, error: OSError) -> str:
    """The one line for an OS error met reading ``path`` (or listing it, for a folder)."""
    code = error.errno
    if code == errno.ELOOP:
        return "symlink loop"
    if code == errno.ENOENT:
        if path.is_symlink():
            return "broken link: its target does not exist"
        return "not found: moved or deleted?"
    if code in (errno.EACCES, errno.EPERM):
        return "cannot read: permission denied"
    if code == errno.ENAMETOOLONG:
        return "cannot read: the path is too long"
    if code == errno.ENOTDIR:
        return "not found: a part of its path is not a folder"
    if code == errno.EISDIR:
        return "a folder, not a file"
    if code is not None:
        return f"cannot read: {os.strerror(code).lower()}"
    return f"cannot read: {error}"


def _not_regular_reason(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder, not a file"
    if stat.S_ISFIFO(mode):
        return "not a regular file: a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "not a regular file: a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "not a regular file: a device"
    return "not a regular file"


def too_large_reason(size: int, limit: int, what: str) -> str:
    return f"too large: {format_bytes(size)} (Hearth reads {what} up to {format_bytes(limit)})"


@contextlib.contextmanager
def open_source(path: Path, limit: int, what: str) -> Iterator[tuple[BinaryIO, int]]:
    """``(file, size)`` for a regular file of at most ``limit`` bytes, else DocumentRefused.
    ``what`` names the kind in the too-large line ("PDF files")."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise DocumentRefused(path, os_error_reason(path, error)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DocumentRefused(path, _not_regular_reason(info.st_mode))
        if info.st_size > limit:
            raise DocumentRefused(path, too_large_reason(info.st_size, limit, what))
        # A regular file ignores O_NONBLOCK; the buffered reader owns the descriptor from here.
        file = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with file:
        yield file, info.st_size


def read_source(path: Path, limit: int, what: str) -> bytes:
    """The whole file, at most ``limit`` bytes (checked again while reading: a file that
    grows after ``fstat`` is refused, not read without end)."""
    with open_source(path, limit, what) as (file, _size):
        try:
            data = file.read(limit + 1)
        except OSError as error:
            raise DocumentRefused(path, os_error_reason(path, error)) from None
    if len(data) > limit:
        raise DocumentRefused(path, too_large_reason(len(data), limit, what))
    return data
