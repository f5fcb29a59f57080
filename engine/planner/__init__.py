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
- runtime: what llama.cpp holds outside its named buffers. Mostly the vocabulary tables
  (token texts, the text-to-id map, the piece cache, BPE merge ranks), measured with
  vocab-only loads of Gemma 3 (262,144 tokens: 41.0 MiB) and Qwen2.5 (151,936 tokens and
  151,387 merges: 46.0 MiB) on glibc/libstdc++ x86-64; plus a fixed 8 MiB seen on the
  tiny models once a context is filled (threads, graph metadata, work buffers).
- output: the host buffer for logits, ``n_seq_max x n_vocab`` floats at creation, growing to
  ``n_outputs_max`` rows when a batch verifies drafts.

Logit rows are what make compute and output large for big vocabularies, so Hearth sets
``n_outputs_max`` to what it samples, as llama-server does: one row per sequence, plus the
draft rows speculation may verify (``LoadRequest.max_draft``). Left at 0, llama.cpp would
reserve ``n_batch`` rows: 297 MiB of logits for Qwen2.5's 151,936 tokens at n_batch 512.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, replace

from engine.catalog import ModelInfo
from engine.defaults import DEFAULT_CONTEXT_PER_CONVERSATION, DEFAULT_MAX_DRAFT, DEFAULT_N_BATCH
from engine.errors import EngineError
from engine.hardware import GpuInfo, HardwareSnapshot
from engine.speculative import MAX_DRAFT_LIMIT
from engine.units import format_bytes

MIB = 1024 * 1024
GIB = 1024 * MIB

# llama.cpp's memory outside its named buffers (see the module docstring).
VOCAB_BYTES_PER_TOKEN = 164
VOCAB_BYTES_PER_MERGE = 154
RUNTIME_FIXED_BYTES = 8 * MIB

# llama.cpp rounds n_ctx, and with kv_unified=False also n_ctx / n_seq_max, up to this.
CONTEXT_STEP = 256
MIN_CONTEXT = 256
MAX_PARALLEL = 256  # llama_max_parallel_sequences()
DEFAULT_N_UBATCH = 512
MAX_N_UBATCH = 8192
F32 = 4

# Kept free on each device, because the numbers above are what llama.cpp allocates, not
# what the process needs: the app itself and the OS need RAM; the CUDA context, cuBLAS
# workspaces and the driver need VRAM that NVML still reports as free before loading.
RAM_RESERVE_MIN = 512 * MIB
RAM_RESERVE_FRACTION = 0.05
RAM_RESERVE_MAX = 2 * GIB
VRAM_RESERVE_MIN = 512 * MIB
VRAM_RESERVE_FRACTION = 0.03
VRAM_RESERVE_MAX = 2 * GIB

# llama.cpp's LLAMA_FLASH_ATTN_TYPE_*
FLASH_ATTN_AUTO = -1
FLASH_ATTN_ENABLED = 1


class KvCacheType(enum.Enum):
    F16 = "f16"
    Q8_0 = "q8_0"
    Q4_0 = "q4_0"

    @property
    def ggml_type(self) -> int:
        """The ggml_type value llama.cpp's ``type_k`` / ``type_v`` take."""
        return _GGML_TYPE[self]

    @property
    def block_size(self) -> int:
        return _KV_BLOCK[self][1]

    @property
    def is_quantized(self) -> bool:
        return self is not KvCacheType.F16

    def row_bytes(self, n: int) -> int:
        """Bytes of one cache row of ``n`` elements (ggml_row_size)."""
        block_bytes, block = _KV_BLOCK[self]
        return n * block_bytes // block


_GGML_TYPE = {KvCacheType.F16: 1, KvCacheType.Q4_0: 2, KvCacheType.Q8_0: 8}
# (bytes per block, elements per block): q8_0 is 32 int8 + an f16 scale, q4_0 32 nibbles + f16.
_KV_BLOCK = {KvCacheType.F16: (2, 1), KvCacheType.Q8_0: (34, 32), KvCacheType.Q4_0: (18, 32)}


class LoadPhase(enum.Enum):
    VALIDATE = "validate"
    WEIGHTS = "weights"
    CONTEXT = "context"
    PROJECTOR = "projector"
    DRAFT = "draft"
    WARMUP = "warmup"
    READY = "ready"


class Verdict(enum.Enum):
    FITS = "fits"
    PARTIAL_OFFLOAD = "fits with partial offload"
    TIGHT = "tight: may swap"  # fits, but within TIGHT_MARGIN of the free memory
    DOES_NOT_FIT = "does not fit"


# A plan this close to a device's free memory (after the reserve) may still swap or be
# squeezed by whatever else the machine starts: say so, and offer headroom.
TIGHT_MARGIN = 0.10


class InvalidLoadRequest(EngineError, ValueError):
    """A request llama.cpp would reject (or abort on); ``message`` says which setting and why."""


@dataclass(frozen=True)
class LoadRequest:
    """What the user asks for. ``gpu_layers`` None means: as many as fit."""

    context_per_conversation: int = DEFAULT_CONTEXT_PER_CONVERSATION
    parallel: int = 1
    gpu_layers: int | None = None
    kv_type: KvCacheType = KvCacheType.F16
    n_ubatch: int | None = None  # None: the planner chooses
    projector: ModelInfo | None = None
    draft: ModelInfo | None = None
    threads: int | None = None
    # Draft tokens each sequence may verify per tick (speculation); 0: none. With a draft
    # model and 0 here, the default draft length is reserved.
    max_draft: int = 0

    @property
    def draft_rows(self) -> int:
        if self.max_draft:
            return self.max_draft
        return DEFAULT_MAX_DRAFT if self.draft is not None else 0


