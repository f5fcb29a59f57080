"""What llama.cpp allocates for one model, buffer by buffer: KV cache, compute, output,
CPU_REPACK, and a projector's encoder."""

from __future__ import annotations

from dataclasses import dataclass

from engine.catalog import ModelInfo
from engine.planner.load_plan import MIB, KvCacheType, LlamaParams, pad_context
from engine.planner.model_shape import ModelShape

F32 = 4

# ggml-cpu/repack.cpp (ggml_repack_get_optimal_repack_type): which weight types the CPU
# backend copies into a CPU_REPACK buffer laid out for its SIMD width, given the features
# it was built with and the weight's row count. (features, type, rows must divide by).
REPACK_RULES: tuple[tuple[frozenset[str], str, int], ...] = tuple(
    (frozenset(features), ggml_type, rows)
    for features, ggml_type, rows in (
        (("AVX2",), "Q4_0", 8),
        (("AVX2",), "Q4_K", 8),
        (("AVX512",), "Q2_K", 8),
        (("AVX2",), "IQ4_NL", 8),
        (("AVX2",), "MXFP4", 8),
        (("NEON", "DOTPROD"), "Q4_0", 4),
        (("NEON", "DOTPROD"), "Q4_K", 8),
        (("NEON", "DOTPROD"), "Q5_K", 8),
        (("NEON", "DOTPROD"), "Q6_K", 8),
        (("NEON", "DOTPROD"), "IQ4_NL", 4),
        (("NEON", "DOTPROD"), "MXFP4", 4),
        (("NEON", "DOTPROD"), "Q8_0", 4),
        (("NEON", "MATMUL_INT8"), "Q4_0", 4),
        (("NEON", "MATMUL_INT8"), "Q4_K", 8),
        (("NEON", "MATMUL_INT8"), "Q5_K", 8),
        (("NEON", "MATMUL_INT8"), "Q6_K", 8),
        (("NEON", "MATMUL_INT8"), "Q8_0", 4),
    )
)


def repacked_bytes(matmul_weights: tuple[tuple[str, int, int], ...], simd: tuple[str, ...]) -> int | None:
    """The CPU_REPACK buffer for these weights on a build with ``simd`` (llama.cpp's feature
    names); None when the build's features are unknown. Repacking copies: the mapped file
    stays in memory too, so this is on top of the weights."""
    if not simd:
        return None
    have = set(simd)
    total = 0
    for ggml_type, multiple, nbytes in matmul_weights:
        if any(t == ggml_type and f <= have and multiple % rows == 0 for f, t, rows in REPACK_RULES):
            total += nbytes
    return total


def swa_cache_cells(
    shape: ModelShape, cells: int, n_seq: int, n_ubatch: int, swa_full: bool, unified: bool
) -> int:
    """Cells per stream of the sliding-window cache (llama_kv_cache_iswa)."""
    if swa_full:
        return cells
    return pad_context(min(cells, shape.n_swa * (n_seq if unified else 1) + n_ubatch))


def kv_layer_bytes(
    shape: ModelShape, layer: int, cells: int, n_stream: int, type_k: KvCacheType, type_v: KvCacheType
) -> int:
    """One layer's K and V tensors: ``cells`` per stream, ``n_stream`` streams."""
    heads = shape.kv_heads[layer]
    k = type_k.row_bytes(heads * shape.key_length)
    v = type_v.row_bytes(heads * shape.value_length)
    return n_stream * cells * (k + v)


def kv_cache_bytes_per_layer(shape: ModelShape, params: LlamaParams) -> tuple[int, ...]:
    n_stream = 1 if params.kv_unified else params.n_seq_max
    cells = params.n_ctx if params.kv_unified else params.n_ctx_seq
    swa_cells = swa_cache_cells(
        shape, cells, params.n_seq_max, params.n_ubatch, params.swa_full, params.kv_unified
    )
    return tuple(
        kv_layer_bytes(shape, il, swa_cells if is_swa else cells, n_stream, params.type_k, params.type_v)
        for il, is_swa in enumerate(shape.swa_layers)
    )


@dataclass(frozen=True)
class ComputeEstimate:
    """The two candidates for the compute buffer's peak (bytes)."""

    layers: int  # attention masks + one layer's live intermediates
    logits: int  # the final logits of a micro-batch + the hidden state feeding them
    host_staging: int  # what stays on the CPU when the graph runs on a GPU

    @property
    def peak(self) -> int:
        return max(self.layers, self.logits)


