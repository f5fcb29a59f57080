"""Image costs with the tiny projector: decode+hash, mtmd tokenize, image evaluation.

The tiny CLIP projector (32 px, 8 px patches -> 16 tokens, one 32-dim block) makes the
native numbers mostly overhead: they bound what Hearth adds around mtmd, not what a real
projector costs (that is dominated by the vision encoder). For scale, the same run
decodes 16 text tokens into the same context, which is what the image replaces.

Run: ``.venv/bin/python -m benchmarks.bench_multimodal`` (writes
``benchmarks/results/multimodal.json``).
"""

from __future__ import annotations

import io
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from PIL import Image

from engine.catalog import inspect_model
from engine.devtools.tiny_models import (
    TinyProjectorSpec,
    TinyTextSpec,
    write_tiny_projector,
    write_tiny_text_model,
)
from engine.multimodal import ProjectorRuntime, load_image
from engine.native.backend import ensure_backend

RESULTS = Path(__file__).resolve().parent / "results" / "multimodal.json"
REPEATS = 20
N_THREADS = 1  # the numbers are per-call overhead; one thread keeps them stable on a busy machine


def _median_ms(fn: Callable[[], object], repeats: int = REPEATS) -> dict[str, float]:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1e6)
    return {"median_ms": round(statistics.median(samples), 3), "min_ms": round(min(samples), 3)}


def _photo(width: int, height: int) -> bytes:
    image = Image.effect_mandelbrot((width, height), (-2.0, -1.2, 0.8, 1.2), 60).convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def run() -> dict[str, object]:
    assert ensure_backend()
    import llama_cpp

    results: dict[str, object] = {
        "benchmark": "multimodal",
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "repeats": REPEATS,
        "n_threads": N_THREADS,
        "projector": {"image_size": 32, "patch_size": 8, "tokens_per_image": 16},
    }
    photo = _photo(1024, 768)
    results["load_image_1024x768_jpeg"] = _median_ms(lambda: load_image(photo), 10)

    with tempfile.TemporaryDirectory() as tmp:
        model_path = write_tiny_text_model(Path(tmp) / "tiny.gguf", TinyTextSpec())
        projector_path = write_tiny_projector(Path(tmp) / "mmproj.gguf", TinyProjectorSpec())
        model_params = llama_cpp.llama_model_default_params()
        model_params.n_gpu_layers = 0
        model = llama_cpp.llama_model_load_from_file(str(model_path).encode(), model_params)
        ctx_params = llama_cpp.llama_context_default_params()
        ctx_params.n_ctx, ctx_params.n_batch, ctx_params.n_seq_max = 1024, 512, 1
        ctx_params.n_threads = ctx_params.n_threads_batch = N_THREADS
        ctx = llama_cpp.llama_init_from_model(model, ctx_params)
        memory = llama_cpp.llama_get_memory(ctx)
        try:
            start = time.perf_counter_ns()
            runtime = ProjectorRuntime.load(
                projector_path, model, N_THREADS, False, model_info=inspect_model(model_path)
            )
            results["projector_load_ms"] = round((time.perf_counter_ns() - start) / 1e6, 3)
            with runtime:
                small = load_image(_photo(64, 48))
                big = load_image(photo)
                prompt_text = f"<|im_start|>user\n{runtime.marker}{runtime.marker}compare<|im_end|>\n"

                def tokenize(images: list) -> None:
                    runtime.release_prompt(runtime.tokenize(prompt_text, images))

                results["tokenize_2_images_64x48_ms"] = _median_ms(lambda: tokenize([small, small]))
                results["tokenize_2_images_1024x768_ms"] = _median_ms(lambda: tokenize([big, big]))

                prompt = runtime.tokenize(f"x{runtime.marker}", [big])
                chunk = prompt.media[big.identity]

                def evaluate() -> None:
                    llama_cpp.llama_memory_seq_rm(memory, 0, -1, -1)
                    runtime.eval_media(ctx, chunk, 0, 0, 512)

                evaluate()  # first call builds the graphs
                results["eval_image_ms"] = _median_ms(evaluate)
                runtime.release_prompt(prompt)

                tokens = (llama_cpp.llama_token * 16)(*range(300, 316))

                def decode_text() -> None:
                    llama_cpp.llama_memory_seq_rm(memory, 0, -1, -1)
                    assert llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(tokens, 16)) == 0

                decode_text()
                results["decode_16_text_tokens_ms"] = _median_ms(decode_text)
        finally:
            llama_cpp.llama_free(ctx)
            llama_cpp.llama_model_free(model)
    return results


def engine_ttft(repeats: int = 10) -> dict[str, float]:
    """Time to first token through the engine: an image turn vs the same text turn
    (cold, no cache), and a follow-up about the same image (its KV reused)."""
    from engine.catalog import inspect_projector
    from engine.chat import ChatMessage
    from engine.loaded_model import Engine
    from engine.machine.hardware import take_snapshot
    from engine.planner import LoadRequest, plan_load
    from engine.requests.request import ChatRequest
    from engine.sampling.params import GREEDY

    folder = Path(tempfile.mkdtemp(prefix="hearth-mm-ttft-"))
    model_path = write_tiny_text_model(folder / "tiny.gguf", TinyTextSpec())
    projector = write_tiny_projector(folder / "mmproj-tiny.gguf", TinyProjectorSpec())
    request = LoadRequest(context_per_conversation=1024, parallel=1, projector=inspect_projector(projector))
    model = Engine.load(plan_load(inspect_model(model_path), take_snapshot(), request)).wait_ready(60)
    image = load_image(_photo(640, 480))
    question = "What is in this picture? Describe it."

    def ttft(images: tuple, cache: bool) -> float:
        message = ChatMessage("user", question, images=images)
        completion = model.submit(
            ChatRequest(messages=(message,), sampling=GREEDY, max_tokens=1, cache=cache)
        ).wait(60)
        return completion.timings.ttft * 1000

    try:
        ttft((image,), False)
        text = statistics.median(ttft((), False) for _ in range(repeats))
        with_image = statistics.median(ttft((image,), False) for _ in range(repeats))
        cached = statistics.median(ttft((image,), True) for _ in range(repeats))
    finally:
        model.unload()
    return {
        "text_turn_ttft_ms": round(text, 3),
        "image_turn_ttft_ms": round(with_image, 3),
        "added_by_image_ms": round(with_image - text, 3),
        "image_turn_ttft_cached_ms": round(cached, 3),
    }


def main() -> None:
    results = run()
    results["engine_ttft"] = engine_ttft()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
