"""Bounded reads of a GGUF file's header bytes, and the format's value types.

Every read is bounded by the file size (and ``MAX_HEADER_BYTES``) before anything is
allocated, so a damaged or hostile file ends in ``InvalidModelFile`` with a one-line
reason, never in a MemoryError or a hang. ``gguf`` is used only for its constants.
"""

from __future__ import annotations

import contextlib
import stat
import struct
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import BinaryIO

import gguf

from engine.base.errors import InvalidModelFile
from engine.base.units import format_bytes
from engine.catalog.model_info import Scalar

MAGIC = b"GGUF"
# A real header (vocabulary, merges, templates) is a few tens of MB at most; refusing
# bigger ones bounds what a hostile file can make us read and hold.
MAX_HEADER_BYTES = 256 * 1024 * 1024
_FIRST_READ = 1024 * 1024

VT = gguf.GGUFValueType
SCALAR_FORMATS: dict[int, struct.Struct] = {
    VT.UINT8: struct.Struct("<B"),
    VT.INT8: struct.Struct("<b"),
    VT.UINT16: struct.Struct("<H"),
    VT.INT16: struct.Struct("<h"),
    VT.UINT32: struct.Struct("<I"),
    VT.INT32: struct.Struct("<i"),
    VT.FLOAT32: struct.Struct("<f"),
    VT.BOOL: struct.Struct("<?"),
    VT.UINT64: struct.Struct("<Q"),
    VT.INT64: struct.Struct("<q"),
    VT.FLOAT64: struct.Struct("<d"),
}
NUMPY_TYPES: dict[int, str] = {
    VT.UINT8: "<u1",
    VT.INT8: "<i1",
    VT.UINT16: "<u2",
    VT.INT16: "<i2",
    VT.UINT32: "<u4",
    VT.INT32: "<i4",
    VT.FLOAT32: "<f4",
    VT.BOOL: "<u1",
    VT.UINT64: "<u8",
    VT.INT64: "<i8",
    VT.FLOAT64: "<f8",
}
INT_TYPES = frozenset({VT.UINT8, VT.INT8, VT.UINT16, VT.INT16, VT.UINT32, VT.INT32, VT.UINT64, VT.INT64})
FLOAT_TYPES = frozenset({VT.FLOAT32, VT.FLOAT64})
U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")


def type_name(vtype: int) -> str:
    """A GGUF value type's name ("UINT32"), or "type N" for an unknown one."""
    try:
        return VT(vtype).name
    except ValueError:
        return f"type {vtype}"


def ggml_type_name(ggml_type: int) -> str:
    """A tensor type's name ("Q4_K"), or "type N" for an unknown one."""
    try:
        return gguf.GGMLQuantizationType(ggml_type).name
    except ValueError:
        return f"type {ggml_type}"


def shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


DOWNLOAD_AGAIN = "Download it again."
SHRANK = (
    "the file got shorter while Hearth read it: is it still being downloaded or copied? "
    "Rescan once it is complete."
)


def incomplete_header(present: int, missing: int) -> str:
    """A file that stops inside its header: most likely an unfinished download."""
    return (
        f"incomplete file: only its first {format_bytes(present)} are here and it stops inside its "
        f"header (the model's description); at least {format_bytes(max(1, missing))} more are "
        f"missing, and the weights after them. {DOWNLOAD_AGAIN}"
    )


def incomplete_weights(present: int, expected: int) -> str:
    """A file whose header is whole but whose weights are cut short."""
    percent = min(99, max(0, round(present * 100 / expected)))
    return (
        f"incomplete file: {percent}% of it is here ({format_bytes(present)} of "
        f"{format_bytes(expected)}); {format_bytes(expected - present)} of its weights are "
        f"missing. {DOWNLOAD_AGAIN}"
    )


def invalid_file(path: Path, reason: str) -> InvalidModelFile:
    """The error, with a reason kept to one printable line whatever the file contained."""
    if not reason.isprintable():
        reason = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in reason)
    return InvalidModelFile(path, shorten(reason, 300))


