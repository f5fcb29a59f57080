"""``hearth chat`` and ``hearth bench``: one streamed reply, and the engine's throughput.

``chat --docs COLLECTION`` grounds the question in the collection's excerpts (retrieved for
the loaded model's context per conversation) and lists the ones the reply cites;
``chat --mcp mcp.json --allow-tools`` lets the model call those servers' tools
(app/cli/tool_chat.py)."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.cli import docs, tool_chat
from app.cli.options import (
    add_speculation_options,
    add_threads_option,
    add_worker_options,
    parse_int,
    read_hardware,
    read_load_request,
    read_speculation,
    read_threads,
)
from app.cli.output import print_json
from app.platform.paths import AppPaths
from engine import (
    DEFAULT_CONTEXT_PER_CONVERSATION,
    DEFAULT_MAX_TOKENS,
    SamplingParams,
    cited_numbers,
    ground_messages,
    rounds_json,
    to_jsonable,
)


def add_commands(sub: Any) -> None:
    """``chat`` and ``bench``."""
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
    add_speculation_options(p)
    p.add_argument("--gpu-layers", default="auto", help="'auto' or a number of layers (GPUs and workers)")
    add_threads_option(p)
    add_worker_options(p)
    p.add_argument(
        "--docs",
        action="append",
        default=[],
        metavar="COLLECTION",
        help="answer from this collection's documents, citing them (repeatable)",
    )
    p.add_argument(
        "--embedder", type=Path, metavar="GGUF", default=None, help="the embedding model the collections use"
    )
    tool_chat.add_tool_options(p)
    p.add_argument(
        "--json", action="store_true", help="print one JSON object at the end instead of streaming"
    )

    p = sub.add_parser("bench", help="measure decode throughput and time to first token")
    p.add_argument("model", type=Path)
    p.add_argument("--streams", default="1,2,4,8", help="concurrent streams to measure, e.g. 1,2,4,8")
    p.add_argument("--tokens", type=int, default=128, help="tokens generated per stream")
    p.add_argument("--repeats", type=int, default=3)
    add_threads_option(p)
    add_speculation_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def cmd_chat(args: argparse.Namespace, paths: AppPaths) -> int:
    from engine import (
        ChatMessage,
        ChatRequest,
        Engine,
        ImageRejected,
        SamplingParams,
        inspect_model,
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
    tool_chat.check_tool_options(args)
    if args.image and args.mmproj is None:
        raise ImageRejected("Images need a vision projector: add --mmproj PROJECTOR.")
    images = load_images(args.image) if args.image else ()
    messages = [ChatMessage("system", args.system)] if args.system else []
    messages.append(ChatMessage("user", args.prompt, images=images))
    request = ChatRequest(
        messages=tuple(messages), sampling=sampling, max_tokens=args.max_tokens, stop=tuple(args.stop)
    )
    request.validate()
    speculation = read_speculation(args)
    plan = plan_load(inspect_model(args.model), read_hardware(args), read_load_request(args, speculation))
    with ExitStack() as stack:
        index = stack.enter_context(docs.open_index(paths)) if args.docs else None
        model = Engine.load(plan, speculation=speculation).wait_ready()
        stack.callback(model.unload)
        retrieval = None
        if index is not None:
            retrieval = _retrieve(stack, index, args, paths, model.context_per_conversation)
            request = replace(request, messages=ground_messages(request.messages, retrieval))
        rounds: tuple[Any, ...] = ()
        if args.mcp is not None:
            toolbox = tool_chat.open_toolbox(args.mcp)
            stack.callback(toolbox.stop_all)
            completion, rounds = tool_chat.chat_with_tools(model, request, toolbox, args.json)
        else:
            completion = _stream(model, request, args.json)
    if args.json:
        data = to_jsonable(completion)
        if args.mcp is not None:
            data["tool_rounds"] = json.loads(rounds_json(rounds))["rounds"]
        if retrieval is not None:
            data["sources"] = [_source_json(e) for e in retrieval.excerpts]
            data["cited"] = cited_numbers(completion.text, [e.n for e in retrieval.excerpts])
            data["whole"] = retrieval.whole
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        if retrieval is not None:
            _print_sources(completion.text, retrieval)
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


def _retrieve(stack: ExitStack, index: Any, args: argparse.Namespace, paths: AppPaths, context: int) -> Any:
    """The excerpts of ``--docs`` for the prompt, fitted to the model's context per conversation."""
    from engine import retrieve

    infos = [index.collection(name) for name in args.docs]
    embedder = stack.enter_context(
        docs.open_embedder_for(paths, args.embedder, [(i.name, i.embedder) for i in infos])
    )
    return retrieve(index, [i.name for i in infos], args.prompt, embedder, context_tokens=context)


def _stream(model: Any, request: Any, quiet: bool) -> Any:
    from engine import Completed, TextDelta

    handle = model.submit(request)
    try:
        for event in handle.events():
            if isinstance(event, TextDelta) and not quiet:
                sys.stdout.write(event.text)
                sys.stdout.flush()
            elif isinstance(event, Completed) and not quiet:
                sys.stdout.write("\n")
    except KeyboardInterrupt:
        handle.cancel()
    return handle.wait()


def _source_json(e: Any) -> dict[str, Any]:
    return {"n": e.n, "path": str(e.path), "page": e.page, "text": e.text}


def _print_sources(reply: str, retrieval: Any) -> None:
    """The excerpts the reply cites, by their numbers: one never given, or given and not cited,
    is not listed."""
    from engine import excerpt_label

    cited = cited_numbers(reply, [e.n for e in retrieval.excerpts])
    if retrieval.whole:
        print("(the documents were given whole)")
    if not retrieval.excerpts:
        print("(nothing in the documents matched the question)")
        return
    if not cited:
        print("(the reply cites none of the excerpts)")
        return
    print("Sources:")
    for n in cited:
        e = retrieval.by_number(n)
        assert e is not None  # cited_numbers keeps only the numbers given
        print(f"[{n}] {excerpt_label(e)}")
        print("    " + " ".join(e.text.split())[:300])


def cmd_bench(args: argparse.Namespace, paths: AppPaths) -> int:
    from engine import run_engine_benchmarks, speculation_benchmark

    speculation = read_speculation(args)
    threads = read_threads(args)
    if speculation is not None:
        results = speculation_benchmark(
            args.model, speculation, args.tokens, args.repeats, threads, speculation.draft_path
        )
        if args.json:
            print_json(results)
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

    streams = tuple(parse_int(s, "--streams") for s in args.streams.split(",") if s.strip())
    results = run_engine_benchmarks(args.model, streams, args.tokens, threads, args.repeats)
    if args.json:
        print_json(results)
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
