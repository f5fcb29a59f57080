"""``hearth inspect``, ``hearth plan`` and ``hearth hardware``: a model file, whether it fits,
and what this machine (with its workers) has."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from app.cli.options import (
    add_kv_option,
    add_threads_option,
    add_worker_options,
    read_hardware,
    read_load_request,
)
from app.cli.output import print_json, print_rows
from app.platform.paths import AppPaths
from engine import DEFAULT_CONTEXT_PER_CONVERSATION


def add_commands(sub: Any) -> None:
    """``inspect`` and ``plan``."""
    p = sub.add_parser("inspect", help="describe a GGUF file (model or projector)")
    p.add_argument("file", type=Path)
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("plan", help="show whether a model fits this machine and how it would load")
    p.add_argument("file", help="a GGUF file, or hf://OWNER/NAME/FILE.gguf (its header is read from the Hub)")
    p.add_argument(
        "--ctx",
        type=int,
        default=DEFAULT_CONTEXT_PER_CONVERSATION,
        help="context per conversation (tokens)",
    )
    p.add_argument("--parallel", type=int, default=1, help="conversations served at once")
    p.add_argument("--gpu-layers", default="auto", help="'auto' or a number of layers")
    add_kv_option(p)
    p.add_argument("--ubatch", type=int, default=None, help="micro-batch size (memory lever)")
    p.add_argument("--mmproj", type=Path, default=None, help="vision projector to load with it")
    add_threads_option(p)
    add_worker_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def add_hardware_command(sub: Any) -> None:
    p = sub.add_parser("hardware", help="what this machine has")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def cmd_inspect(args: argparse.Namespace, paths: AppPaths) -> int:
    from app.wording.presenters import model_facts
    from engine import inspect

    info = inspect(args.file)
    if args.json:
        print_json(info)
    else:
        print_rows(model_facts(info))
    return 0


def cmd_plan(args: argparse.Namespace, paths: AppPaths) -> int:
    from engine import describe_plan, format_bytes, inspect_model, plan_load

    remote = str(args.file).startswith("hf://")
    info = None if remote else inspect_model(Path(args.file))
    request = read_load_request(args)
    if info is None:
        from app.cli.hub import remote_plan

        plan, inspection = remote_plan(paths, args.file, request, read_hardware(args))
        print(
            f"(header read from the Hub: {format_bytes(inspection.bytes_read)} in "
            f"{inspection.requests} requests{', cached' if inspection.from_cache else ''})",
            file=sys.stderr,
        )
    else:
        plan = plan_load(info, read_hardware(args), request)
    if args.json:
        print_json(plan)
    else:
        print("\n".join(describe_plan(plan)))
    return 0


def cmd_hardware(args: argparse.Namespace, paths: AppPaths) -> int:
    from engine import describe_hardware, take_snapshot

    snapshot = take_snapshot()
    if args.json:
        print_json(snapshot)
    else:
        print("\n".join(describe_hardware(snapshot)))
    return 0
