"""The plan against the process: does Hearth's memory plan match what loading really costs?

Each case runs in a fresh child process: it measures its own USS and RSS (psutil), loads
the model with ``Engine.load(plan)``, fills every conversation's context with a prompt
of ``n_ctx_seq - 80`` tokens, measures again once every conversation is decoding its
reply (the peak of serving: prompts cached, every sampler live), and compares the growth
with the plan's CPU total. The model is read from a private copy, so no other process
that maps the same file can make its pages count as shared in USS. A second table sets
Hearth's real compute buffer (the executor's context, as llama.cpp logs it) beside
llama-server's for the same model and settings: the peer from ``benchmarks.peer_server``,
built from the same vendored source with the same CPU options.

Run: ``.venv/bin/python -m benchmarks.bench_memory [--quick]``; writes
``benchmarks/results/memory.json`` and prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "memory.json"
MIB = 1024 * 1024
FILL_MARGIN = 16  # tokens left free per conversation: BOS and the template's few
DECODE_TOKENS = 64  # room for each reply: all must still be decoding when memory is read


@dataclass(frozen=True)
class Case:
    model: str  # "tiny", "gemma", "qwen"
    parallel: int
    context: int  # per conversation
    kv: str = "f16"

    @property
    def label(self) -> str:
        return f"{self.parallel}x{self.context} {self.kv}"


CASES = (
    # Every conversation count and context length on the tiny model, both cache types.
    [Case("tiny", p, c, kv) for kv in ("f16", "q8_0") for p in (1, 4, 8) for c in (2048, 4096, 16384)]
    + [Case("gemma", p, c) for p, c in ((1, 2048), (4, 4096), (8, 2048), (1, 16384), (8, 4096))]
    + [Case("gemma", p, c, "q8_0") for p, c in ((4, 4096), (1, 16384))]
    # Qwen prefills ~150 tokens/s on two cores: each 16k-token fill takes a couple of minutes.
    + [Case("qwen", p, c) for p, c in ((1, 2048), (4, 4096), (8, 2048), (1, 16384))]
    + [Case("qwen", p, c, "q8_0") for p, c in ((4, 4096), (8, 2048))]
)
QUICK = (Case("tiny", 4, 2048), Case("gemma", 4, 4096), Case("qwen", 4, 4096))
PEER_CASES = ((1, 4096), (4, 4096), (8, 2048), (4, 16384))


def model_path(name: str, folder: Path) -> Path:
    if name == "gemma":
        from app.platform.default_model import ensure_default_model

        return ensure_default_model(REPO / ".test-cache")
    if name == "qwen":
        from app.platform.qwen_model import ensure_chat_model

        return ensure_chat_model(REPO / ".test-cache")
    from engine.devtools.tiny_models import TinyTextSpec, write_tiny_text_model

    # Head size 64 so a q8_0 cache works; 32k training context for the long cases.
    spec = TinyTextSpec(n_embd=256, n_head=4, n_head_kv=2, n_ff=768, n_ctx_train=32768)
    return write_tiny_text_model(folder / "tiny-256.gguf", spec)


def private_copy(path: Path, folder: Path) -> Path:
    """The model in a file of the benchmark's own: pages of a file another process maps
    too (the test suite, the app) are shared, and USS would not count them."""
    if path.parent == folder:
        return path
    copy = folder / path.name
    shutil.copyfile(path, copy)
    return copy


# -- the child: one load, filled, measured ------------------------------------------------


def _memory() -> tuple[int, int]:
    import psutil

    info = psutil.Process().memory_full_info()
    return info.uss, info.rss


def _device_memory() -> list[int]:
    """Bytes each NVIDIA GPU holds for this process (empty without NVML or a GPU): the plan's
    per-GPU totals are checked against these, as its CPU total against RSS."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return []
    try:
        used = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            mine = [
                p.usedGpuMemory or 0
                for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
                if p.pid == os.getpid()
            ]
            used.append(sum(mine))
        return used
    finally:
        pynvml.nvmlShutdown()


def _filler(path: Path, n_tokens: int) -> str:
    """Text that the model's tokenizer turns into about ``n_tokens`` tokens (vocab-only
    load, freed before anything is measured)."""
    import llama_cpp

    from engine.chat import tokenize

    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    try:
        vocab = llama_cpp.llama_model_get_vocab(model)
        unit = " the"
        per_unit = len(tokenize(vocab, unit * 64, add_special=False, parse_special=False)) / 64
        text = unit * int(n_tokens / per_unit)
        while len(tokenize(vocab, text, add_special=True, parse_special=False)) > n_tokens:
            text = text[: -len(unit) * 8]
        return text
    finally:
        llama_cpp.llama_model_free(model)


