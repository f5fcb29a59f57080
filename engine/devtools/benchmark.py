"""Throughput and latency measurements of the engine against bare llama.cpp loops.

Used by ``hearth bench`` and ``benchmarks/bench_engine.py``. The bare loops call
``llama_decode`` directly with the same context parameters, batch layout and greedy
sampler as the engine, so the ratio measures exactly what Hearth's Python adds.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from engine.catalog import inspect_model
from engine.chat import ChatMessage
from engine.loaded_model import Engine, LoadedModel
from engine.machine.hardware import take_snapshot
from engine.native.backend import ensure_backend
from engine.native.batch import NativeBatch
from engine.native.context_params import context_params
from engine.planner import LoadPlan, LoadRequest, plan_load
from engine.requests.request import ChatRequest
from engine.sampling.params import GREEDY
from engine.speculation.policy import SpeculationConfig

T = TypeVar("T")

PROMPT = (
    "The history of the lighthouse begins in the ancient world, where fires on hilltops "
    "guided sailors home. Over the centuries these beacons became towers of stone"
)


@dataclass(frozen=True)
class StreamResult:
    streams: int
    hearth_tokens_per_second: float
    bare_tokens_per_second: float

    @property
    def ratio(self) -> float:
        return (
            self.hearth_tokens_per_second / self.bare_tokens_per_second
            if self.bare_tokens_per_second
            else 0.0
        )


def on_fresh_thread(fn: Callable[[], T]) -> T:
    """Run ``fn`` on a new thread, as the engine's executor runs its decodes.

    llama.cpp's CPU backend uses OpenMP, whose worker teams belong to the calling thread;
    a team left idle on one thread slows the next thread's decodes by up to 25% on two
    cores. Running every contender on its own fresh thread keeps the comparison fair.
    """
    result: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            result.append(fn())
        except BaseException as exc:  # re-raised in the caller
            errors.append(exc)

    thread = threading.Thread(target=target, name="hearth-bench")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return result[0]


def make_plan(
    path: Path, ctx: int, parallel: int, threads: int | None = None, kv_pool: int | None = None
) -> LoadPlan:
    request = LoadRequest(context_per_conversation=ctx, parallel=parallel, threads=threads, kv_pool=kv_pool)
    return plan_load(inspect_model(path), take_snapshot(), request)


# -- bare llama.cpp ---------------------------------------------------------------------


class BareContext:
    """Model + context made with exactly the plan's parameters, nothing else."""

    def __init__(self, plan: LoadPlan) -> None:
        import llama_cpp as ll

        ensure_backend()
        p = plan.params
        mparams = ll.llama_model_default_params()
        mparams.n_gpu_layers = p.n_gpu_layers
        self.model = ll.llama_model_load_from_file(str(plan.model.path).encode(), mparams)
        self.ctx = ll.llama_init_from_model(self.model, context_params(ll, p))
        self.vocab = ll.llama_model_get_vocab(self.model)
        self.batch = NativeBatch(p.n_batch, p.outputs_max)

    def tokenize(self, text: str) -> list[int]:
        from engine.chat import tokenize

        return tokenize(self.vocab, text, add_special=True, parse_special=True)

    def run(self, prompts: list[list[int]], n_tokens: int) -> float:
        """Prefill each prompt into its own sequence, then decode ``n_tokens`` per sequence
        greedily in shared batches. Returns aggregate decode tokens/s."""
        import llama_cpp as ll

        chains = []
        for _ in prompts:
            chain = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
            ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_greedy())
            chains.append(chain)
        ll.llama_memory_clear(ll.llama_get_memory(self.ctx), True)
        rows: list[int] = []
        for seq, prompt in enumerate(prompts):
            self.batch.clear()
            self.batch.add_run(seq, 0, prompt, range(len(prompt) - 1, len(prompt)))
            ll.llama_decode(self.ctx, self.batch.native())
            rows.append(len(prompt) - 1)
        pending = [ll.llama_sampler_sample(c, self.ctx, rows[i]) for i, c in enumerate(chains)]
        positions = [len(p) for p in prompts]
        start = time.perf_counter()
        for _ in range(n_tokens - 1):
            self.batch.clear()
            for seq, token in enumerate(pending):
                self.batch.add_run(seq, positions[seq], (token,), range(seq, seq + 1))
                positions[seq] += 1
            ll.llama_decode(self.ctx, self.batch.native())
            pending = [ll.llama_sampler_sample(c, self.ctx, i) for i, c in enumerate(chains)]
        elapsed = time.perf_counter() - start
        for chain in chains:
            ll.llama_sampler_free(chain)
        return len(prompts) * (n_tokens - 1) / elapsed

    def close(self) -> None:
        import llama_cpp as ll

        ll.llama_free(self.ctx)
        ll.llama_model_free(self.model)


