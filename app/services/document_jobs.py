"""A job of the documents service's indexing worker: what it does to which collection, and
its pause/resume/cancel control."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine import ChunkSettings, IndexControl


@dataclass(frozen=True)
class OpenEmbedder:
    """The embedder the service holds open: its model's name and the engine's estimate of
    the bytes it adds to the process."""

    name: str
    memory: int


class JobKind(Enum):
    ADD = "add"  # paths added, then everything under them brought up to date
    RESCAN = "rescan"  # every source looked at again (the watcher's)
    REINDEX = "reindex"  # built again with this embedder and chunking
    RENAME = "rename"
    REMOVE = "remove"


@dataclass
class DocumentJob:
    kind: JobKind
    collection: str
    paths: tuple[Path, ...] = ()
    chunking: ChunkSettings | None = None
    new_name: str = ""
    control: IndexControl = field(default_factory=lambda: new_control())
    future: Future[None] | None = None

    @property
    def indexes(self) -> bool:
        return self.kind in (JobKind.ADD, JobKind.RESCAN, JobKind.REINDEX)


def new_control() -> IndexControl:
    # Looked up when a job is made, not at import: the engine's face imports every package
    # listed before the one that owns a name, and creating the service must stay free.
    from engine import IndexControl

    return IndexControl()