def compute_estimate(shape: ModelShape, params: LlamaParams) -> ComputeEstimate:
    """Worst-case scheduler buffers (llama_context::sched_reserve), flash attention on.

    sched_reserve sizes the graph for min(n_ctx, n_ubatch) tokens with min(that,
    n_outputs_max) outputs, and for n_seq_max single-token sequences. ggml-alloc frees each tensor after
    its last use, so the peak is the larger of two moments:

    - inside a layer: the attention masks (inputs, alive until the last layer; f16 with
      flash attention, one per KV cache, n_kv x n_tokens) plus the layer's intermediates.
      Measured on llama-architecture models, those are max(attention, FFN) floats per
      token with attention = 2*n_embd + 2*n_head*head_dim + 2*n_head_kv*head_dim and
      FFN = 3*n_ff + 2*n_embd, or + 4*n_embd once n_ff > 2*n_embd (ggml-alloc then cannot
      reuse the residual's block);
    - at the end: n_outputs x n_vocab logits plus two n_embd-wide hidden states (the last
      layer keeps only the output rows, ``inp_out_ids``).
    """
    n_tokens = max(min(params.n_ctx, params.n_ubatch), params.n_seq_max)
    n_outputs = min(n_tokens, params.outputs_max)
    cells = params.n_ctx if params.kv_unified else params.n_ctx_seq
    mask_kv = cells
    if shape.has_swa:
        mask_kv += swa_cache_cells(
            shape, cells, params.n_seq_max, params.n_ubatch, params.swa_full, params.kv_unified
        )
    # f16 masks: flash attention is assumed on (auto turns it on wherever it is supported).
    mask_bytes = mask_kv * n_tokens * 2
    e, ff = shape.n_embd, shape.n_ff
    q = shape.n_head * shape.key_length
    kv = shape.n_head_kv * shape.key_length
    attention = 2 * e + 2 * q + 2 * kv
    ffn = 3 * ff + (4 * e if ff > 2 * e else 2 * e)
    layers = mask_bytes + n_tokens * max(attention, ffn) * F32
    logits = n_outputs * (shape.n_vocab + 2 * e) * F32
    host = 2 * n_tokens * e * F32  # token embeddings looked up on the host, copied over
    return ComputeEstimate(layers=layers, logits=logits, host_staging=host)


# What serving holds outside llama.cpp's named buffers, besides the vocabulary tables.
# Measured as RSS growth while every conversation decodes (benchmarks/bench_memory.py),
# with glibc's mmap threshold fixed (engine.native.backend.fix_malloc_threshold):
# Each conversation's sampler chain keeps n_vocab candidates (llama_token_data, 12 bytes)
# and about a byte of state per token.
CHAIN_BYTES_PER_VOCAB_TOKEN = 13
CONTEXT_BYTES_PER_VOCAB_TOKEN = 10  # the context's own vocabulary-sized arrays
CELL_BYTES_PER_CACHE = 96  # a KV cell's position, sequence set and position-map node
PROMPT_BYTES_PER_CELL = 72  # a cached prompt's token ids, kept by Hearth (Python ints)
SEQUENCE_BYTES = 48 * 1024  # per conversation: its request and bookkeeping
RUNTIME_FIXED_BYTES = 5 * MIB  # threads' stacks and arenas, graph metadata, code paged in


def runtime_bytes(shape: ModelShape, params: LlamaParams) -> int:
    """Host memory outside the named buffers once every conversation decodes with a full
    context: vocabulary tables, one sampler chain per conversation (n_vocab candidates),
    the KV caches' cell bookkeeping and the prompts' token ids, and a fixed working set."""
    per_sequence = CHAIN_BYTES_PER_VOCAB_TOKEN * shape.n_vocab + SEQUENCE_BYTES
    per_cell = CELL_BYTES_PER_CACHE * shape.kv_cache_count + PROMPT_BYTES_PER_CELL
    return (
        shape.vocab_table_bytes
        + CONTEXT_BYTES_PER_VOCAB_TOKEN * shape.n_vocab
        + params.n_seq_max * per_sequence
        + params.n_ctx * per_cell
        + RUNTIME_FIXED_BYTES
    )


def output_buffer_bytes(shape: ModelShape, params: LlamaParams) -> int:
    """llama_context::output_reserve: logits for one row per sequence at creation (what
    llama.cpp logs), grown at decode time to the rows a batch asks for, at most
    ``n_outputs_max`` (draft verification): the plan counts the most it can grow to."""
    return max(params.n_seq_max, params.outputs_max) * shape.n_vocab * F32


def non_causal_image_tokens(projector: ModelInfo | None) -> int:
    """Tokens of one image that must share a micro-batch (0 when images are causal).

    mtmd_decode_use_non_causal is true for Gemma 3's projector: its 256 tokens attend to
    each other, so llama.cpp must see them in one ubatch. Gemma 3 merges 4x4 patches
    (clip.vision.projector.scale_factor overrides the 4).
    """
    if projector is None or projector.projector is None:
        return 0
    p = projector.projector
    if p.projector_type != "gemma3" or p.patch_size <= 0:
        return 0
    merge = projector.metadata.get("clip.vision.projector.scale_factor", 4)
    merge = merge if isinstance(merge, int) and merge > 0 else 4
    return (p.image_size // p.patch_size // merge) ** 2


def projector_compute_bytes(projector: ModelInfo) -> int:
    """A rough worst case for the vision encoder's graph (one image, flash attention).

    Per patch: the widest live set of a ViT layer (4x-wide MLP assumed, as the projector
    header does not give its FFN size), plus the image itself and the projected tokens.
    Not calibrated against a real projector (only the tiny test one).
    """
    p = projector.projector
    if p is None:
        return 0
    patches = max(1, p.tokens_per_image)
    d = max(1, p.embedding_length)
    image = 3 * p.image_size * p.image_size * F32
    return patches * 16 * d * F32 + image + patches * max(1, p.projection_dim) * F32
