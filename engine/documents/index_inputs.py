"""What an indexing run takes from the parsing side, and how it reads a file's identity.

The run is given three functions (the real ones by default, imported when first needed, so the
index and its tests load without the readers): ``parse(path)`` → a document,
``chunk(document, count_tokens, max_tokens=, overlap=)`` → chunks with their places, and
``scan(paths)`` → the files under them and the refusals found while listing. Objects of the
same fields will do; the tests pass small stand-ins.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.base.errors import EngineError

if TYPE_CHECKING:
    # Annotations only: the readers load when an indexing run first needs them.
    from engine.documents.chunking import Chunk as DocumentChunk
    from engine.documents.scanning import ScanResult

# Bytes read at a time while hashing a file.
_HASH_BLOCK = 1 << 20


Parse = Callable[[Path], Any]
Chunk = Callable[..., Sequence["DocumentChunk"]]
Scan = Callable[[Sequence[Path]], "ScanResult"]


def default_parse() -> Parse:
    from engine.documents.parsing import parse_document

    return parse_document


def default_chunk() -> Chunk:
    from engine.documents.chunking import chunk_document

    return chunk_document


def default_scan() -> Scan:
    from engine.documents.scanning import scan_paths

    return scan_paths


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_sha(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def refusal_reason(error: BaseException) -> str:
    """The line a refusal is listed with: the parser's reason when it gave one."""
    reason = getattr(error, "reason", None)
    if isinstance(reason, str) and reason:
        return one_line(reason)
    if isinstance(error, EngineError):
        return one_line(error.message)
    if isinstance(error, OSError):
        return one_line(error.strerror or str(error))
    return one_line(f"could not be read ({type(error).__name__}: {error})")
