"""Terminal face of Hearth: the same objects the window shows, printed as text or JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from app.paths import AppPaths, resolve_paths
from engine.errors import EngineError


def _add_path_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, help="keep Hearth's data (library, chats) here")
    parser.add_argument("--models-dir", type=Path, help="Hearth's own models folder")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hearth",
        description="Run local GGUF language models. With no command, opens the Hearth window.",
    )
    _add_path_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("inspect", help="describe a GGUF file (model or projector)")
    p.add_argument("file", type=Path)
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("plan", help="show whether a model fits this machine and how it would load")
    p.add_argument("file", type=Path)
    p.add_argument("--ctx", type=int, default=4096, help="context per conversation (tokens)")
    p.add_argument("--parallel", type=int, default=1, help="conversations served at once")
    p.add_argument("--gpu-layers", default="auto", help="'auto' or a number of layers")
    p.add_argument("--kv", choices=["f16", "q8_0", "q4_0"], default="f16", help="KV cache type")
    p.add_argument("--ubatch", type=int, default=None, help="micro-batch size (memory lever)")
    p.add_argument("--mmproj", type=Path, default=None, help="vision projector to load with it")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("hardware", help="what this machine has")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("setup-default-model", help="put the demo model (Gemma 3 270M) in the models folder")
    _add_path_options(p)
    return parser


def run_cli(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    paths = resolve_paths(args.data_dir, args.models_dir)
    if args.command is None:
        from app.application import run_gui

        return run_gui(paths)
    handlers = {
        "inspect": cmd_inspect,
        "plan": cmd_plan,
        "hardware": cmd_hardware,
        "setup-default-model": cmd_setup_default_model,
    }
    try:
        return handlers[args.command](args, paths)
    except EngineError as exc:
        print(f"hearth: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _print_json(value: Any) -> None:
    from engine.jsonable import to_jsonable

    json.dump(to_jsonable(value), sys.stdout, indent=2)
    sys.stdout.write("\n")


def _print_rows(rows: list[tuple[str, str]]) -> None:
    width = max((len(label) for label, _ in rows), default=0)
    for label, value in rows:
        print(f"{label + ':':<{width + 1}} {value}")


def cmd_inspect(args: argparse.Namespace, paths: AppPaths) -> int:
    from app.presenters import model_facts
    from engine.catalog import inspect

    info = inspect(args.file)
    if args.json:
        _print_json(info)
    else:
        _print_rows(model_facts(info))
    return 0


def cmd_plan(args: argparse.Namespace, paths: AppPaths) -> int:
    from engine.catalog import inspect_model, inspect_projector
    from engine.hardware import take_snapshot
    from engine.planner import KvCacheType, LoadRequest, describe_plan, plan_load

    info = inspect_model(args.file)
    projector = inspect_projector(args.mmproj) if args.mmproj else None
    gpu_layers = (
        None if str(args.gpu_layers).lower() == "auto" else _parse_int(args.gpu_layers, "--gpu-layers")
    )
    request = LoadRequest(
        context_per_conversation=args.ctx,
        parallel=args.parallel,
        gpu_layers=gpu_layers,
        kv_type=KvCacheType(args.kv),
        n_ubatch=args.ubatch,
        projector=projector,
    )
    plan = plan_load(info, take_snapshot(), request)
    if args.json:
        _print_json(plan)
    else:
        print("\n".join(describe_plan(plan)))
    return 0


def cmd_hardware(args: argparse.Namespace, paths: AppPaths) -> int:
    from engine.hardware import describe, take_snapshot

    snapshot = take_snapshot()
    if args.json:
        _print_json(snapshot)
    else:
        print("\n".join(describe(snapshot)))
    return 0


def cmd_setup_default_model(args: argparse.Namespace, paths: AppPaths) -> int:
    from app.default_model import ensure_default_model

    target = ensure_default_model(paths.ensure().models_dir)
    print(f"Default model ready: {target}")
    return 0


def _parse_int(text: str, option: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise EngineError(f"{option} expects 'auto' or a whole number, not {text!r}") from None