@dataclass(frozen=True)
class LlamaParams:
    """Exactly the llama.cpp parameters loading will use."""

    n_gpu_layers: int
    n_ctx: int
    n_seq_max: int
    n_batch: int
    n_ubatch: int
    kv_unified: bool
    type_k: KvCacheType
    type_v: KvCacheType
    flash_attn: bool  # True: enabled (required by a quantized V cache); False: auto
    swa_full: bool
    n_threads: int
    n_threads_batch: int
    projector_use_gpu: bool = False  # mtmd_context_params.use_gpu
    draft_n_gpu_layers: int = 0
    # Logit rows llama.cpp reserves (0: n_batch). A batch with more aborts the process:
    # the batch planner keeps under it.
    n_outputs_max: int = 0
    n_outputs_max_per_seq: int = 0

    @property
    def outputs_max(self) -> int:
        """The logit rows one batch may ask for, as llama.cpp will enforce it."""
        return min(self.n_outputs_max, self.n_batch) if self.n_outputs_max else self.n_batch

    @property
    def flash_attn_type(self) -> int:
        """llama_context_params.flash_attn_type: ENABLED (1) or AUTO (-1).

        Auto lets llama.cpp probe each device; it turns flash attention on wherever the
        backend supports it (always on the CPU), which the compute estimate assumes.
        """
        return FLASH_ATTN_ENABLED if self.flash_attn else FLASH_ATTN_AUTO

    @property
    def n_ctx_seq(self) -> int:
        """KV cells per conversation: decode returns 1 when a sequence reaches this."""
        return cells_per_sequence(self.n_ctx, self.n_seq_max, self.kv_unified)


def output_rows(n_seq: int, max_draft: int, n_batch: int) -> tuple[int, int]:
    """(n_outputs_max, n_outputs_max_per_seq): a row per sequence plus its draft rows,
    within the batch (llama-server's common_speculative_get_output_limits)."""
    per_seq = min(n_batch, 1 + max(0, max_draft))
    return min(n_batch, max(1, n_seq) * per_seq), per_seq


def cells_per_sequence(n_ctx: int, n_seq: int, kv_unified: bool) -> int:
    """KV cells one conversation may fill: all of them in a unified cache, else its share.
    The one rule for it: the plan, the executor and the draft model all ask here."""
    return n_ctx if kv_unified else n_ctx // max(1, n_seq)


@dataclass(frozen=True)
class DeviceMemory:
    """Predicted bytes on one device ("CPU" or a GPU name)."""

    device: str
    weights: int
    kv_cache: int
    compute: int
    output: int  # llama.cpp's logits/embeddings output buffer
    projector: int
    draft: int
    available: int  # free bytes on the device when planned
    reserve: int = 0  # of ``available``, kept free for the OS, the app or the GPU driver
    repack: int = 0  # CPU_REPACK: weights copied into this CPU's SIMD layout
    runtime: int = 0  # outside llama.cpp's named buffers: vocabulary tables, working set

    @property
    def total(self) -> int:
        return (
            self.weights
            + self.repack
            + self.runtime
            + self.kv_cache
            + self.compute
            + self.output
            + self.projector
            + self.draft
        )

    @property
    def usable(self) -> int:
        return max(0, self.available - self.reserve)

    @property
    def deficit(self) -> int:
        return max(0, self.total - self.usable)


@dataclass(frozen=True)
class Suggestion:
    """A concrete change that makes the plan fit; ``request`` is the one-click fix."""

    description: str
    request: LoadRequest


@dataclass(frozen=True)
class LoadPlan:
    model: ModelInfo
    request: LoadRequest
    params: LlamaParams
    memory: tuple[DeviceMemory, ...]
    verdict: Verdict
    limiting_resource: str | None  # e.g. "RAM", "VRAM on NVIDIA H200"
    deficit: int  # bytes missing on the limiting resource (0 when it fits)
    reasons: tuple[str, ...]  # one line each, for people
    suggestions: tuple[Suggestion, ...]
    phases: tuple[LoadPhase, ...]

    @property
    def total_bytes(self) -> int:
        return sum(m.total for m in self.memory)

    @property
    def fits(self) -> bool:
        return self.verdict is not Verdict.DOES_NOT_FIT

    @property
    def context_per_conversation(self) -> int:
        """Tokens each conversation can hold (after clamping and padding)."""
        return self.params.n_ctx_seq


# -- the model's shape, as the memory formulas need it ---------------------------------------


# Sliding-window layer patterns llama.cpp hard-codes per architecture (models/*.cpp
# load_swa_pattern): layer il uses the window unless il % n == n - 1. A GGUF may override
# the number with ``<arch>.attention.sliding_window_pattern``.
#   arch: (pattern, default window, SWA only when the GGUF gives a positive window)
_SWA_ARCHS: dict[str, tuple[int, int, bool]] = {
    "gemma2": (2, 4096, False),
    "gemma3": (6, 0, True),
    "cohere2": (4, 0, False),
    "gpt-oss": (2, 0, False),
    "llama4": (4, 8192, False),  # chunked attention; a window of 0 turns it off
}


@dataclass(frozen=True)
class ModelShape:
    """The hyper-parameters the memory formulas use, derived once from a ModelInfo."""

    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int  # the largest over layers
    key_length: int
    value_length: int
    n_ff: int
    n_vocab: int
    n_swa: int
    swa_layers: tuple[bool, ...]  # per block: uses the sliding window
    kv_heads: tuple[int, ...]  # per block: KV heads (0: the layer has no KV cache)
    block_bytes: tuple[int, ...]  # per block
    tensor_bytes: int
    embedding_bytes: int  # token_embd (+ norms): always on the host
    output_bytes: int  # output.weight; 0 when tied to the token embeddings
    matmul_weights: tuple[tuple[str, int, int], ...] = ()  # ModelInfo.matmul_weights
    n_merges: int = 0

    @property
    def runtime_bytes(self) -> int:
        """Vocabulary tables and the fixed working set llama.cpp keeps on the host."""
        return (
            self.n_vocab * VOCAB_BYTES_PER_TOKEN + self.n_merges * VOCAB_BYTES_PER_MERGE + RUNTIME_FIXED_BYTES
        )

    @property
    def has_swa(self) -> bool:
        return any(self.swa_layers)

    @property
    def n_gpu_layers_all(self) -> int:
        """llama.cpp's "all layers": every block plus the output layer."""
        return self.n_layer + 1

    @property
    def output_layer_gpu_bytes(self) -> int:
        # A tied output layer is loaded a second time, onto the output layer's device.
        return self.output_bytes if self.output_bytes else self.embedding_bytes