def _started(handle: object) -> threading.Event:
    """Set once ``handle`` samples its first token: its prompt is in the cache and its
    sampler chain (with its candidate array) is live."""
    from engine.requests.events import Started

    flag = threading.Event()

    def watch() -> None:
        for event in handle.events(3600):  # type: ignore[attr-defined]
            if isinstance(event, Started):
                flag.set()
        flag.set()  # ended (completed or failed) without starting: do not wait forever

    threading.Thread(target=watch, daemon=True).start()
    return flag


def child(case: Case, path: Path) -> dict[str, object]:
    from engine.catalog import inspect_model
    from engine.loaded_model import Engine
    from engine.machine.hardware import take_snapshot
    from engine.native.backend import ensure_backend, release_freed_memory
    from engine.planner import KvCacheType, LoadRequest, plan_load
    from engine.requests.request import ChatRequest
    from engine.sampling.params import GREEDY

    ensure_backend()
    request = LoadRequest(
        context_per_conversation=case.context, parallel=case.parallel, kv_type=KvCacheType(case.kv)
    )
    plan = plan_load(inspect_model(path), take_snapshot(), request)
    text = _filler(path, plan.params.n_ctx_seq - FILL_MARGIN - DECODE_TOKENS)
    release_freed_memory()
    uss0, rss0 = _memory()
    devices0 = _device_memory()
    model = Engine.load(plan, force=True).wait_ready(1800)
    loaded_uss, _ = _memory()
    start = time.perf_counter()
    handles = [
        model.submit(ChatRequest(prompt=text, sampling=GREEDY, max_tokens=DECODE_TOKENS, ignore_eos=True))
        for _ in range(case.parallel)
    ]
    for flag in [_started(h) for h in handles]:
        flag.wait(3600)
    # Measured while every conversation decodes: the prompts fill the cache, every request's
    # sampler chain is live. The plan is for this moment, the peak of serving.
    uss1, rss1 = _memory()
    devices1 = _device_memory()
    decoding = sum(not h.done for h in handles)
    fill_seconds = time.perf_counter() - start
    stats = model.stats(600)  # answered between batches: a q8_0 prefill batch can take a while
    for h in handles:
        h.cancel()
    completions = [h.wait(3600) for h in handles]
    reported = model.reported_memory
    cpu = plan.memory[0]
    row = {
        "model": path.name,
        "case": case.label,
        "plan": {
            "weights": cpu.weights,
            "repack": cpu.repack,
            "runtime": cpu.runtime,
            "kv": cpu.kv_cache,
            "compute": cpu.compute,
            "output": cpu.output,
            "total": cpu.total,
        },
        "reported": {
            "weights": reported.model_total if reported else 0,
            "kv": reported.kv_total if reported else 0,
            "compute": reported.compute_total if reported else 0,
            "output": reported.output_total if reported else 0,
        },
        "gpus": [
            {"device": m.device, "plan": m.total, "growth": after - before}
            for m, before, after in zip(plan.memory[1:], devices0, devices1, strict=False)
        ],
        "uss_growth": uss1 - uss0,
        "rss_growth": rss1 - rss0,
        "uss_growth_after_load": loaded_uss - uss0,
        "decoding_when_measured": decoding,
        "cells_filled": stats.cells_used,
        "cells_total": plan.params.n_ctx,
        "prompt_tokens": [c.usage.prompt_tokens for c in completions],
        "fill_seconds": round(fill_seconds, 1),
    }
    model.unload()
    return row


# -- llama-server's compute buffer, beside Hearth's ------------------------------------------


def hearth_compute(path: Path, parallel: int, context: int) -> int:
    """The compute buffer llama.cpp logs for the context the executor would create."""
    import llama_cpp

    from engine.catalog import inspect_model
    from engine.machine.hardware import take_snapshot
    from engine.native.backend import ensure_backend
    from engine.native.context_params import context_params
    from engine.native.llama_log import capture_llama_logs, parse_buffer_sizes
    from engine.planner import LoadRequest, plan_load

    ensure_backend()
    plan = plan_load(
        inspect_model(path), take_snapshot(), LoadRequest(context_per_conversation=context, parallel=parallel)
    )
    mparams = llama_cpp.llama_model_default_params()
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), mparams)
    try:
        with capture_llama_logs() as lines:
            ctx = llama_cpp.llama_init_from_model(model, context_params(llama_cpp, plan.params))
            llama_cpp.llama_free(ctx)
        return parse_buffer_sizes(lines).compute_total
    finally:
        llama_cpp.llama_model_free(model)


