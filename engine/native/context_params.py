"""llama.cpp context parameters from a load plan: one encoding for the model's context and
the draft model's (KV cache types, flash attention, threads)."""

from __future__ import annotations

from typing import Any

from engine.planner import LlamaParams


def context_params(
    ll: Any,
    params: LlamaParams,
    *,
    n_ctx: int | None = None,
    kv_unified: bool | None = None,
) -> Any:
    """``llama_context_params`` for ``params``; ``ll`` is the ``llama_cpp`` module (imported
    by the caller, on the executor thread). A draft model passes its own ``n_ctx`` and keeps
    its sequences apart (``kv_unified=False``)."""
    c = ll.llama_context_default_params()
    c.n_ctx = params.n_ctx if n_ctx is None else n_ctx
    c.n_batch = params.n_batch
    c.n_ubatch = params.n_ubatch
    c.n_seq_max = max(1, params.n_seq_max)
    c.n_threads = params.n_threads
    c.n_threads_batch = params.n_threads_batch
    c.type_k = params.type_k.ggml_type
    c.type_v = params.type_v.ggml_type
    c.flash_attn_type = params.flash_attn_type
    c.swa_full = params.swa_full
    c.kv_unified = params.kv_unified if kv_unified is None else kv_unified
    # Logit rows to reserve (0: n_batch, hundreds of MiB for a large vocabulary).
    c.n_outputs_max = params.n_outputs_max
    c.n_outputs_max_per_seq = params.n_outputs_max_per_seq
    c.no_perf = True
    return c
