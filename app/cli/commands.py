"""``hearth``'s entry point: the parser built from each command group's module, and the run."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from app.cli import chat, docs, hub, models, serve
from app.cli.options import add_path_options
from app.platform.paths import AppPaths, resolve_paths
from engine import EngineError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hearth",
        description="Run local GGUF language models. With no command, opens the Hearth window.",
    )
    add_path_options(parser)
    parser.add_argument("-v", "--verbose", action="store_true", help="show llama.cpp's log on stderr")
    # Packaging checks (app/platform/self_test.py): they run instead of a command or the GUI.
    parser.add_argument(
        "--self-test", action="store_true", help="load a tiny generated model, print one line, exit 0 if OK"
    )
    parser.add_argument(
        "--startup-probe", action="store_true", help="open the window once and print the cold start time"
    )
    parser.add_argument("--load", type=Path, metavar="MODEL", help="window: load this model when it opens")
    parser.add_argument(
        "--send", metavar="TEXT", help="window: once the model is loaded, start a new chat with this message"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    models.add_commands(sub)
    chat.add_commands(sub)
    serve.add_commands(sub)
    models.add_hardware_command(sub)
    hub.add_commands(sub)
    docs.add_commands(sub)

    sub.add_parser("setup-default-model", help="set up the default chat model and embedding model")
    return parser


def run_cli(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _configure_logging(args.verbose)
    if args.self_test or args.startup_probe:
        from app.platform import self_test

        return self_test.run_self_test() if args.self_test else self_test.run_startup_probe()
    handlers = {
        "inspect": models.cmd_inspect,
        "plan": models.cmd_plan,
        "hardware": models.cmd_hardware,
        "chat": chat.cmd_chat,
        "bench": chat.cmd_bench,
        "serve": serve.cmd_serve,
        "worker": serve.cmd_worker,
        "setup-default-model": cmd_setup_default_model,
        "search": hub.cmd_search,
        "pull": hub.cmd_pull,
        "docs": docs.cmd_docs,
    }
    try:
        paths = resolve_paths(args.data_dir, args.models_dir).check()
        if args.command is None:
            from app.application import run_gui

            return run_gui(paths, load=args.load, send=args.send)
        return handlers[args.command](args, paths)
    except EngineError as exc:
        print(f"hearth: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`hearth plan ... | head`): end quietly, as Unix tools do.
        # stdout is pointed at /dev/null so the interpreter's flush at exit cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


def _configure_logging(verbose: bool) -> None:
    import logging

    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(name)s: %(message)s")
    # llama.cpp warns about things users cannot act on (e.g. full-size SWA caches).
    logging.getLogger("hearth.llama").setLevel(logging.DEBUG if verbose else logging.ERROR)


def cmd_setup_default_model(args: argparse.Namespace, paths: AppPaths) -> int:
    """The chat model a first "Hello" deserves: Qwen2.5-Coder 1.5B Instruct, not a base model,
    and the default embedding model (all-MiniLM-L6-v2, converted once to a GGUF). Also says
    which system libraries the window still needs (a minimal Debian lacks some)."""
    from app.platform import embedding_model
    from app.platform.qwen_model import ensure_chat_model, ensure_draft_model, print_progress
    from app.platform.system_libraries import check_display_libraries

    target = ensure_chat_model(paths.ensure().models_dir, print_progress)
    print(f"Default model ready: {target}")
    draft = ensure_draft_model(
        paths.models_dir, lambda done, total: print_progress(done, total, "its draft model")
    )
    print(f"Its draft model ready: {draft}")
    embedder = embedding_model.ensure_default_embedder(paths.embedders_dir, embedding_model.print_progress)
    print(f"Default embedding model ready: {embedder}")
    if (problem := check_display_libraries()) is not None:
        print(f"hearth: {problem}", file=sys.stderr)
        return 1
    return 0
