"""Will it fit, and how to load it: LoadRequest -> LoadPlan.

The planner predicts what llama.cpp will allocate, buffer by buffer, from the GGUF header
alone, and chooses the exact context parameters the executor passes to llama.cpp. The
formulas follow llama.cpp (the vendored source of llama-cpp-python 0.3.36) and were
calibrated against the buffer sizes llama.cpp logs; ``tests/integration/test_planner_accuracy.py``
keeps them honest.

What llama.cpp allocates, and how it is predicted here:

- weights: the tensor bytes (mmap'd on the CPU, copied to a GPU). Token embeddings always
  stay on the host; the output layer moves to the GPU first (``n_gpu_layers = k`` puts
  the output layer and the last ``k - 1`` blocks on the GPU), and a tied output layer
  (no ``output.weight``) is a copy of the token embeddings on the GPU.
- KV cache: per layer, cells x streams x (K row + V row). With ``kv_unified = False`` each
  of the ``n_seq_max`` sequences has its own stream of ``n_ctx / n_seq_max`` cells.
  Sliding-window layers get full-size caches because Hearth loads with ``swa_full``.
- compute: the scheduler's worst-case graph for one micro-batch. Its peak is either the
  final logits (``n_ubatch x n_vocab`` floats, which dominates for large vocabularies) or
  a transformer layer's live intermediates plus the attention masks.
- runtime: what serving holds outside llama.cpp's named buffers (``runtime_bytes``).
  Mostly the vocabulary tables (token texts, the text-to-id map, the piece cache, BPE merge
  ranks), measured with vocab-only loads of Gemma 3 (262,144 tokens: 41.0 MiB) and Qwen2.5
  (151,936 tokens and 151,387 merges: 46.0 MiB) on glibc/libstdc++ x86-64; then one sampler
  chain per conversation (n_vocab 12-byte candidates: 3 MiB each for Gemma), the KV
  caches' cell bookkeeping and the prompts' token ids (per cell), and a fixed 5 MiB
  (thread stacks and arenas, graph metadata). Fitted to RSS growth while every
  conversation decodes, with glibc's mmap threshold fixed so that freed buffers never stay
  resident (``engine.native.backend.fix_malloc_threshold``).
- output: the host buffer for logits, ``n_seq_max x n_vocab`` floats at creation, growing to
  ``n_outputs_max`` rows when a batch verifies drafts.

Logit rows are what make compute and output large for big vocabularies, so Hearth sets
``n_outputs_max`` to what it samples, as llama-server does: one row per sequence, plus the
draft rows speculation may verify (``LoadRequest.max_draft``). Left at 0, llama.cpp would
reserve ``n_batch`` rows: 297 MiB of logits for Qwen2.5's 151,936 tokens at n_batch 512.

The modules, bottom up:

- ``load_plan``: ``LoadRequest``, ``LlamaParams``, ``LoadPlan``, ``DeviceMemory`` and the enums
  they hold; the context rules (``pad_context``, ``cells_per_sequence``, ``output_rows``).
- ``model_shape``: ``ModelShape``, the formulas' inputs derived from a ``ModelInfo``.
- ``memory_estimate``: KV cache, compute, output, CPU_REPACK and projector bytes.
- ``placement``: device reserves, which device holds each layer, bytes per device.
- ``validation``: a request checked, clamped and padded.
- ``reasons``: the plan's lines for people, ``describe_plan``.
- ``threads``: the CPU threads, from the cores other programs leave free.
- ``suggestions``: single changes that make a plan fit, each planned again.
- ``planning``: ``plan_load``; ``memory_verdict``, the one fit rule (an embedder's plan uses it too).
"""

from __future__ import annotations

from engine.base.defaults import DEFAULT_N_UBATCH
from engine.planner.load_plan import (
    CONTEXT_STEP,
    FLASH_ATTN_AUTO,
    FLASH_ATTN_ENABLED,
    GIB,
    MAX_N_UBATCH,
    MAX_PARALLEL,
    MAX_THREADS,
    MEMORY_PARTS,
    MIB,
    MIN_CONTEXT,
    TIGHT_MARGIN,
    DeviceMemory,
    InvalidLoadRequest,
    KvCacheType,
    LlamaParams,
    LoadPhase,
    LoadPlan,
    LoadRequest,
    Suggestion,
    Verdict,
    cells_per_sequence,
    output_rows,
    pad_context,
)
from engine.planner.memory_estimate import (
    F32,
    REPACK_RULES,
    RUNTIME_FIXED_BYTES,
    ComputeEstimate,
    compute_estimate,
    kv_cache_bytes_per_layer,
    kv_layer_bytes,
    non_causal_image_tokens,
    output_buffer_bytes,
    projector_compute_bytes,
    repacked_bytes,
    runtime_bytes,
    swa_cache_cells,
)
from engine.planner.model_shape import (
    VOCAB_BYTES_PER_MERGE,
    VOCAB_BYTES_PER_TOKEN,
    ModelShape,
    model_shape,
)
from engine.planner.placement import (
    RAM_RESERVE_FRACTION,
    RAM_RESERVE_MAX,
    RAM_RESERVE_MIN,
    VRAM_RESERVE_FRACTION,
    VRAM_RESERVE_MAX,
    VRAM_RESERVE_MIN,
    layer_devices,
    ram_reserve,
    vram_reserve,
)
from engine.planner.planning import MemoryVerdict, memory_verdict, plan_load
from engine.planner.reasons import describe_plan, memory_line, resource_label
from engine.planner.threads import ThreadChoice, choose_threads

__all__ = [
    "CONTEXT_STEP",
    "DEFAULT_N_UBATCH",
    "F32",
    "FLASH_ATTN_AUTO",
    "FLASH_ATTN_ENABLED",
    "GIB",
    "MAX_N_UBATCH",
    "MAX_PARALLEL",
    "MAX_THREADS",
    "MEMORY_PARTS",
    "MIB",
    "MIN_CONTEXT",
    "RAM_RESERVE_FRACTION",
    "RAM_RESERVE_MAX",
    "RAM_RESERVE_MIN",
    "REPACK_RULES",
    "RUNTIME_FIXED_BYTES",
    "TIGHT_MARGIN",
    "VOCAB_BYTES_PER_MERGE",
    "VOCAB_BYTES_PER_TOKEN",
    "VRAM_RESERVE_FRACTION",
    "VRAM_RESERVE_MAX",
    "VRAM_RESERVE_MIN",
    "ComputeEstimate",
    "DeviceMemory",
    "InvalidLoadRequest",
    "KvCacheType",
    "LlamaParams",
    "LoadPhase",
    "LoadPlan",
    "LoadRequest",
    "MemoryVerdict",
    "ModelShape",
    "Suggestion",
    "ThreadChoice",
    "Verdict",
    "cells_per_sequence",
    "choose_threads",
    "compute_estimate",
    "describe_plan",
    "kv_cache_bytes_per_layer",
    "kv_layer_bytes",
    "layer_devices",
    "memory_line",
    "memory_verdict",
    "model_shape",
    "non_causal_image_tokens",
    "output_buffer_bytes",
    "output_rows",
    "pad_context",
    "plan_load",
    "projector_compute_bytes",
    "ram_reserve",
    "repacked_bytes",
    "resource_label",
    "runtime_bytes",
    "swa_cache_cells",
    "vram_reserve",
]
