"""The options several commands share (paths, KV type, threads, workers, speculation) and
their values checked: a wrong one is an ``EngineError`` the CLI prints in one line."""

from __future__ import annotations

import argparse
from pathlib import Path

from engine import DEFAULT_KV_CACHE_TYPE, EngineError


def add_kv_option(parser: argparse.ArgumentParser) -> None:
    from engine import KvCacheType  # the parser imports the planner already (the hub's commands)

    parser.add_argument(
        "--kv", choices=[t.value for t in KvCacheType], default=DEFAULT_KV_CACHE_TYPE, help="KV cache type"
    )
    parser.add_argument(
        "--kv-pool",
        type=int,
        default=None,
        metavar="TOKENS",
        help="memory for conversations: one KV pool of TOKENS the parallel conversations share, "
        "each up to --ctx (default: each conversation has its own --ctx)",
    )


def add_path_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, help="keep Hearth's data (library, chats) here")
    parser.add_argument("--models-dir", type=Path, help="Hearth's own models folder")


def add_speculation_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--speculate",
        default=None,
        metavar="lookup|draft:PATH",
        help="speculative decoding: prompt lookup, or a smaller draft model with the same vocabulary",
    )
    parser.add_argument(
        "--draft-max",
        type=int,
        default=None,
        help="most draft tokens per step (default 16; fewer when drafts do not pay)",
    )


def add_worker_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--worker",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="a `hearth worker` whose devices take layers too (repeatable)",
    )
    parser.add_argument(
        "--split",
        default=None,
        metavar="W[,W...]",
        help="share of the offloaded layers per device, workers first (default: by free memory)",
    )


# --threads: None lets the planner choose (a thread per core other programs leave free).
AUTO_THREADS: int | None = None


def add_threads_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--threads",
        default=AUTO_THREADS,
        metavar="N",
        help="CPU threads llama.cpp computes with (default: one per core other programs leave free)",
    )


def read_threads(args: argparse.Namespace) -> int | None:
    """``--threads`` checked: a whole number from 1 to MAX_THREADS, or the planner's choice."""
    from engine import MAX_THREADS

    text = args.threads
    if text is None:
        return None
    try:
        threads = int(text)
    except ValueError:
        threads = 0
    if not 1 <= threads <= MAX_THREADS:
        raise EngineError(f"--threads must be a whole number from 1 to {MAX_THREADS}, not {text!r}.")
    return threads


def read_hardware(args: argparse.Namespace):  # -> HardwareSnapshot
    """This machine, with the devices of each --worker (an offline one is an error)."""
    from app.services.planning import planning_hardware
    from engine import parse_worker_address, probe_worker

    infos = [probe_worker(parse_worker_address(text)) for text in getattr(args, "worker", None) or ()]
    for info in infos:
        if not info.online:
            raise EngineError(f"The worker at {info.address} is offline: {info.reason}.")
    return planning_hardware(None, infos)


def read_split(args: argparse.Namespace) -> tuple[float, ...] | None:
    if not getattr(args, "split", None):
        return None
    try:
        return tuple(float(x) for x in args.split.split(","))
    except ValueError:
        raise EngineError(f"--split {args.split!r}: give numbers separated by commas, e.g. 1,1.") from None


def read_speculation(args: argparse.Namespace):  # -> SpeculationConfig | None
    from engine import SpeculationConfig

    if args.speculate is None:
        if args.draft_max is not None:
            raise EngineError("--draft-max needs --speculate lookup or --speculate draft:PATH.")
        return None
    return SpeculationConfig.parse(args.speculate, max_draft=args.draft_max)


def read_gpu_layers(args: argparse.Namespace) -> int | None:
    """``--gpu-layers``: ``auto`` (None: as many as fit) or a count."""
    return None if str(args.gpu_layers).lower() == "auto" else parse_int(args.gpu_layers, "--gpu-layers")


def parse_int(text: str, option: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise EngineError(f"{option} expects 'auto' or a whole number, not {text!r}") from None


def read_load_request(args: argparse.Namespace, speculation=None):  # -> LoadRequest
    """The ``LoadRequest`` a subcommand's options describe; options it lacks keep their defaults.

    ``speculation`` (from ``read_speculation``) adds its draft model and draft length.
    """
    from engine import KvCacheType, LoadRequest, inspect_model, inspect_projector

    fields: dict = {
        "context_per_conversation": args.ctx,
        "gpu_layers": read_gpu_layers(args),
        "threads": read_threads(args),
        "tensor_split": read_split(args),
    }
    if getattr(args, "parallel", None) is not None:
        fields["parallel"] = args.parallel
    if getattr(args, "kv", None) is not None:
        fields["kv_type"] = KvCacheType(args.kv)
    if getattr(args, "kv_pool", None) is not None:
        fields["kv_pool"] = args.kv_pool
    if getattr(args, "ubatch", None) is not None:
        fields["n_ubatch"] = args.ubatch
    if getattr(args, "mmproj", None):
        fields["projector"] = inspect_projector(args.mmproj)
    if speculation is not None and speculation.draft_path:
        fields["draft"] = inspect_model(speculation.draft_path)
    if speculation is not None and speculation.enabled:
        fields["max_draft"] = speculation.max_draft
    return LoadRequest(**fields)