def peer_compute(server: Path, path: Path, parallel: int, context: int, threads: int) -> int | None:
    """llama-server's compute buffer for ``parallel`` slots of ``context`` tokens each."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [str(server), "-m", str(path), "-c", str(context * parallel), "-np", str(parallel)]
    args += ["-b", "512", "-ub", "512", "-t", str(threads), "--host", "127.0.0.1", "--port", str(port)]
    args += ["-lv", "4", "--swa-full"]  # buffer sizes show at -lv 4; full SWA caches, as Hearth loads
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and proc.poll() is None:
                log.seek(0)
                text = log.read()
                if "server is listening" in text or "model loaded" in text:
                    break
                time.sleep(0.5)
            log.seek(0)
            text = log.read()
        finally:
            proc.terminate()
            proc.wait(30)
    sizes = re.findall(r"CPU compute buffer size =\s+([\d.]+) MiB", text)
    return int(float(sizes[-1]) * MIB) if sizes else None


# -- the parent ---------------------------------------------------------------------------------


def run_child(case: Case, path: Path) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_memory", "--child", json.dumps(asdict(case)), str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "GGML_NO_BACKTRACE": "1"},
    )
    if out.returncode != 0:
        raise RuntimeError(f"{case.label} on {path.name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def save(rows: list[dict[str, object]], peers: list[dict[str, object]]) -> None:
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"rows": rows, "compute_vs_llama_server": peers}, indent=2) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="one case per model")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("path", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(Case(**json.loads(args.child)), Path(args.path))))
        return 0

    from benchmarks.peer_server import peer_server

    rows: list[dict[str, object]] = []
    peers: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = {
            name: private_copy(model_path(name, Path(tmp)), Path(tmp)) for name in ("tiny", "gemma", "qwen")
        }
        for case in QUICK if args.quick else CASES:
            row = run_child(case, paths[case.model])
            total = row["plan"]["total"]  # type: ignore[index]
            for key in ("uss_growth", "rss_growth"):
                row[f"{key}_error_percent"] = 100.0 * (total - row[key]) / row[key]  # type: ignore[operator]
            rows.append(row)
            save(rows, peers)  # a case that fails later loses nothing measured before it
            print(
                f"{row['model']} {row['case']}: plan {total / MIB:.1f} MiB, "  # type: ignore[operator]
                f"USS +{row['uss_growth'] / MIB:.1f} ({row['uss_growth_error_percent']:+.1f}%), "  # type: ignore[operator]
                f"RSS +{row['rss_growth'] / MIB:.1f} ({row['rss_growth_error_percent']:+.1f}%), "  # type: ignore[operator]
                f"filled {row['cells_filled']}/{row['cells_total']} in {row['fill_seconds']} s",
                flush=True,
            )
        server = peer_server()
        if server is None:
            print("llama-server is not built: python -m benchmarks.peer_server (skipping that table)")
        else:
            threads = os.cpu_count() or 1
            for name in ("gemma", "qwen"):
                for parallel, context in PEER_CASES:
                    ours = hearth_compute(paths[name], parallel, context)
                    theirs = peer_compute(server, paths[name], parallel, context, threads)
                    peers.append(
                        {
                            "model": paths[name].name,
                            "case": f"{parallel}x{context}",
                            "hearth_compute": ours,
                            "llama_server_compute": theirs,
                        }
                    )
                    shown = f"{theirs / MIB:.2f}" if theirs else "?"
                    print(
                        f"{paths[name].name} {parallel}x{context}: compute Hearth {ours / MIB:.2f} MiB, "
                        f"llama-server {shown} MiB",
                        flush=True,
                    )

    print("\n| model | case | plan MiB | USS growth MiB | error | RSS growth MiB | error | context filled |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['model']} | {r['case']} | {r['plan']['total'] / MIB:.1f} | "  # type: ignore[index,operator]
            f"{r['uss_growth'] / MIB:.1f} | {r['uss_growth_error_percent']:+.1f}% | "  # type: ignore[operator]
            f"{r['rss_growth'] / MIB:.1f} | {r['rss_growth_error_percent']:+.1f}% | "  # type: ignore[operator]
            f"{r['cells_filled']}/{r['cells_total']} |"
        )
    if peers:
        print("\n| model | case | Hearth compute MiB | llama-server compute MiB |")
        print("|---|---|---:|---:|")
        for p in peers:
            theirs = p["llama_server_compute"]
            shown = f"{theirs / MIB:.2f}" if theirs else "?"  # type: ignore[operator]
            print(f"| {p['model']} | {p['case']} | {p['hearth_compute'] / MIB:.2f} | {shown} |")  # type: ignore[operator]
    save(rows, peers)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