def model_shape(info: ModelInfo) -> ModelShape:
    """Derive the formulas' inputs; raise InvalidLoadRequest when the header lacks them."""
    name = info.display_name
    n_layer = info.block_count if info.block_count is not None else len(info.block_tensor_bytes)
    missing = [
        label
        for label, value in (
            ("layer count", n_layer),
            ("embedding size", info.embedding_length),
            ("attention head count", info.head_count),
            ("vocabulary size", info.vocab_size),
        )
        if not value
    ]
    if missing:
        raise InvalidLoadRequest(
            f"{name}: the file does not give its {', '.join(missing)}; cannot plan memory"
        )
    n_embd = int(info.embedding_length or 0)
    n_head = int(info.head_count or 0)
    n_head_kv = int(info.head_count_kv or n_head)
    key_length = int(info.key_length or n_embd // n_head)
    value_length = int(info.value_length or key_length)
    n_ff = int(info.feed_forward_length or 0)
    # Some GGUFs give per-layer arrays instead (hybrid models: 0 KV heads = no KV cache).
    kv_per_layer = tuple(getattr(info, "head_count_kv_per_layer", ()) or ())
    kv_heads = tuple(int(h) for h in kv_per_layer[:n_layer]) if len(kv_per_layer) >= n_layer else ()
    kv_heads = kv_heads or (n_head_kv,) * n_layer
    n_head_kv = max(kv_heads, default=n_head_kv)
    ff_per_layer = tuple(getattr(info, "feed_forward_length_per_layer", ()) or ())
    n_ff = max([n_ff, *(int(f) for f in ff_per_layer)]) or 4 * n_embd

    blocks = tuple(info.block_tensor_bytes[:n_layer])
    if len(blocks) < n_layer:  # a header without per-block sizes: spread the rest evenly
        rest = max(0, info.tensor_bytes - info.other_tensor_bytes - sum(blocks))
        missing_blocks = n_layer - len(blocks)
        blocks = blocks + (rest // missing_blocks,) * missing_blocks
    embedding = max(0, info.other_tensor_bytes - info.output_tensor_bytes)

    swa_layers, n_swa = _swa_layers(info, n_layer)
    return ModelShape(
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        key_length=key_length,
        value_length=value_length,
        n_ff=n_ff,
        n_vocab=int(info.vocab_size or 0),
        n_swa=n_swa,
        swa_layers=swa_layers,
        kv_heads=kv_heads,
        block_bytes=blocks,
        tensor_bytes=info.tensor_bytes,
        embedding_bytes=embedding,
        output_bytes=info.output_tensor_bytes,
        matmul_weights=info.matmul_weights,
        n_merges=info.merges_count,
    )


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


def _swa_layers(info: ModelInfo, n_layer: int) -> tuple[tuple[bool, ...], int]:
    known = _SWA_ARCHS.get(info.architecture)
    if known is None:
        return (False,) * n_layer, 0
    pattern, default_window, needs_window = known
    window = info.sliding_window
    if needs_window and not window:
        return (False,) * n_layer, 0
    if window == 0 and info.architecture == "llama4":
        return (False,) * n_layer, 0
    key = f"{info.architecture}.attention.sliding_window_pattern"
    per_layer = (getattr(info, "arrays", None) or {}).get(key)
    if per_layer and len(per_layer) >= n_layer:  # llama.cpp reads a per-layer bool array first
        return tuple(bool(x) for x in per_layer[:n_layer]), int(window or default_window)
    override = info.metadata.get(key)
    if isinstance(override, int) and not isinstance(override, bool) and override >= 0:
        pattern = override
    # llama_hparams::set_swa_pattern: pattern 0 = every layer, 1 = none.
    flags = tuple(pattern == 0 or (il % pattern < pattern - 1) for il in range(n_layer))
    return flags, int(window or default_window)


# -- formulas -----------------------------------------------------------------------------


def pad_context(n: int) -> int:
    """Round up to llama.cpp's 256-cell step."""
    return -(-n // CONTEXT_STEP) * CONTEXT_STEP


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


# -- devices and layer placement ----------------------------------------------------------


def _reserve(total: int, fraction: float, low: int, high: int) -> int:
    return int(min(max(low, fraction * total), high))


def ram_reserve(hardware: HardwareSnapshot) -> int:
    return _reserve(hardware.ram_total, RAM_RESERVE_FRACTION, RAM_RESERVE_MIN, RAM_RESERVE_MAX)


def vram_reserve(gpu: GpuInfo) -> int:
    return _reserve(gpu.vram_total, VRAM_RESERVE_FRACTION, VRAM_RESERVE_MIN, VRAM_RESERVE_MAX)


def _gpu_names(gpus: tuple[GpuInfo, ...]) -> tuple[str, ...]:
    names = [g.name for g in gpus]
    return tuple(f"{g.name} #{g.index}" if names.count(g.name) > 1 else g.name for g in gpus)


def layer_devices(n_layer: int, n_gpu_layers: int, gpus: tuple[GpuInfo, ...]) -> tuple[int, ...]:
    """Device of each block and, last, of the output layer: -1 for the CPU, else a GPU index
    into ``gpus``. Mirrors llama_model::load_tensors: the last ``n_gpu_layers`` of the
    n_layer + 1 positions go to the GPUs, split in proportion to their free memory."""
    total_positions = n_layer + 1
    if not gpus or n_gpu_layers <= 0:
        return (-1,) * total_positions
    act = min(n_gpu_layers, total_positions)
    start = total_positions - act
    free = [max(1, g.vram_free) for g in gpus]
    cum, acc = [], 0.0
    for f in free:
        acc += f
        cum.append(acc / sum(free))
    out: list[int] = []
    for il in range(total_positions):
        if il < start:
            out.append(-1)
            continue
        x = (il - start) / act
        # std::upper_bound(splits, x): first split point strictly greater than x
        out.append(next((i for i, c in enumerate(cum) if c > x), len(gpus) - 1))
    return tuple(out)


@dataclass
class _Tally:
    weights: int = 0
    repack: int = 0
    runtime: int = 0
    kv_cache: int = 0
    compute: int = 0
    output: int = 0
    projector: int = 0
    draft: int = 0

    @property
    def total(self) -> int:
        return (
            self.weights
            + self.repack
            + self.runtime
            + self.kv_cache
            + self.compute
            + self.output
            + self.projector
            + self.draft
        )


def _model_tallies(
    shape: ModelShape,
    params: LlamaParams,
    gpus: tuple[GpuInfo, ...],
    use_gpu: bool,
    simd: tuple[str, ...] = (),
) -> tuple[_Tally, list[_Tally]]:
    """Weights, KV, compute and output of one model, per device (CPU, then each GPU)."""
    cpu = _Tally()
    gpu = [_Tally() for _ in gpus]
    devices = layer_devices(shape.n_layer, params.n_gpu_layers if use_gpu else 0, gpus if use_gpu else ())

    def on(dev: int) -> _Tally:
        return cpu if dev < 0 else gpu[dev]

    cpu.weights += shape.embedding_bytes
    cpu.runtime += shape.runtime_bytes
    for il, nbytes in enumerate(shape.block_bytes):
        on(devices[il]).weights += nbytes
    out_dev = devices[-1]
    if out_dev < 0:
        cpu.weights += shape.output_bytes  # tied: the embeddings already counted serve both
    else:
        gpu[out_dev].weights += shape.output_layer_gpu_bytes
    repack = repacked_bytes(shape.matmul_weights, simd) or 0
    if repack:
        # Only weights the CPU multiplies with are repacked: its share of blocks and output.
        on_cpu = sum(b for il, b in enumerate(shape.block_bytes) if devices[il] < 0)
        on_cpu += shape.output_layer_gpu_bytes if out_dev < 0 else 0
        everything = sum(shape.block_bytes) + shape.output_layer_gpu_bytes
        cpu.repack += repack if on_cpu >= everything else repack * on_cpu // max(1, everything)

    # offload_kqv (default on): each layer's cache lives on that layer's device.
    for il, nbytes in enumerate(kv_cache_bytes_per_layer(shape, params)):
        on(devices[il]).kv_cache += nbytes

    est = compute_estimate(shape, params)
    if not use_gpu or not gpus:
        cpu.compute += est.peak
    else:
        # The GPU holding the output layer runs the logits; any GPU with layers runs them.
        # With no layers offloaded, llama.cpp still offloads large-batch matrix products to
        # the first GPU (op_offload), which reserves the same worst case there.
        gpu_devs = {d for d in devices if d >= 0} or {0}
        for d in gpu_devs:
            gpu[d].compute += est.peak if d == (out_dev if out_dev >= 0 else 0) else est.layers
        cpu.compute += est.layers if any(d < 0 for d in devices[:-1]) else est.host_staging
    cpu.output += output_buffer_bytes(shape, params)  # host memory (pinned with a GPU)
    return cpu, gpu


# -- planning -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Settings:
    """The request after validation, clamping and padding."""

    context: int  # cells per conversation, padded
    parallel: int
    n_ubatch: int
    n_batch: int
    threads: int
    reasons: tuple[str, ...]


def _validate(
    info: ModelInfo, shape: ModelShape, request: LoadRequest, hardware: HardwareSnapshot
) -> _Settings:
    if request.context_per_conversation < MIN_CONTEXT:
        raise InvalidLoadRequest(
            f"Context per conversation must be at least {MIN_CONTEXT} tokens "
            f"(got {request.context_per_conversation})"
        )
    if not 1 <= request.parallel <= MAX_PARALLEL:
        raise InvalidLoadRequest(
            f"Parallel conversations must be 1 to {MAX_PARALLEL} (got {request.parallel})"
        )
    if request.gpu_layers is not None and request.gpu_layers < 0:
        raise InvalidLoadRequest(f"GPU layers must be 0 or more (got {request.gpu_layers})")
    if request.n_ubatch is not None and not 1 <= request.n_ubatch <= MAX_N_UBATCH:
        raise InvalidLoadRequest(
            f"Micro-batch (n_ubatch) must be 1 to {MAX_N_UBATCH} (got {request.n_ubatch})"
        )
    if request.threads is not None and request.threads < 1:
        raise InvalidLoadRequest(f"Threads must be 1 or more (got {request.threads})")
    if not 0 <= request.max_draft <= MAX_DRAFT_LIMIT:
        raise InvalidLoadRequest(
            f"Draft length must be 0 to {MAX_DRAFT_LIMIT} tokens (got {request.max_draft})"
        )
    if request.kv_type.is_quantized:
        block = request.kv_type.block_size
        # llama_init_from_model refuses a quantized cache whose rows are not whole blocks.
        for label, n in (("key", shape.key_length), ("value", shape.value_length)):
            if n % block:
                raise InvalidLoadRequest(
                    f"A {request.kv_type.value} KV cache needs a {label} head size divisible by {block}; "
                    f"{info.display_name}'s is {n}: use f16"
                )
    if request.draft is not None and request.draft.is_projector:
        raise InvalidLoadRequest(f"{request.draft.display_name} is a projector, not a draft model")
    if request.projector is not None:
        proj = request.projector.projector
        if not request.projector.is_projector or proj is None:
            raise InvalidLoadRequest(f"{request.projector.display_name} is not a vision projector")
        if proj.projection_dim != shape.n_embd:
            # mtmd_init_from_file fails when the projector's output size differs.
            raise InvalidLoadRequest(
                f"{request.projector.display_name} outputs {proj.projection_dim}-wide embeddings; "
                f"{info.display_name} expects {shape.n_embd}"
            )

    reasons: list[str] = []
    context = request.context_per_conversation
    train = info.context_length
    if train and context > train:
        # Floor to the 256 step so padding cannot push a conversation past training length.
        context = max(MIN_CONTEXT, train // CONTEXT_STEP * CONTEXT_STEP) if train >= MIN_CONTEXT else train
        reasons.append(
            f"Context per conversation limited to {context:,} tokens: "
            f"{info.display_name} was trained on {train:,}."
        )
    padded = pad_context(context)
    if padded != context:
        reasons.append(
            f"Context per conversation rounded up to {padded:,} tokens (llama.cpp allocates in steps of 256)."
        )

    image_tokens = non_causal_image_tokens(request.projector)
    n_ubatch = request.n_ubatch or DEFAULT_N_UBATCH
    if image_tokens > n_ubatch:
        # mtmd evaluates an image's tokens in one micro-batch (non-causal attention).
        reasons.append(f"Micro-batch raised to {image_tokens} tokens so one image fits in it.")
        n_ubatch = image_tokens
    n_ctx = padded * request.parallel
    n_batch = min(max(DEFAULT_N_BATCH, n_ubatch), n_ctx)
    n_ubatch = min(n_ubatch, n_batch)
    threads = request.threads or max(1, hardware.physical_cores)
    return _Settings(padded, request.parallel, n_ubatch, n_batch, threads, tuple(reasons))


@dataclass(frozen=True)
class _Layout:
    params: LlamaParams
    cpu: _Tally
    gpus: tuple[_Tally, ...]
    draft_on_gpu: bool
    projector_on_gpu: bool


def _layout(
    shape: ModelShape,
    base: LlamaParams,
    n_gpu_layers: int,
    hardware: HardwareSnapshot,
    use_gpu: bool,
    request: LoadRequest,
    draft_shape: ModelShape | None,
    place_extras: bool,
) -> _Layout:
    params = replace(base, n_gpu_layers=n_gpu_layers)
    gpus = hardware.gpus if use_gpu else ()
    cpu, gpu = _model_tallies(shape, params, gpus, use_gpu, hardware.simd)

    proj_bytes = 0
    if request.projector is not None:
        proj_bytes = request.projector.tensor_bytes + projector_compute_bytes(request.projector)
    projector_on_gpu = False
    if proj_bytes:
        # mtmd can use the first GPU (use_gpu). The model's layers are fitted first (they
        # serve every token); the projector takes the GPU only if room is left.
        projector_on_gpu = (
            bool(gpus) and place_extras and proj_bytes <= _usable_gpu(hardware, 0) - gpu[0].total
        )
        (gpu[0] if projector_on_gpu else cpu).projector += proj_bytes

    draft_on_gpu = False
    draft_layers = 0
    if draft_shape is not None:
        d_all = draft_shape.n_gpu_layers_all
        d_params = replace(
            params,
            n_gpu_layers=d_all if gpus else 0,
            draft_n_gpu_layers=0,
            n_outputs_max=params.n_seq_max,  # the draft model samples one row per sequence
            n_outputs_max_per_seq=1,
        )
        d_cpu, d_gpu = _model_tallies(draft_shape, d_params, gpus[:1], bool(gpus), hardware.simd)
        d_gpu_total = d_gpu[0].total if d_gpu else 0
        # The draft goes wholly onto the first GPU when the target is fully offloaded and
        # there is room left; otherwise it runs on the CPU.
        if gpus and place_extras and n_gpu_layers >= shape.n_gpu_layers_all:
            draft_on_gpu = d_gpu_total <= _usable_gpu(hardware, 0) - gpu[0].total
        if draft_on_gpu:
            gpu[0].draft += d_gpu_total
            cpu.draft += d_cpu.total
            draft_layers = d_all
        else:
            d_params = replace(d_params, n_gpu_layers=0)
            d_cpu, _ = _model_tallies(draft_shape, d_params, (), False, hardware.simd)
            cpu.draft += d_cpu.total
    params = replace(params, projector_use_gpu=projector_on_gpu, draft_n_gpu_layers=draft_layers)
    return _Layout(params, cpu, tuple(gpu), draft_on_gpu, projector_on_gpu)


def _usable_gpu(hardware: HardwareSnapshot, i: int) -> int:
    g = hardware.gpus[i]
    return max(0, g.vram_free - vram_reserve(g))


def _gpus_fit(layout: _Layout, hardware: HardwareSnapshot) -> bool:
    return all(t.total <= _usable_gpu(hardware, i) for i, t in enumerate(layout.gpus))


def plan_load(info: ModelInfo, hardware: HardwareSnapshot, request: LoadRequest) -> LoadPlan:
    """Predict memory per device, choose llama.cpp parameters, and say whether it fits.

    Raises InvalidLoadRequest for settings llama.cpp would reject.
    """
    return _plan(info, hardware, request, with_suggestions=True)


def _plan(
    info: ModelInfo, hardware: HardwareSnapshot, request: LoadRequest, with_suggestions: bool
) -> LoadPlan:
    if info.is_projector:
        raise InvalidLoadRequest(f"{info.display_name} is a vision projector, not a language model")
    shape = model_shape(info)
    settings = _validate(info, shape, request, hardware)
    draft_shape = model_shape(request.draft) if request.draft is not None else None
    if draft_shape is not None and request.kv_type.is_quantized:
        block = request.kv_type.block_size
        if draft_shape.key_length % block or draft_shape.value_length % block:
            raise InvalidLoadRequest(
                f"A {request.kv_type.value} KV cache needs head sizes divisible by {block}; "
                f"the draft model's are {draft_shape.key_length}/{draft_shape.value_length}: use f16"
            )
    reasons = list(settings.reasons)

    quantized_v = request.kv_type.is_quantized
    n_outputs_max, n_outputs_per_seq = output_rows(settings.parallel, request.draft_rows, settings.n_batch)
    base = LlamaParams(
        n_gpu_layers=0,
        n_ctx=settings.context * settings.parallel,
        n_seq_max=settings.parallel,
        n_batch=settings.n_batch,
        n_ubatch=settings.n_ubatch,
        kv_unified=False,  # each conversation gets exactly its own context
        type_k=request.kv_type,
        type_v=request.kv_type,
        flash_attn=quantized_v,  # a quantized V cache requires it; otherwise llama.cpp decides
        swa_full=True,  # full-size SWA caches keep cached prefixes reusable
        n_threads=settings.threads,
        n_threads_batch=settings.threads,
        n_outputs_max=n_outputs_max,
        n_outputs_max_per_seq=n_outputs_per_seq,
    )
    if quantized_v:
        reasons.append(f"Flash attention on: a {request.kv_type.value} V cache requires it.")

    use_gpu = hardware.has_usable_gpu
    all_layers = shape.n_gpu_layers_all
    if not use_gpu:
        n_gpu_layers = 0
        if hardware.offload_note:
            reasons.append(hardware.offload_note)
        elif request.gpu_layers:
            reasons.append(f"No usable GPU ({hardware.gpu_status}): everything runs on the CPU.")
    elif request.gpu_layers is not None:
        n_gpu_layers = min(request.gpu_layers, all_layers)
    else:
        n_gpu_layers = _auto_gpu_layers(shape, base, hardware, request, draft_shape)

    layout = _layout(shape, base, n_gpu_layers, hardware, use_gpu, request, draft_shape, place_extras=True)
    memory = _device_memory(layout, hardware, use_gpu)

    short = [m for m in memory if m.deficit > 0]
    if short:
        worst = max(short, key=lambda m: m.deficit)
        verdict = Verdict.DOES_NOT_FIT
        limiting: str | None = "RAM" if worst.device == "CPU" else f"VRAM on {worst.device}"
        deficit = worst.deficit
    else:
        # Partial: a usable GPU holds only some layers (asking for none is a CPU load).
        partial = use_gpu and n_gpu_layers < all_layers and request.gpu_layers != 0
        verdict = Verdict.PARTIAL_OFFLOAD if partial else Verdict.FITS
        limiting, deficit = None, 0
        # Only RAM swaps; VRAM keeps its own reserve, and auto offload fills it on purpose.
        ram = memory[0]
        if ram.total > (1 - TIGHT_MARGIN) * ram.usable:
            verdict = Verdict.TIGHT
            reasons.append(
                f"Tight: it needs {format_bytes(ram.total)} of the {format_bytes(ram.usable)} of RAM "
                f"left, less than {TIGHT_MARGIN:.0%} spare; the system may swap."
            )

    reasons += _placement_reasons(shape, layout.params, use_gpu, request, hardware)
    reasons += _memory_reasons(info, shape, layout, memory, request, hardware.simd)

    suggestions: tuple[Suggestion, ...] = ()
    if with_suggestions and verdict is not Verdict.FITS:
        want: Callable[[LoadPlan], bool] = {
            Verdict.DOES_NOT_FIT: lambda p: p.fits,
            Verdict.TIGHT: lambda p: p.verdict in (Verdict.FITS, Verdict.PARTIAL_OFFLOAD),  # headroom
            Verdict.PARTIAL_OFFLOAD: lambda p: p.verdict is Verdict.FITS,
        }[verdict]
        if verdict is not Verdict.PARTIAL_OFFLOAD or request.gpu_layers is None:
            suggestions = _suggest(info, hardware, request, shape, settings, layout, memory, want)
        if verdict is Verdict.DOES_NOT_FIT and not suggestions:
            reasons.append("No single change makes it fit on this machine.")

    phases = [LoadPhase.VALIDATE, LoadPhase.WEIGHTS, LoadPhase.CONTEXT]
    if request.projector is not None:
        phases.append(LoadPhase.PROJECTOR)
    if request.draft is not None:
        phases.append(LoadPhase.DRAFT)
    phases += [LoadPhase.WARMUP, LoadPhase.READY]

    return LoadPlan(
        model=info,
        request=request,
        params=layout.params,
        memory=memory,
        verdict=verdict,
        limiting_resource=limiting,
        deficit=deficit,
        reasons=tuple(reasons),
        suggestions=suggestions,
        phases=tuple(phases),
    )


def _auto_gpu_layers(
    shape: ModelShape,
    base: LlamaParams,
    hardware: HardwareSnapshot,
    request: LoadRequest,
    draft_shape: ModelShape | None,
) -> int:
    """The most layers whose weights, KV cache and compute fit in free VRAM (minus reserve).

    GPU memory only grows with more layers, so a binary search finds the largest count.
    The projector and draft are placed only where room is left, so they do not count here.
    """

    def fits(n: int) -> bool:
        layout = _layout(shape, base, n, hardware, True, request, draft_shape, place_extras=False)
        return _gpus_fit(layout, hardware)

    lo, hi = 0, shape.n_gpu_layers_all
    if fits(hi):
        return hi
    while lo < hi - 1:  # invariant: fits(lo) or lo == 0; not fits(hi)
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _device_memory(layout: _Layout, hardware: HardwareSnapshot, use_gpu: bool) -> tuple[DeviceMemory, ...]:
    def device(name: str, t: _Tally, available: int, reserve: int) -> DeviceMemory:
        return DeviceMemory(
            device=name,
            weights=t.weights,
            repack=t.repack,
            runtime=t.runtime,
            kv_cache=t.kv_cache,
            compute=t.compute,
            output=t.output,
            projector=t.projector,
            draft=t.draft,
            available=available,
            reserve=reserve,
        )

    out = [device("CPU", layout.cpu, hardware.ram_available, ram_reserve(hardware))]
    if use_gpu:
        names = _gpu_names(hardware.gpus)
        for i, t in enumerate(layout.gpus):
            g = hardware.gpus[i]
            out.append(device(names[i], t, g.vram_free, vram_reserve(g)))
    return tuple(out)


def _placement_reasons(
    shape: ModelShape,
    params: LlamaParams,
    use_gpu: bool,
    request: LoadRequest,
    hardware: HardwareSnapshot,
) -> list[str]:
    reasons: list[str] = []
    all_layers = shape.n_gpu_layers_all
    if use_gpu:
        n = params.n_gpu_layers
        gpu = _gpu_names(hardware.gpus)[0] if len(hardware.gpus) == 1 else f"{len(hardware.gpus)} GPUs"
        if n >= all_layers:
            reasons.append(f"All {all_layers} layers ({shape.n_layer} blocks + output) on {gpu}.")
        elif n == 0:
            why = "as requested" if request.gpu_layers == 0 else "no layer fits in free VRAM"
            reasons.append(f"No layers on {gpu} ({why}): the model runs on the CPU.")
        else:
            why = "as requested" if request.gpu_layers is not None else "as many as fit in free VRAM"
            reasons.append(
                f"{n} of {all_layers} layers on {gpu} ({why}); the other {all_layers - n} run on the CPU, "
                "which is slower."
            )
    if shape.has_swa:
        n_swa = sum(shape.swa_layers)
        reasons.append(
            f"{n_swa} of {shape.n_layer} layers use a {shape.n_swa:,}-token sliding window; they still get "
            "full-size KV caches so cached prefixes can be reused."
        )
    return reasons


def _memory_reasons(
    info: ModelInfo,
    shape: ModelShape,
    layout: _Layout,
    memory: tuple[DeviceMemory, ...],
    request: LoadRequest,
    simd: tuple[str, ...],
) -> list[str]:
    reasons: list[str] = []
    p = layout.params
    kv_total = sum(m.kv_cache for m in memory)
    reasons.append(
        f"KV cache {format_bytes(kv_total)}: {p.n_seq_max} × {p.n_ctx_seq:,} tokens × {shape.n_layer} layers "
        f"({p.type_k.value})."
    )
    if memory[0].repack:
        kinds = sorted({t for t, _m, _n in shape.matmul_weights if repacked_bytes(((t, 8, 1),), simd)})
        reasons.append(
            f"{format_bytes(memory[0].repack)} more RAM for {'/'.join(kinds)} weights re-laid-out for this "
            "CPU's SIMD width (llama.cpp's CPU_REPACK copy, beside the mapped file)."
        )
    elif (
        repacked_bytes(shape.matmul_weights, simd) is None
        and layout.params.n_gpu_layers < shape.n_gpu_layers_all
    ):
        reasons.append(
            "CPU_REPACK not predicted: this llama.cpp build's CPU features are unknown, and on AVX2 "
            "or ARM builds quantized weights may take up to their size again."
        )
    draft_rows = p.n_outputs_max_per_seq - 1
    reasons.append(
        f"Logits reserved for {p.outputs_max} row{'s' if p.outputs_max > 1 else ''}: one per conversation"
        + (f" plus {draft_rows} draft row{'s' if draft_rows > 1 else ''} each." if draft_rows > 0 else ".")
    )
    if request.projector is not None:
        where = "GPU" if layout.projector_on_gpu else "CPU"
        reasons.append(f"Projector {request.projector.display_name} on the {where}.")
    if request.draft is not None:
        where = "GPU" if layout.draft_on_gpu else "CPU"
        reasons.append(f"Draft model {request.draft.display_name} on the {where}.")
        if request.draft.vocab_size and request.draft.vocab_size != info.vocab_size:
            reasons.append(
                f"The draft's vocabulary ({request.draft.vocab_size:,}) differs from the model's "
                f"({info.vocab_size:,}): drafts may be rejected."
            )
    for m in memory:
        label = "RAM" if m.device == "CPU" else f"VRAM on {m.device}"
        verb = "fits in" if m.deficit == 0 else "exceeds"
        reasons.append(
            f"Needs {format_bytes(m.total)} of {label}: {verb} the {format_bytes(m.available)} free "
            f"(keeping {format_bytes(m.reserve)} spare)."
        )
    if memory[0].deficit and shape.tensor_bytes > memory[0].usable and len(memory) == 1:
        reasons.append(f"The weights alone ({format_bytes(shape.tensor_bytes)}) exceed the available RAM.")
    return reasons


# -- suggestions ------------------------------------------------------------------------------


def _suggest(
    info: ModelInfo,
    hardware: HardwareSnapshot,
    request: LoadRequest,
    shape: ModelShape,
    settings: _Settings,
    layout: _Layout,
    memory: tuple[DeviceMemory, ...],
    want: Callable[[LoadPlan], bool],
) -> tuple[Suggestion, ...]:
    """Single changes that give the plan what it lacks (``want``: fit, headroom, or a full
    offload), each verified by planning it again; the smallest change of each kind."""

    def ok(req: LoadRequest) -> bool:
        try:
            plan = _plan(info, hardware, req, with_suggestions=False)
        except InvalidLoadRequest:
            return False
        return want(plan)

    def largest(values: list[int], make: Callable[[int], LoadRequest]) -> int | None:
        """The largest value (ascending list) whose request fits, assuming monotonicity."""
        if not values or not ok(make(values[0])):
            return None
        lo, hi = 0, len(values)  # values[lo] fits; values[hi:] unknown or failing
        while lo < hi - 1:
            mid = (lo + hi) // 2
            if ok(make(values[mid])):
                lo = mid
            else:
                hi = mid
        return values[lo]

    out: list[Suggestion] = []

    def ctx_req(c: int) -> LoadRequest:
        return replace(request, context_per_conversation=c)

    contexts = list(range(MIN_CONTEXT, settings.context, CONTEXT_STEP))
    if (c := largest(contexts, ctx_req)) is not None:
        out.append(Suggestion(f"Context {c:,} tokens per conversation", ctx_req(c)))

    def par_req(n: int) -> LoadRequest:
        return replace(request, parallel=n)

    if (n := largest(list(range(1, request.parallel)), par_req)) is not None:
        plural = "s" if n > 1 else ""
        out.append(Suggestion(f"{n} parallel conversation{plural}", par_req(n)))

    smaller_kv = {
        KvCacheType.F16: (KvCacheType.Q8_0, KvCacheType.Q4_0),
        KvCacheType.Q8_0: (KvCacheType.Q4_0,),
        KvCacheType.Q4_0: (),
    }[request.kv_type]
    for kv in smaller_kv:  # the least lossy one that fits
        candidate = replace(request, kv_type=kv)
        if ok(candidate):
            out.append(Suggestion(f"{kv.value} KV cache (smaller, slightly less exact)", candidate))
            break

    image_tokens = non_causal_image_tokens(request.projector)
    ubatches = [u for u in (32, 64, 128, 256) if u < settings.n_ubatch and u >= image_tokens]

    def ub_req(u: int) -> LoadRequest:
        return replace(request, n_ubatch=u)

    if (u := largest(ubatches, ub_req)) is not None:
        out.append(
            Suggestion(f"Micro-batch of {u} tokens (smaller compute buffer, slower prompts)", ub_req(u))
        )

    if request.gpu_layers is not None and hardware.has_usable_gpu:
        if any(m.deficit for m in memory[1:]):

            def gl_req(n: int) -> LoadRequest:
                return replace(request, gpu_layers=n)

            if (n := largest(list(range(0, layout.params.n_gpu_layers)), gl_req)) is not None:
                out.append(Suggestion(f"{n} GPU layers", gl_req(n)))
        elif ok(replace(request, gpu_layers=None)):
            out.append(Suggestion("GPU layers: as many as fit", replace(request, gpu_layers=None)))

    if not out:
        # Nothing single works: the two levers that shrink the biggest buffers together.
        for u in reversed(ubatches):
            if (
                c := largest(contexts, lambda c, u=u: replace(ub_req(u), context_per_conversation=c))
            ) is not None:
                out.append(
                    Suggestion(
                        f"Micro-batch of {u} tokens and context {c:,} tokens per conversation",
                        replace(ub_req(u), context_per_conversation=c),
                    )
                )
                break

    if request.draft is not None and ok(replace(request, draft=None)):
        out.append(Suggestion("Load without the draft model", replace(request, draft=None)))
    if request.projector is not None and ok(replace(request, projector=None)):
        out.append(Suggestion("Load without the projector (no images)", replace(request, projector=None)))
    return tuple(out)


# -- for people ----------------------------------------------------------------------------


def describe_plan(plan: LoadPlan) -> list[str]:
    """The plan as lines of text, as the CLI prints it and the GUI shows it."""
    p = plan.params
    lines = [f"{plan.model.display_name}: {plan.verdict.value}"]
    if plan.limiting_resource:
        lines[0] += f" ({plan.limiting_resource} short by {format_bytes(plan.deficit)})"
    lines.append(
        f"Context: {p.n_ctx_seq:,} tokens × {p.n_seq_max} conversation{'s' if p.n_seq_max > 1 else ''} "
        f"(n_ctx {p.n_ctx:,}), batch {p.n_batch}/{p.n_ubatch}, KV {p.type_k.value}, "
        f"GPU layers {p.n_gpu_layers}, threads {p.n_threads}, "
        f"flash attention {'on' if p.flash_attn else 'auto'}"
    )
    for m in plan.memory:
        parts = [
            f"{label} {format_bytes(value)}"
            for label, value in (
                ("weights", m.weights),
                ("KV cache", m.kv_cache),
                ("compute", m.compute),
                ("output", m.output),
                ("projector", m.projector),
                ("draft", m.draft),
            )
            if value
        ]
        lines.append(
            f"{m.device}: {format_bytes(m.total)} of {format_bytes(m.available)} free — {', '.join(parts)}"
        )
    lines += [f"  • {r}" for r in plan.reasons]
    if plan.suggestions:
        lines.append("To make it fit:" if not plan.fits else "To fit entirely on the GPU:")
        lines += [f"  → {s.description}" for s in plan.suggestions]
    lines.append("Load phases: " + " → ".join(phase.value for phase in plan.phases))
    return lines


__all__ = [
    "ComputeEstimate",
    "DeviceMemory",
    "InvalidLoadRequest",
    "KvCacheType",
    "LlamaParams",
    "LoadPhase",
    "LoadPlan",
    "LoadRequest",
    "ModelShape",
    "Suggestion",
    "Verdict",
    "compute_estimate",
    "describe_plan",
    "kv_cache_bytes_per_layer",
    "kv_layer_bytes",
    "layer_devices",
    "model_shape",
    "non_causal_image_tokens",
    "output_buffer_bytes",
    "pad_context",
    "plan_load",
    "projector_compute_bytes",
    "ram_reserve",
    "swa_cache_cells",
    "vram_reserve",
]
