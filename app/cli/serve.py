"""``hearth serve`` and ``hearth worker``: this machine serving a model over the OpenAI API,
or its devices to other Hearths over llama.cpp's RPC."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from app.cli.options import (
    add_kv_option,
    add_speculation_options,
    add_threads_option,
    read_load_request,
    read_speculation,
)
from app.platform.paths import AppPaths
from engine import (
    DEFAULT_API_HOST,
    DEFAULT_API_PORT,
    DEFAULT_CONTEXT_PER_CONVERSATION,
    DEFAULT_WORKER_PORT,
    EngineError,
)

LISTEN_HELP = "address to listen on (default: this machine only)"


def add_commands(sub: Any) -> None:
    """``serve`` and ``worker``."""
    p = sub.add_parser(
        "serve",
        help="serve a model over an OpenAI-compatible HTTP API (no window)",
        description="Load MODEL and serve it at http://HOST:PORT/v1 (chat completions, completions, "
        "models, health, metrics) until Ctrl+C or SIGTERM.",
    )
    p.add_argument("model", type=Path)
    p.add_argument("--host", default=DEFAULT_API_HOST, help=LISTEN_HELP)
    p.add_argument("--port", type=int, default=DEFAULT_API_PORT, help="port to listen on (0: any free port)")
    p.add_argument("--parallel", type=int, default=4, help="requests decoded at once")
    p.add_argument(
        "--ctx",
        type=int,
        default=DEFAULT_CONTEXT_PER_CONVERSATION,
        help="context per request (tokens)",
    )
    p.add_argument(
        "--api-key",
        default=os.environ.get("HEARTH_API_KEY"),
        help="require 'Authorization: Bearer KEY' (default: $HEARTH_API_KEY; none: no key)",
    )
    p.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a web page origin allowed to call the API, e.g. http://localhost:3000 (repeatable)",
    )
    p.add_argument("--gpu-layers", default="auto", help="'auto' or a number of layers")
    add_kv_option(p)
    p.add_argument("--mmproj", type=Path, default=None, help="vision projector (for image_url parts)")
    p.add_argument(
        "--embedding-model",
        type=Path,
        default=None,
        metavar="GGUF",
        help="serve /v1/embeddings and document search with this model "
        "(default: Hearth's all-MiniLM-L6-v2 when it is set up)",
    )
    add_threads_option(p)
    add_speculation_options(p)

    p = sub.add_parser(
        "worker",
        help="offer this machine's devices to other Hearths (llama.cpp RPC)",
        description="Serve this machine's devices over llama.cpp's RPC protocol, so another Hearth can "
        "place a model's layers here (Add worker... in its hardware view). Runs until Ctrl+C or "
        "SIGTERM. The protocol has no authentication: serve only on a trusted network.",
    )
    p.add_argument("--host", default=DEFAULT_API_HOST, help=LISTEN_HELP)
    p.add_argument("--port", type=int, default=DEFAULT_WORKER_PORT, help="port to listen on")
    p.add_argument(
        "--devices",
        default="",
        metavar="DEV[,DEV...]",
        help="devices to offer, by llama.cpp name (CPU, CUDA0, Vulkan0; default: the GPUs, else the CPU)",
    )
    p.add_argument("--cache-dir", default=None, help="keep received tensors here, so a reload is quicker")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: all)")
    p.add_argument(
        "--allow-network",
        action="store_true",
        help="allow a --host other than loopback (unauthenticated: a trusted network only)",
    )


def cmd_serve(args: argparse.Namespace, paths: AppPaths) -> int:
    from app.api import ServerConfig
    from app.api.headless import ServeOptions, run_serve
    from app.services.planning import planning_hardware
    from engine import inspect_model, plan_load

    if not 0 <= args.port <= 65535:
        raise EngineError(f"--port must be between 0 and 65535, not {args.port}.")
    if args.parallel < 1:
        raise EngineError(f"--parallel must be at least 1, not {args.parallel}.")
    speculation = read_speculation(args)
    request = read_load_request(args, speculation)
    plan = plan_load(inspect_model(args.model), planning_hardware(), request)
    config = ServerConfig(
        host=args.host,
        port=args.port,
        api_key=args.api_key or None,
        cors_origins=tuple(args.cors_origin),
        documents_file=paths.documents_file,
    )
    embedder = embedding_model(args.embedding_model, paths)
    return run_serve(
        ServeOptions(
            plan,
            config,
            speculation,
            embedder,
            embedder_hardware=planning_hardware,  # measured once the model is loaded
            embedder_required=args.embedding_model is not None,
        )
    )


def embedding_model(given: Path | None, paths: AppPaths) -> Path | None:
    """``--embedding-model``, checked; else the default embedder if setup made it (it is not
    converted here: `hearth serve` starts as fast as it did)."""
    from app.platform.embedding_model import EMBEDDER_NAME
    from engine import read_embedding_model

    if given is None:
        default = paths.embedders_dir / EMBEDDER_NAME
        return default if default.is_file() else None
    read_embedding_model(given)  # a chat model or a missing file: one line, before anything loads
    return given


def cmd_worker(args: argparse.Namespace, paths: AppPaths) -> int:
    from engine import WorkerAddress, WorkerConfig, run_worker

    if not 1 <= args.port <= 65535:
        raise EngineError(f"--port must be between 1 and 65535, not {args.port}.")
    config = WorkerConfig(
        address=WorkerAddress(args.host, args.port),
        devices=tuple(d.strip() for d in args.devices.split(",") if d.strip()),
        cache_dir=args.cache_dir,
        threads=args.threads,
        allow_network=args.allow_network,
    )
    return run_worker(config)
