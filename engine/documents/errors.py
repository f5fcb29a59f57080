"""Typed errors a user's documents and collections can cause, each with a one-line message."""

from __future__ import annotations

from pathlib import Path

from engine.base.errors import EngineError


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines too) as one space: a file name or a
    library's message may hold newlines, and a refusal is listed as one line."""
    return " ".join(str(text).split())


class DocumentError(EngineError):
    """Base class of everything a document or a collection can cause."""


class DocumentRefused(DocumentError):
    """A file that cannot be indexed. ``reason`` is the one-line why, without the file's
    name ("scanned PDF: no text layer on any of its 12 pages"), for a list that already
    shows the name beside it; ``message`` (``str()``) is ``"<name>: <reason>"`` for places
    that show the error alone."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = Path(path)
        self.reason = one_line(reason)
        super().__init__(f"{one_line(self.path.name) or one_line(str(self.path))}: {self.reason}")


class CollectionError(DocumentError):
    """A collection name (or operation on one) that cannot be used. ``name`` as given."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = one_line(reason)
        super().__init__(self.reason)
