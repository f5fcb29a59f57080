"""Terminal face of Hearth: the same objects the window shows, printed as text or JSON."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from app.platform.paths import AppPaths, resolve_paths
from engine import (
    DEFAULT_API_HOST,
    DEFAULT_API_PORT,
    DEFAULT_CONTEXT_PER_CONVERSATION,
    DEFAULT_KV_CACHE_TYPE,
    DEFAULT_MAX_TOKENS,
    DEFAULT_WORKER_PORT,
    EngineError,
    SamplingParams,
)


def _add_kv_option(parser: argparse.ArgumentParser) -> None:
    from engine import KvCacheType  # the parser imports the planner already (the hub's commands)

    parser.add_argument(
        "--kv", choices=[t.value for t in KvCacheType], default=DEFAULT_KV_CACHE_TYPE, help="KV cache type"
    )


def _add_path_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, help="keep Hearth's data (library, chats) here")
    parser.add_argument("--models-dir", type=Path, help="Hearth's own models folder")


def _add_speculation_options(parser: argparse.ArgumentParser) -> None:
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


def _add_worker_options(parser: argparse.ArgumentParser) -> None:
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


def _add_threads_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--threads",
        default=AUTO_THREADS,
        metavar="N",
        help="CPU threads llama.cpp computes with (default: one per core other programs leave free)",
    )


def _threads(args: argparse.Namespace) -> int | None:
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


def _hardware(args: argparse.Namespace):  # -> HardwareSnapshot
    """This machine, with the devices of each --worker (an offline one is an error)."""
    from engine import parse_worker_address, probe_worker, take_snapshot, with_workers

    hardware = take_snapshot()
    if not getattr(args, "worker", None):
        return hardware
    infos = [probe_worker(parse_worker_address(text)) for text in args.worker]
    for info in infos:
        if not info.online:
            raise EngineError(f"The worker at {info.address} is offline: {info.reason}.")
    return with_workers(hardware, infos)


def _split(args: argparse.Namespace) -> tuple[float, ...] | None:
    if not getattr(args, "split", None):
        return None
    try:
        return tuple(float(x) for x in args.split.split(","))
    except ValueError:
        raise EngineError(f"--split {args.split!r}: give numbers separated by commas, e.g. 1,1.") from None


def _speculation(args: argparse.Namespace):  # -> SpeculationConfig | None
    from engine import SpeculationConfig

    if args.speculate is None:
        if args.draft_max is not None:
            raise EngineError("--draft-max needs --speculate lookup or --speculate draft:PATH.")
        return None
    return SpeculationConfig.parse(args.speculate, max_draft=args.draft_max)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hearth",
        description="Run local GGUF language models. With no command, opens the Hearth window.",
    )
    _add_path_options(parser)
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
    _add_kv_option(p)
    p.add_argument("--ubatch", type=int, default=None, help="micro-batch size (memory lever)")
    p.add_argument("--mmproj", type=Path, default=None, help="vision projector to load with it")
    _add_threads_option(p)
    _add_worker_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("chat", help="load a model and stream one reply to stdout")
    p.add_argument("model", type=Path)
    p.add_argument("prompt", help="what to say (the user message)")
    p.add_argument("--system", default=None, help="system prompt")
    sampling = SamplingParams()  # defaults from the engine's dataclasses: one source
    p.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    p.add_argument("--temp", type=float, default=sampling.temperature, help="temperature (0 = greedy)")
    p.add_argument("--top-k", type=int, default=sampling.top_k)
    p.add_argument("--top-p", type=float, default=sampling.top_p)
    p.add_argument("--min-p", type=float, default=sampling.min_p)
    p.add_argument("--repeat-penalty", type=float, default=sampling.repeat_penalty)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument(
        "--ctx",
        type=int,
        default=DEFAULT_CONTEXT_PER_CONVERSATION,
        help="context for the conversation (tokens)",
    )
    p.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    p.add_argument("--mmproj", type=Path, default=None, help="vision projector (needed for --image)")
    p.add_argument("--image", type=Path, action="append", default=[], help="image to ask about (repeatable)")
    _add_speculation_options(p)
    p.add_argument("--gpu-layers", default="auto", help="'auto' or a number of layers (GPUs and workers)")
    _add_threads_option(p)
    _add_worker_options(p)
    p.add_argument(
        "--json", action="store_true", help="print one JSON object at the end instead of streaming"
    )

    p = sub.add_parser("bench", help="measure decode throughput and time to first token")
    p.add_argument("model", type=Path)
    p.add_argument("--streams", default="1,2,4,8", help="concurrent streams to measure, e.g. 1,2,4,8")
    p.add_argument("--tokens", type=int, default=128, help="tokens generated per stream")
    p.add_argument("--repeats", type=int, default=3)
    _add_threads_option(p)
    _add_speculation_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser(
        "serve",
        help="serve a model over an OpenAI-compatible HTTP API (no window)",
        description="Load MODEL and serve it at http://HOST:PORT/v1 (chat completions, completions, "
        "models, health, metrics) until Ctrl+C or SIGTERM.",
    )
    p.add_argument("model", type=Path)
    p.add_argument("--host", default=DEFAULT_API_HOST, help="address to listen on (default: this machine)")
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
    _add_kv_option(p)
    p.add_argument("--mmproj", type=Path, default=None, help="vision projector (for image_url parts)")
    _add_threads_option(p)
    _add_speculation_options(p)

    p = sub.add_parser(
        "worker",
        help="offer this machine's devices to other Hearths (llama.cpp RPC)",
        description="Serve this machine's devices over llama.cpp's RPC protocol, so another Hearth can "
        "place a model's layers here (Add worker... in its hardware view). Runs until Ctrl+C or "
        "SIGTERM. The protocol has no authentication: serve only on a trusted network.",
    )
    p.add_argument("--host", default=DEFAULT_API_HOST, help="address to listen on (default: this machine)")
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

    p = sub.add_parser("hardware", help="what this machine has")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    from app.cli.hub import add_commands

    add_commands(sub)

    sub.add_parser("setup-default-model", help="put the demo model (Gemma 3 270M) in the models folder")
    return parser


def run_cli(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _configure_logging(args.verbose)
    if args.self_test or args.startup_probe:
        from app.platform import self_test

        return self_test.run_self_test() if args.self_test else self_test.run_startup_probe()
    handlers = {
        "inspect": cmd_inspect,
        "plan": cmd_plan,
        "hardware": cmd_hardware,
        "chat": cmd_chat,
        "bench": cmd_bench,
        "serve": cmd_serve,
        "worker": cmd_worker,
        "setup-default-model": cmd_setup_default_model,
        "search": _hub_command("cmd_search"),
        "pull": _hub_command("cmd_pull"),
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


def _hub_command(name: str):  # -> handler; imported when run, so other commands stay quick
    def run(args: argparse.Namespace, paths: AppPaths) -> int:
        from app.cli import hub as cli_hub

        return getattr(cli_hub, name)(args, paths)

    return run


def _configure_logging(verbose: bool) -> None:
    import logging

    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(name)s: %(message)s")
    # llama.cpp warns about things users cannot act on (e.g. full-size SWA caches).
    logging.getLogger("hearth.llama").setLevel(logging.DEBUG if verbose else logging.ERROR)


def _print_json(value: Any) -> None:
    from engine import to_jsonable

    json.dump(to_jsonable(value), sys.stdout, indent=2)
    sys.stdout.write("\n")


def _print_rows(rows: list[tuple[str, str]]) -> None:
    width = max((len(label) for label, _ in rows), default=0)
    for label, value in rows:
        print(f"{label + ':':<{width + 1}} {value}")


def cmd_inspect(args: argparse.Namespace, paths: AppPaths) -> int:
    from app.wording.presenters import model_facts
    from engine import inspect

    info = inspect(args.file)
    if args.json:
        _print_json(info)
    else:
        _print_rows(model_facts(info))
    return 0


def cmd_plan(args: argparse.Namespace, paths: AppPaths) -> int:
    from engine import (
        KvCacheType,
        LoadRequest,
        describe_plan,
        format_bytes,
        inspect_model,
        inspect_projector,
        plan_load,
    )

    remote = str(args.file).startswith("hf://")
    info = None if remote else inspect_model(Path(args.file))
    projector = inspect_projector(args.mmproj) if args.mmproj else None
    gpu_layers = _gpu_layers(args)
    request = LoadRequest(
        context_per_conversation=args.ctx,
        parallel=args.parallel,
        gpu_layers=gpu_layers,
        kv_type=KvCacheType(args.kv),
        n_ubatch=args.ubatch,
        projector=projector,
        threads=_threads(args),
        tensor_split=_split(args),
    )
    if info is None:
        from app.cli.hub import remote_plan

        plan, inspection = remote_plan(paths, args.file, request)
        print(
            f"(header read from the Hub: {format_bytes(inspection.bytes_read)} in "
            f"{inspection.requests} requests{', cached' if inspection.from_cache else ''})",
            file=sys.stderr,
        )
    else:
        plan = plan_load(info, _hardware(args), request)
    if args.json:
        _print_json(plan)
    else:
        print("\n".join(describe_plan(plan)))
    return 0


def cmd_chat(args: argparse.Namespace, paths: AppPaths) -> int:
    from engine import (
        ChatMessage,
        ChatRequest,
        Completed,
        Engine,
        ImageRejected,
        LoadRequest,
        SamplingParams,
        TextDelta,
        inspect_model,
        inspect_projector,
        load_images,
        plan_load,
        seed_value,
    )

    sampling = SamplingParams(
        temperature=args.temp,
        top_k=args.top_k,
        top_p=args.top_p,
        min_p=args.min_p,
        repeat_penalty=args.repeat_penalty,
        seed=seed_value(args.seed),  # -1: random, as in the API
    )
    if args.image and args.mmproj is None:
        raise ImageRejected("Images need a vision projector: add --mmproj PROJECTOR.")
    images = load_images(args.image) if args.image else ()
    messages = [ChatMessage("system", args.system)] if args.system else []
    messages.append(ChatMessage("user", args.prompt, images=images))
    request = ChatRequest(
        messages=tuple(messages), sampling=sampling, max_tokens=args.max_tokens, stop=tuple(args.stop)
    )
    request.validate()
    projector = inspect_projector(args.mmproj) if args.mmproj else None
    speculation = _speculation(args)
    draft = inspect_model(speculation.draft_path) if speculation and speculation.draft_path else None
    gpu_layers = (
        None if str(args.gpu_layers).lower() == "auto" else _parse_int(args.gpu_layers, "--gpu-layers")
    )
    plan = plan_load(
        inspect_model(args.model),
        _hardware(args),
        LoadRequest(
            context_per_conversation=args.ctx,
            parallel=1,
            gpu_layers=gpu_layers,
            projector=projector,
            draft=draft,
            max_draft=speculation.max_draft if speculation and speculation.enabled else 0,
            threads=_threads(args),
            tensor_split=_split(args),
        ),
    )
    model = Engine.load(plan, speculation=speculation).wait_ready()
    try:
        handle = model.submit(request)
        try:
            for event in handle.events():
                if isinstance(event, TextDelta) and not args.json:
                    sys.stdout.write(event.text)
                    sys.stdout.flush()
                elif isinstance(event, Completed) and not args.json:
                    sys.stdout.write("\n")
        except KeyboardInterrupt:
            handle.cancel()
        completion = handle.wait()
    finally:
        model.unload()
    if args.json:
        _print_json(completion)
    else:
        t = completion.timings
        drafts = (
            f" · {completion.accepted}/{completion.drafted} drafts accepted" if completion.drafted else ""
        )
        busy = " · the CPU was busy with other programs" if completion.cpu and completion.cpu.slowed else ""
        print(
            f"[{completion.stop_reason.value} · {completion.usage.completion_tokens} tokens · "
            f"{t.decode_tokens_per_second:.1f} tok/s · first token {t.ttft * 1000:.0f} ms{drafts}{busy}]",
            file=sys.stderr,
        )
    return 0


def cmd_bench(args: argparse.Namespace, paths: AppPaths) -> int:
    from engine import run_engine_benchmarks, speculation_benchmark

    speculation = _speculation(args)
    threads = _threads(args)
    if speculation is not None:
        results = speculation_benchmark(
            args.model, speculation, args.tokens, args.repeats, threads, speculation.draft_path
        )
        if args.json:
            _print_json(results)
            return 0
        print(f"{results['model']} · speculation: {results['mode']} (up to {results['max_draft']} drafts)")
        for task in ("repeat", "novel"):
            row = results[task]
            print(
                f"  {task:>6}: {row['tokens_per_second_off']:.1f} -> {row['tokens_per_second_on']:.1f} tok/s "
                f"({row['speedup']:.2f}x), {row['accepted']}/{row['drafted']} drafts accepted "
                f"({row['acceptance_rate']:.0%}), same text: {'yes' if row['same_text'] else 'no'}"
            )
        return 0

    streams = tuple(_parse_int(s, "--streams") for s in args.streams.split(",") if s.strip())
    results = run_engine_benchmarks(args.model, streams, args.tokens, threads, args.repeats)
    if args.json:
        _print_json(results)
        return 0
    tokens = results["tokens_per_stream"]
    print(f"{results['model']} · {results['threads']} threads · {tokens} tokens per stream")
    for row in results["streams"]:
        print(
            f"  {row['streams']} stream(s): Hearth {row['hearth_tps']:.1f} tok/s, "
            f"bare llama_decode {row['bare_tps']:.1f} tok/s ({row['ratio']:.2f}x)"
        )
    if "llama_cpp_python_tps" in results:
        print(
            f"  llama-cpp-python Llama: {results['llama_cpp_python_tps']:.1f} tok/s "
            f"(Hearth {results['hearth_vs_llama_cpp_python']:.2f}x)"
        )
    ttft = results["ttft_turn_two"]
    print(
        f"  turn 2 after {ttft['history_tokens']} tokens: first token {ttft['cached_ttft_s'] * 1000:.0f} ms "
        f"cached vs {ttft['cold_ttft_s'] * 1000:.0f} ms cold ({ttft['ratio']:.2f}x)"
    )
    print(f"  scheduler: {results['scheduler_tick_us']:.1f} µs per batch")
    return 0


def cmd_serve(args: argparse.Namespace, paths: AppPaths) -> int:
    from app.api import ServerConfig
    from app.api.headless import ServeOptions, run_serve
    from engine import KvCacheType, LoadRequest, inspect_model, inspect_projector, plan_load, take_snapshot

    if not 0 <= args.port <= 65535:
        raise EngineError(f"--port must be between 0 and 65535, not {args.port}.")
    if args.parallel < 1:
        raise EngineError(f"--parallel must be at least 1, not {args.parallel}.")
    speculation = _speculation(args)
    draft = inspect_model(speculation.draft_path) if speculation and speculation.draft_path else None
    gpu_layers = _gpu_layers(args)
    request = LoadRequest(
        context_per_conversation=args.ctx,
        parallel=args.parallel,
        gpu_layers=gpu_layers,
        kv_type=KvCacheType(args.kv),
        projector=inspect_projector(args.mmproj) if args.mmproj else None,
        draft=draft,
        max_draft=speculation.max_draft if speculation and speculation.enabled else 0,
        threads=_threads(args),
    )
    plan = plan_load(inspect_model(args.model), take_snapshot(), request)
    config = ServerConfig(
        host=args.host, port=args.port, api_key=args.api_key or None, cors_origins=tuple(args.cors_origin)
    )
    return run_serve(ServeOptions(plan, config, speculation))


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


def cmd_hardware(args: argparse.Namespace, paths: AppPaths) -> int:
    from engine import describe_hardware, take_snapshot

    snapshot = take_snapshot()
    if args.json:
        _print_json(snapshot)
    else:
        print("\n".join(describe_hardware(snapshot)))
    return 0


def cmd_setup_default_model(args: argparse.Namespace, paths: AppPaths) -> int:
    """The chat model a first "Hello" deserves: Qwen2.5-Coder 1.5B Instruct, not a base model.
    Also says which system libraries the window still needs (a minimal Debian lacks some)."""
    from app.platform.qwen_model import ensure_chat_model, print_progress
    from app.platform.system_libraries import check_display_libraries

    target = ensure_chat_model(paths.ensure().models_dir, print_progress)
    print(f"Default model ready: {target}")
    if (problem := check_display_libraries()) is not None:
        print(f"hearth: {problem}", file=sys.stderr)
        return 1
    return 0


def _gpu_layers(args: argparse.Namespace) -> int | None:
    """``--gpu-layers``: ``auto`` (None: as many as fit) or a count."""
    return None if str(args.gpu_layers).lower() == "auto" else _parse_int(args.gpu_layers, "--gpu-layers")


def _parse_int(text: str, option: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise EngineError(f"{option} expects 'auto' or a whole number, not {text!r}") from None
