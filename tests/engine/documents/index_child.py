"""Indexes a folder in a child process for the SIGKILL test, saying what it does on stdout.

``python -m tests.engine.documents.index_child DB FOLDER``: prints ``committed N`` after each
file's transaction, and ``batch`` before each embedding batch of a file after the first
``HOLD_AFTER`` committed ones, then waits there, so the parent can kill it in the middle of a
file and know that it did.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

from engine.documents.index_types import IndexPhase, IndexProgress
from tests.engine.documents.hashing_embedder import CountingEmbedder, HashingEmbedder
from tests.engine.documents.standins import make_index

HOLD_AFTER = 3


def main(db: Path, folder: Path) -> None:
    committed = 0

    def on_progress(event: IndexProgress) -> None:
        nonlocal committed
        if event.phase is IndexPhase.INDEXING and event.files_done > committed:
            committed = event.files_done
            print(f"committed {committed}", flush=True)

    def before_batch(texts: Sequence[str]) -> None:
        if committed >= HOLD_AFTER and embedder.calls:
            print("batch", flush=True)
            time.sleep(0.5)

    embedder = CountingEmbedder(HashingEmbedder(), before_batch=before_batch)
    index = make_index(db)
    if not index.collections():
        index.create_collection("notes")
    index.index_paths("notes", [folder], embedder, progress=on_progress)
    print("finished", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
