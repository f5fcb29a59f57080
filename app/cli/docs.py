"""``hearth docs add|list|remove|search``: collections of the user's files, from a terminal.

Every command opens the documents index in ``AppPaths.documents_file`` (so ``--data-dir``
moves it too). ``add`` indexes and waits, with a progress bar on stderr; Ctrl+C cancels at
the next file or batch (``IndexControl``), keeping the files already finished.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.cli.docs_progress import IndexProgressBar
from app.cli.output import print_json
from app.platform.paths import AppPaths
from engine import EngineError

# Excerpts `hearth docs search` shows by default.
SEARCH_K = 5
# Search is not fitted into a chat's context: every excerpt asked for is shown.
_NO_BUDGET = 1 << 40


class PathNotFound(EngineError):
    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__(f"{path}: no such file or folder.")


class EmbedderNotFound(EngineError):
    """A collection indexed with a GGUF that is not where Hearth keeps embedders."""

    def __init__(self, collection: str, embedder: str) -> None:
        super().__init__(
            f"“{collection}” is indexed with {embedder}, which is not in Hearth's embedders folder: "
            "give its GGUF with --embedder."
        )


def add_commands(sub: Any) -> None:
    docs = sub.add_parser("docs", help="collections of your documents: add, list, remove, search")
    commands = docs.add_subparsers(dest="docs_command", metavar="ACTION", required=True)

    p = commands.add_parser("add", help="add files or folders to a collection and index them (waits)")
    p.add_argument("collection")
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    _add_embedder_option(p)

    p = commands.add_parser("list", help="the collections, or one collection's documents")
    p.add_argument("collection", nargs="?")
    p.add_argument("--json", action="store_true", help="print one JSON document")

    p = commands.add_parser("remove", help="remove a collection, or some of its files (not from disk)")
    p.add_argument("collection")
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH")

    p = commands.add_parser("search", help="the excerpts of a collection that answer a question")
    p.add_argument("collection")
    p.add_argument("question")
    p.add_argument("-k", type=int, default=SEARCH_K, help=f"excerpts to show (default {SEARCH_K})")
    p.add_argument("--json", action="store_true", help='a JSON list of {"path", "page", "score", "text"}')
    _add_embedder_option(p)


def _add_embedder_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--embedder",
        type=Path,
        metavar="GGUF",
        default=None,
        help="the embedding model (default: Hearth's all-MiniLM-L6-v2)",
    )


def cmd_docs(args: argparse.Namespace, paths: AppPaths) -> int:
    handlers = {"add": cmd_add, "list": cmd_list, "remove": cmd_remove, "search": cmd_search}
    return handlers[args.docs_command](args, paths)


@contextmanager
def open_index(paths: AppPaths) -> Iterator[Any]:
    from engine import DocumentIndex

    with DocumentIndex(paths.ensure().documents_file) as index:
        yield index


@contextmanager
def open_embedder_for(
    paths: AppPaths, given: Path | None, indexed_with: Sequence[tuple[str, str | None]] = ()
):
    """The embedder: ``given``, else the one the collections (name, embedder) were indexed
    with when it is in the embedders folder, else the default one; planned for this machine
    first (EmbedderDoesNotFit, nothing opened, when its free RAM is too little)."""
    from app.services.planning import planning_hardware
    from engine import open_embedder

    path = given
    if path is None:
        path = _indexed_embedder(paths, indexed_with)
    if path is None:
        from app.platform.embedding_model import ensure_default_embedder

        path = ensure_default_embedder(paths.embedders_dir)
    elif not path.is_file():
        raise PathNotFound(path)
    embedder = open_embedder(path, hardware=planning_hardware())
    try:
        yield embedder
    finally:
        embedder.close()


def _indexed_embedder(paths: AppPaths, indexed_with: Sequence[tuple[str, str | None]]) -> Path | None:
    from app.platform.embedding_model import EMBEDDER_NAME

    for collection, embedder in indexed_with:
        if embedder is None:
            continue
        file_name = embedder.rsplit(":", 1)[0]
        if (paths.embedders_dir / file_name).is_file():
            return paths.embedders_dir / file_name
        if file_name != EMBEDDER_NAME:  # the default one is set up on demand
            raise EmbedderNotFound(collection, embedder)
    return None


# -- add ----------------------------------------------------------------------------------


def cmd_add(args: argparse.Namespace, paths: AppPaths) -> int:
    from engine import CollectionNotFound, DocumentStatus, IndexControl

    for path in args.paths:
        if not path.exists() and not path.is_symlink():
            raise PathNotFound(path)
    with open_index(paths) as index:
        try:
            existing = index.collection(args.collection)
        except CollectionNotFound:
            existing = index.create_collection(args.collection)
        with open_embedder_for(paths, args.embedder, [(existing.name, existing.embedder)]) as embedder:
            bar = IndexProgressBar(sys.stderr)
            control = IndexControl()
            report = _run_cancellable(
                lambda: index.index_paths(
                    existing.name, args.paths, embedder, progress=bar.update, control=control
                ),
                control,
            )
            bar.finish()
        roots = [Path(p).absolute() for p in args.paths]
        refused = [
            d
            for d in index.documents(existing.name)
            if d.status is DocumentStatus.REFUSED and any(_within(d.path, r) for r in roots)
        ]
        info = index.collection(existing.name)
    done = report.indexed + report.unchanged + report.touched + report.moved
    print(
        f"{info.name}: {report.indexed} document(s) indexed, {report.chunks_embedded} chunk(s) embedded"
        + (f", {report.unchanged + report.touched} unchanged" if report.unchanged + report.touched else "")
        + (f", {len(refused)} refused" if refused else "")
        + f" in {report.seconds:.1f} s."
        + f" The collection has {info.indexed} document(s), {info.chunks} chunk(s)."
    )
    for d in refused:
        print(f"  refused: {d.path}: {d.reason}")
    if report.cancelled:
        print(
            "hearth: cancelled; the files finished are kept, run the same command to go on.", file=sys.stderr
        )
        return 130
    return 0 if done > 0 or not refused else 1


def _run_cancellable(work: Any, control: Any) -> Any:
    """``work()`` on a thread of its own, so Ctrl+C reaches this one, which asks the run to
    stop at its next checkpoint (a file's transaction is never cut in half) and waits for it."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as error:  # re-raised here
            box["error"] = error
        finally:
            done.set()

    # An Event, not Thread.join: a Ctrl+C inside join can leave the thread marked as ended
    # while it still runs (CPython before 3.13).
    threading.Thread(target=run, name="hearth-docs-add", daemon=True).start()
    while not done.is_set():
        try:
            done.wait(0.2)
        except KeyboardInterrupt:
            control.cancel()
    if "error" in box:
        raise box["error"]
    return box["value"]


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


# -- list, remove -------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace, paths: AppPaths) -> int:
    with open_index(paths) as index:
        if args.collection is None:
            collections = index.collections()
            if args.json:
                print_json([_collection_json(c) for c in collections])
            elif not collections:
                print("No collections yet: hearth docs add NAME PATH...")
            else:
                width = max(len(c.name) for c in collections)
                for c in collections:
                    print(
                        f"{c.name:<{width}}  {c.indexed:>6} documents  {c.chunks:>8} chunks  "
                        f"{c.refused:>4} refused  {c.embedder or '-'}"
                    )
            return 0
        info = index.collection(args.collection)
        documents = index.documents(info.name)
    if args.json:
        print_json({**_collection_json(info), "documents": [_document_json(d) for d in documents]})
        return 0
    print(f"{info.name}: {info.indexed} documents, {info.chunks} chunks, embedder {info.embedder or '-'}")
    for d in documents:
        reason = f": {d.reason}" if d.reason else ""
        print(f"  {d.status.value:<8} {d.chunk_count:>5} chunks  {d.path}{reason}")
    return 0


def _collection_json(c: Any) -> dict[str, Any]:
    return {
        "name": c.name,
        "documents": c.indexed,
        "refused": c.refused,
        "pending": c.pending,
        "chunks": c.chunks,
        "embedder": c.embedder,
        "sources": [str(s) for s in c.sources],
    }


def _document_json(d: Any) -> dict[str, Any]:
    return {"path": str(d.path), "status": d.status.value, "reason": d.reason, "chunks": d.chunk_count}


def cmd_remove(args: argparse.Namespace, paths: AppPaths) -> int:
    with open_index(paths) as index:
        if not args.paths:
            index.remove_collection(args.collection)
            print(f"Removed the collection “{args.collection}” (the files stay where they are).")
            return 0
        removed = index.remove_paths(args.collection, args.paths)
    print(f"Removed {removed} document(s) from “{args.collection}” (the files stay where they are).")
    return 0


# -- search -------------------------------------------------------------------------------


def cmd_search(args: argparse.Namespace, paths: AppPaths) -> int:
    from engine import retrieve

    if args.k < 1:
        raise EngineError(f"-k must be at least 1, not {args.k}.")
    with open_index(paths) as index:
        info = index.collection(args.collection)
        with open_embedder_for(paths, args.embedder, [(info.name, info.embedder)]) as embedder:
            # context 0: never "whole documents"; search shows excerpts, ranked.
            found = retrieve(
                index,
                [info.name],
                args.question,
                embedder,
                args.k,
                context_tokens=0,
                budget_tokens=_NO_BUDGET,
            )
    hits = [{"path": str(e.path), "page": e.page, "score": e.score, "text": e.text} for e in found.excerpts]
    if args.json:
        print_json(hits)
        return 0
    if not hits:
        print(f"Nothing in “{info.name}” matches.")
    for n, e in enumerate(found.excerpts, start=1):
        page = ""
        if e.page is not None:
            page = f", p. {e.page}" if e.last_page in (None, e.page) else f", pp. {e.page}–{e.last_page}"
        heading = f" · {e.heading}" if e.heading else ""
        print(f"[{n}] {e.path}{page}{heading}  (score {e.score:.4f})")
        print("    " + " ".join(e.text.split())[:400])
    return 0