def _open_gguf(path: Path) -> tuple[BinaryIO, int]:
    """``path`` opened unbuffered, and its size; a folder, an empty or unreadable file fails."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise invalid_file(path, "file not found") from None
    except OSError as exc:
        raise invalid_file(path, f"cannot read the file: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise invalid_file(path, "this is a folder, not a GGUF file")
    if not stat.S_ISREG(st.st_mode):
        raise invalid_file(path, "not a regular file")
    if st.st_size == 0:
        raise invalid_file(path, "empty file")
    try:
        fh = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by the caller's with
    except PermissionError:
        raise invalid_file(path, "cannot read the file: permission denied") from None
    except OSError as exc:
        raise invalid_file(path, f"cannot read the file: {exc.strerror or exc}") from None
    return fh, st.st_size


@contextlib.contextmanager
def open_reader(path: Path) -> Iterator[Reader]:  # an Opener
    """A ``Reader`` over ``path``, closed on leaving; a folder, an empty or unreadable file
    fails with ``InvalidModelFile``."""
    fh, size = _open_gguf(path)
    with fh:
        yield Reader(path, fh, size)


# How a header's bytes are reached: a local file (``open_reader``) or a file on the Hub.
Opener = Callable[[Path], AbstractContextManager["Reader"]]


def read_fully(fh: BinaryIO, n: int) -> bytes:
    # A raw read may return less than asked (signals, network file systems).
    parts: list[bytes] = []
    while n > 0:
        chunk = fh.read(n)
        if not chunk:
            break
        parts.append(chunk)
        n -= len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


class Reader:
    """Bounded reads from a file through a sliding window (no mmap).

    mmap would turn a file shrinking underneath us (a download being restarted) into
    SIGBUS; plain reads turn it into an exception. Skipped regions (scores, token types)
    are never read at all. ``fh`` only needs ``seek`` and ``read``: a header on the Hub is
    read through the same class (``engine.hub.remote_header``), with a smaller
    ``read_size`` so that no more than the header crosses the network.
    """

    __slots__ = ("base", "buf", "fh", "path", "pos", "read_size", "size")

    def __init__(self, path: Path, fh: BinaryIO, size: int, read_size: int = _FIRST_READ) -> None:
        self.path = path
        self.fh = fh
        self.size = size
        self.read_size = read_size
        self.buf = b""
        self.base = 0
        self.pos = 0

    def fail(self, reason: str) -> InvalidModelFile:
        return invalid_file(self.path, reason)

    @property
    def remaining(self) -> int:
        return self.size - self.pos

    def ensure(self, n: int, what: str) -> int:
        """Make [pos, pos+n) readable; return its offset inside ``buf``."""
        end = self.pos + n
        if self.base <= self.pos and end <= self.base + len(self.buf):
            return self.pos - self.base
        if end > self.size:
            raise self.fail(self.incomplete(end - self.size))
        if end > MAX_HEADER_BYTES:
            raise self.fail("corrupt metadata: header larger than 256 MiB")
        keep = b""
        if self.base <= self.pos < self.base + len(self.buf):
            keep = self.buf[self.pos - self.base :]
        want = min(max(n, self.read_size), self.size - self.pos, MAX_HEADER_BYTES - self.pos)
        try:
            self.fh.seek(self.pos + len(keep))
            chunk = read_fully(self.fh, want - len(keep))
        except OSError as exc:
            raise self.fail(f"cannot read the file: {exc.strerror or exc}") from exc
        if len(keep) + len(chunk) < n:
            raise self.fail(SHRANK)
        self.buf = keep + chunk
        self.base = self.pos
        return 0

    def skip(self, n: int) -> None:
        self.pos += n

    def unpack(self, fmt: struct.Struct, what: str) -> Scalar:
        off = self.ensure(fmt.size, what)
        self.pos += fmt.size
        return fmt.unpack_from(self.buf, off)[0]

    def u32(self, what: str) -> int:
        return int(self.unpack(_U32, what))

    def u64(self, what: str) -> int:
        return int(self.unpack(U64, what))

    def i64(self, what: str) -> int:
        return int(self.unpack(_I64, what))

    def scalar(self, vtype: int, what: str) -> Scalar:
        return self.unpack(SCALAR_FORMATS[vtype], what)

    def raw_string(self, what: str) -> bytes:
        start = self.pos
        n = self.u64(what)
        if n > self.remaining:
            raise self.fail(self.overrun(f"{what}: string of {n:,} bytes at byte {start:,}", n))
        off = self.ensure(n, what)
        self.pos += n
        return self.buf[off : off + n]

    def string(self, what: str) -> str:
        return self.raw_string(what).decode("utf-8", errors="replace")

    def overrun(self, claim: str, n: int) -> str:
        # A size no header could have is corruption; a plausible one that merely runs
        # past the end of the file is most likely an incomplete download.
        if n > self.size and n > MAX_HEADER_BYTES:
            return f"corrupt metadata: {claim} is larger than the file"
        return self.incomplete(self.pos + n - self.size)

    def incomplete(self, missing: int) -> str:
        """The file stops inside its header: what is here, at least how much is not, and
        what to do (in plain words: this is what the library shows)."""
        return incomplete_header(self.size, missing)


def read_preamble(reader: Reader) -> tuple[int, int, int]:
    """Magic, version and the two counts at the start of every GGUF: (version, tensor
    count, key-value count), each count checked against what the file could hold."""
    magic_off = reader.ensure(min(4, reader.size), "magic")
    if reader.size < 4 or reader.buf[magic_off : magic_off + 4] != MAGIC:
        raise reader.fail("not a GGUF file")
    reader.skip(4)
    if reader.size < 24:
        raise reader.fail(reader.incomplete(24 - reader.size))
    version = reader.u32("version")
    if version not in (2, 3):
        if version == 1:
            raise reader.fail("unsupported GGUF version 1 (too old for llama.cpp)")
        if _U32.unpack(struct.pack(">I", version))[0] in (2, 3):
            raise reader.fail("big-endian GGUF files are not supported")
        raise reader.fail(f"unsupported GGUF version {version}")
    tensor_count = reader.u64("tensor count")
    kv_count = reader.u64("key-value count")
    # Smallest possible entries: a KV is key length (8) + type (4) + one byte; a tensor
    # info is name length (8) + n_dims (4) + type (4) + offset (8).
    if kv_count * 13 > reader.remaining:
        raise reader.fail(reader.overrun(f"a count of {kv_count:,} key-value pairs", kv_count * 13))
    if tensor_count * 24 > reader.remaining:
        raise reader.fail(reader.overrun(f"a count of {tensor_count:,} tensors", tensor_count * 24))
    return version, tensor_count, kv_count
