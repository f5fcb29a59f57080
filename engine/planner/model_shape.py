"""The model's shape, as the memory formulas need it: ``ModelShape`` from a ``ModelInfo``."""

from __future__ import annotations

from dataclasses import dataclass

from engine.catalog import ModelInfo
from engine.planner.load_plan import InvalidLoadRequest

# llama.cpp's memory outside its named buffers (see engine.planner's docstring).
VOCAB_BYTES_PER_TOKEN = 164
VOCAB_BYTES_PER_MERGE = 154


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
    def vocab_table_bytes(self) -> int:
        """The vocabulary tables llama.cpp keeps on the host (token texts, the text-to-id
        map, the piece cache, BPE merge ranks)."""
        return self.n_vocab * VOCAB_BYTES_PER_TOKEN + self.n_merges * VOCAB_BYTES_PER_MERGE

    @property
    def kv_cache_count(self) -> int:
        """KV caches llama.cpp keeps: a second one for sliding-window layers."""
        return 2 if self.has_swa and not all(self.swa_layers) else 1

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