def llama_cpp_python_tokens_per_second(plan: LoadPlan, prompt: str, n_tokens: int) -> float:
    """llama-cpp-python's high-level ``Llama`` generating greedily (its own decode loop)."""
    from llama_cpp import Llama

    from engine.native.llama_log import get_router

    p = plan.params
    llm = Llama(
        model_path=str(plan.model.path),
        n_ctx=p.n_ctx_seq,
        n_batch=p.n_batch,
        n_ubatch=p.n_ubatch,
        n_threads=p.n_threads,
        n_threads_batch=p.n_threads_batch,
        n_gpu_layers=p.n_gpu_layers,
        verbose=False,
    )
    get_router().install()  # importing llama_cpp.llama replaced the log callback
    try:
        tokens = llm.tokenize(prompt.encode(), add_bos=True, special=True)
        count = 0
        start = 0.0
        for _ in llm.generate(tokens, temp=0.0, top_k=1, repeat_penalty=1.0, reset=True):
            count += 1
            if count == 1:
                start = time.perf_counter()
            if count == n_tokens:
                break
        return (count - 1) / (time.perf_counter() - start)
    finally:
        llm.close()


# -- Hearth -----------------------------------------------------------------------------


def hearth_streams(model: LoadedModel, prompts: list[str], n_tokens: int) -> float:
    """Aggregate decode tokens/s of len(prompts) concurrent greedy requests."""
    handles = [
        model.submit(
            ChatRequest(prompt=p, sampling=GREEDY, max_tokens=n_tokens, ignore_eos=True, cache=False)
        )
        for p in prompts
    ]
    completions = [h.wait(600) for h in handles]
    window = max(c.timings.decode_seconds for c in completions)
    return sum(c.usage.completion_tokens - 1 for c in completions) / window


def ttft_turn_two(model: LoadedModel, history_tokens: int = 1000) -> dict[str, float]:
    """Time to first token of turn 2 after a ~``history_tokens`` history, cold vs cached."""
    paragraph = PROMPT + ". "
    history_text = paragraph
    vocab_probe = model.submit(
        ChatRequest(prompt=paragraph, sampling=GREEDY, max_tokens=1, cache=False)
    ).wait(60)
    per_paragraph = max(1, vocab_probe.usage.prompt_tokens - 1)
    history_text = paragraph * max(1, history_tokens // per_paragraph)
    turn1 = (ChatMessage("user", history_text + "\nSummarise this."),)
    reply = model.submit(ChatRequest(messages=turn1, sampling=GREEDY, max_tokens=32)).wait(600)
    turn2 = (*turn1, ChatMessage("assistant", reply.text), ChatMessage("user", "Now in one word?"))
    cold = model.submit(ChatRequest(messages=turn2, sampling=GREEDY, max_tokens=1, cache=False)).wait(600)
    # Make turn 1 the freshest prefix again, then ask turn 2 as the app would.
    model.submit(ChatRequest(messages=turn1, sampling=GREEDY, max_tokens=32)).wait(600)
    cached = model.submit(ChatRequest(messages=turn2, sampling=GREEDY, max_tokens=1)).wait(600)
    return {
        "history_tokens": cold.usage.prompt_tokens,
        "cold_ttft_s": cold.timings.ttft,
        "cached_ttft_s": cached.timings.ttft,
        "cached_tokens": cached.usage.cached_tokens,
        "ratio": cached.timings.ttft / cold.timings.ttft if cold.timings.ttft else 0.0,
    }


def run_engine_benchmarks(
    path: Path,
    streams: tuple[int, ...] = (1, 2, 4, 8),
    n_tokens: int = 128,
    threads: int | None = None,
    repeats: int = 3,
    compare_llama_cpp_python: bool = True,
) -> dict[str, Any]:
    """Everything issue 3 asks to measure, in one run with the same threads."""
    width = max(streams)
    ctx = 2048
    plan = make_plan(path, ctx=ctx, parallel=width, threads=threads)
    prompts = [f"{PROMPT} (variant {i})" for i in range(width)]
    results: dict[str, Any] = {
        "model": path.name,
        "threads": plan.params.n_threads,
        "tokens_per_stream": n_tokens,
        "context_per_sequence": ctx,
    }

    def measure_bare() -> dict[int, float]:
        bare = BareContext(plan)
        try:
            return {
                n: statistics.median(
                    bare.run([bare.tokenize(p) for p in prompts[:n]], n_tokens) for _ in range(repeats)
                )
                for n in streams
            }
        finally:
            bare.close()

    bare_rates = on_fresh_thread(measure_bare)

    model = Engine.load(plan).wait_ready(600)
    try:
        hearth_streams(model, prompts[:1], 8)  # warm caches and thread pools
        rows = []
        for n in streams:
            rate = statistics.median(hearth_streams(model, prompts[:n], n_tokens) for _ in range(repeats))
            rows.append(StreamResult(n, rate, bare_rates[n]))
        results["streams"] = [
            {
                "streams": r.streams,
                "hearth_tps": r.hearth_tokens_per_second,
                "bare_tps": r.bare_tokens_per_second,
                "ratio": r.ratio,
            }
            for r in rows
        ]
        results["scheduler_tick_us"] = model.stats().scheduler_tick_us
        results["ttft_turn_two"] = ttft_turn_two(model)
    finally:
        model.unload()

    if compare_llama_cpp_python:
        single_plan = make_plan(path, ctx=ctx, parallel=1, threads=threads)
        high_level = statistics.median(
            on_fresh_thread(lambda: llama_cpp_python_tokens_per_second(single_plan, prompts[0], n_tokens))
            for _ in range(repeats)
        )
        single = next(r for r in rows if r.streams == 1) if 1 in streams else rows[0]
        results["llama_cpp_python_tps"] = high_level
        results["hearth_vs_llama_cpp_python"] = single.hearth_tokens_per_second / high_level
    return results


REPEAT_TASK = (
    "Here is a paragraph:\n\n"
    "The lighthouse keeper climbed the spiral stairs every evening at dusk. He trimmed the wick, "
    "polished the great lens until it shone, and wound the clockwork that turned the beam across "
    "the dark water. Ships far out at sea saw the light sweep past and knew the rocks were near. "
    "In the morning he wrote the weather in his log, ate bread and cheese by the window, and slept "
    "until the afternoon bell.\n\n"
    "Here is the same paragraph again, word for word, with 'evening' changed to 'night':\n\n"
    "The lighthouse keeper climbed the spiral stairs every night"
)
NOVEL_TASK = "List twenty different animals and one surprising fact about each:\n1."


def speculation_benchmark(
    path: Path,
    speculation: SpeculationConfig,
    n_tokens: int = 96,
    repeats: int = 3,
    threads: int | None = None,
    draft: Path | None = None,
) -> dict[str, Any]:
    """Greedy tokens/s with and without speculation on a task that repeats its input and
    on one that does not (the overhead when nothing is accepted)."""
    request = LoadRequest(
        context_per_conversation=2048,
        parallel=1,
        threads=threads,
        draft=inspect_model(draft) if draft else None,
        max_draft=speculation.max_draft if speculation.enabled else 0,
    )
    plan = plan_load(inspect_model(path), take_snapshot(), request)
    model = Engine.load(plan, speculation=speculation).wait_ready(600)
    results: dict[str, Any] = {
        "model": path.name,
        "mode": speculation.mode.value,
        "max_draft": speculation.max_draft,
    }
    try:
        for name, prompt in (("repeat", REPEAT_TASK), ("novel", NOVEL_TASK)):
            rows: dict[str, list[float]] = {"off": [], "on": []}
            drafted = accepted = 0
            same_text = True
            for _ in range(repeats):
                texts = {}
                for label, speculate in (("off", False), ("on", True)):
                    completion = model.submit(
                        ChatRequest(
                            prompt=prompt,
                            sampling=GREEDY,
                            max_tokens=n_tokens,
                            ignore_eos=True,
                            cache=False,
                            speculate=speculate,
                        )
                    ).wait(600)
                    rows[label].append(
                        completion.usage.completion_tokens / max(completion.timings.decode_seconds, 1e-9)
                    )
                    texts[label] = completion.text
                    if speculate:
                        drafted += completion.drafted
                        accepted += completion.accepted
                same_text = same_text and texts["on"] == texts["off"]
            off, on = statistics.median(rows["off"]), statistics.median(rows["on"])
            results[name] = {
                "tokens_per_second_off": off,
                "tokens_per_second_on": on,
                "speedup": on / off if off else 0.0,
                "drafted": drafted,
                "accepted": accepted,
                "acceptance_rate": accepted / drafted if drafted else 0.0,
                "same_text": same_text,
            }
    finally:
        model.unload()
    return results
