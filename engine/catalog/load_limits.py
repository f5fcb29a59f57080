"""What llama.cpp would abort on, checked before it sees the file.

llama.cpp rejects most bad headers with an exception, which becomes a clean load error.
A few values parse fine and then reach a ``GGML_ASSERT``, an ``abort``, a division by zero
or an uncaught exception outside the loader's ``try``, and those take the whole process
down: the window, every conversation. Each rule below mirrors one such path in the
llama.cpp that llama-cpp-python 0.3.36 vendors (``file:line`` in the comment), and
refuses the file with a one-line reason instead. ``catalog.inspect_model`` runs them on
every text model; ``engine/native/model_check.py`` still loads each new file once in a child
process, for what no rule here foresaw.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Protocol

import gguf

# ggml types a model's weights can have on the CPU backend. Q8_1/Q8_K are only activation
# types, the integer and F64 types have no vec_dot (a NULL call at the first decode,
# ggml-cpu.c) and no get_rows (GGML_ABORT, ops.cpp); size-preserving type flips (F32 <-> I32)
# get past every size check, so the type itself must be refused.
_Q = gguf.GGMLQuantizationType
_NOT_WEIGHT_TYPES = frozenset(int(t) for t in (_Q.Q8_1, _Q.Q8_K, _Q.I8, _Q.I16, _Q.I32, _Q.I64, _Q.F64))
MAX_LAYERS = 512  # LLAMA_MAX_LAYERS (llama-model.cpp:1328)
MAX_EXPERTS = 1024  # LLAMA_MAX_EXPERTS (llama-model.cpp:1361)
MAX_TENSORS = 100_000  # ggml_init's malloc for the tensor table asserts (ggml.c:1644)
MIN_MMAP_ALIGNMENT = 32  # TENSOR_ALIGNMENT of a CPU buffer over the mapped file (ggml-backend.cpp:2527)
ROPE_SCALING_TYPES = frozenset({"none", "linear", "yarn", "longrope"})  # llama-model.cpp:1420
NO_VOCAB_MODELS = frozenset({"none", "no_vocab"})  # id_to_token.resize(vocab_size), unchecked


class TensorLike(Protocol):
    name: str
    shape: tuple[int, ...]
    ggml_type: int


class ArrayLike(Protocol):
    item_type: int
    count: int
    values: tuple[object, ...] | None
    byte_tokens: int


class HeaderLike(Protocol):
    scalars: Mapping[str, object]
    arrays: Mapping[str, ArrayLike]
    tensors: Sequence[TensorLike]
    alignment: int


def check_llama_limits(header: HeaderLike, arch: str, *, embedding: bool = False) -> str | None:
    """The reason llama.cpp would abort on this text model, or None. ``embedding``: the file
    is read as an embedding model, which may (and an encoder must) be non-causal."""
    for rule in (
        _check_tensors,
        _check_layers_and_heads,
        _check_norms_and_rope,
        _check_experts,
        _check_vocab,
    ):
        reason = rule(header, arch)
        if reason:
            return reason
    if not embedding and header.scalars.get(f"{arch}.attention.causal") is False:
        return "a non-causal (embedding) model: llama.cpp cannot generate text with it"
    return None


def _check_tensors(header: HeaderLike, arch: str) -> str | None:
    if len(header.tensors) > MAX_TENSORS:
        return f"corrupt tensor table: {len(header.tensors):,} tensors (llama.cpp allows {MAX_TENSORS:,})"
    if header.alignment < MIN_MMAP_ALIGNMENT:
        return f"corrupt metadata: alignment {header.alignment} is below the 32 bytes llama.cpp needs"
    for tensor in header.tensors:
        if tensor.ggml_type in _NOT_WEIGHT_TYPES:
            name = _Q(tensor.ggml_type).name
            return f"corrupt tensor table: tensor '{tensor.name}' has type {name}, which cannot hold weights"
        if len(tensor.shape) <= 1 and tensor.ggml_type != _Q.F32:
            # norms and biases are multiplied into F32 activations: other types abort (binary-ops.cpp:135)
            name = _Q(tensor.ggml_type).name
            return f"corrupt tensor table: vector '{tensor.name}' is {name}; llama.cpp needs F32"
        if any(d == 0 for d in tensor.shape):
            return f"corrupt tensor table: tensor '{tensor.name}' has a zero dimension"
    return None


def _layer_values(header: HeaderLike, key: str) -> tuple[int, ...] | None:
    """A per-layer u32 key as a tuple: one value for a scalar, each item for an array."""
    if key in header.scalars:
        value = header.scalars[key]
        return (int(value),) if isinstance(value, int) and not isinstance(value, bool) else None
    array = header.arrays.get(key)
    if array is None or array.values is None:
        return None
    return tuple(int(v) for v in array.values if isinstance(v, int | float))


def _check_layers_and_heads(header: HeaderLike, arch: str) -> str | None:
    s = header.scalars
    blocks = s.get(f"{arch}.block_count")
    if isinstance(blocks, int) and not 0 < blocks <= MAX_LAYERS:
        return f"corrupt metadata: {arch}.block_count is {blocks} (llama.cpp needs 1 to {MAX_LAYERS})"
    # Hybrid models give recurrent layers no heads (a 0 in a per-layer array); a scalar 0,
    # or none anywhere, leaves n_embd / n_head to divide by zero (gemma3.cpp:30: SIGFPE).
    heads = _layer_values(header, f"{arch}.attention.head_count")
    if heads is not None and max(heads, default=0) <= 0:
        return f"corrupt metadata: {arch}.attention.head_count is 0"
    if heads is None and arch == "gemma3":
        return f"corrupt metadata: {arch}.attention.head_count is missing"
    kv_heads = _layer_values(header, f"{arch}.attention.head_count_kv")
    if kv_heads is not None and heads:
        if max(kv_heads, default=0) <= 0:
            return f"corrupt metadata: {arch}.attention.head_count_kv is 0"
        n = max(len(heads), len(kv_heads))
        q = heads * n if len(heads) == 1 else heads
        kv = kv_heads * n if len(kv_heads) == 1 else kv_heads
        if any(h % k for h, k in zip(q, kv, strict=False) if h > 0 and k > 0):
            return f"corrupt metadata: {arch}.attention.head_count is not a multiple of head_count_kv"
    context = s.get(f"{arch}.context_length")
    if isinstance(context, int) and context <= 0:
        return f"corrupt metadata: {arch}.context_length is {context}"
    pooling = s.get(f"{arch}.pooling_type")
    if isinstance(pooling, int) and not 0 <= pooling <= 4:
        return f"corrupt metadata: {arch}.pooling_type is {pooling}"
    return None


def _check_norms_and_rope(header: HeaderLike, arch: str) -> str | None:
    s = header.scalars
    for suffix in ("attention.layer_norm_rms_epsilon", "attention.layer_norm_epsilon"):
        eps = s.get(f"{arch}.{suffix}")
        # GGML_ASSERT(eps >= 0.0f) at the first decode (ops.cpp:4132); NaN fails it too
        if isinstance(eps, float) and not (math.isfinite(eps) and 0.0 <= eps < 1.0):
            return f"corrupt metadata: {arch}.{suffix} is {eps:g}"
    scaling = s.get(f"{arch}.rope.scaling.type")
    if isinstance(scaling, str) and scaling not in ROPE_SCALING_TYPES:
        return f"corrupt metadata: unknown rope scaling type {scaling[:40]!r}"
    freq_base = s.get(f"{arch}.rope.freq_base")
    if isinstance(freq_base, float) and not (math.isfinite(freq_base) and freq_base > 0):
        return f"corrupt metadata: {arch}.rope.freq_base is {freq_base:g}"
    head_dim = _head_dim(header, arch)
    for suffix in ("rope.dimension_count", "rope.dimension_count_swa"):
        dims = s.get(f"{arch}.{suffix}")
        # GGML_ASSERT(n_dims % 2 == 0) and (n_dims <= ne0) in rope at the first decode (ops.cpp:6355)
        if isinstance(dims, int) and (dims % 2 or (head_dim and dims > head_dim)):
            return f"corrupt metadata: {arch}.{suffix} is {dims} for heads of {head_dim}"
    return None


def _head_dim(header: HeaderLike, arch: str) -> int | None:
    s = header.scalars
    key_length = s.get(f"{arch}.attention.key_length")
    if isinstance(key_length, int) and key_length > 0:
        return key_length
    n_embd = s.get(f"{arch}.embedding_length")
    heads = _layer_values(header, f"{arch}.attention.head_count")
    if isinstance(n_embd, int) and heads and max(heads) > 0:
        return n_embd // max(heads)
    return None


def _check_experts(header: HeaderLike, arch: str) -> str | None:
    """llama-model.cpp:1361-1373: expert counts asserted, not validated."""
    s = header.scalars
    experts = s.get(f"{arch}.expert_count")
    used = _layer_values(header, f"{arch}.expert_used_count") or ()
    groups = s.get(f"{arch}.expert_group_count")
    group_used = s.get(f"{arch}.expert_group_used_count")
    n = experts if isinstance(experts, int) else 0
    if n > MAX_EXPERTS:
        return f"corrupt metadata: {arch}.expert_count is {n} (llama.cpp allows {MAX_EXPERTS})"
    if n == 0:
        if any(used) or (isinstance(groups, int) and groups):
            return f"corrupt metadata: {arch} uses experts it does not have"
        return None
    if not used or any(not 0 < u <= n for u in used):
        return f"corrupt metadata: {arch}.expert_used_count must be 1 to {n}"
    if isinstance(groups, int) and groups:
        g_used = group_used if isinstance(group_used, int) else 0
        if not (groups < n and n % groups == 0 and 0 < g_used < groups):
            return f"corrupt metadata: {arch}.expert_group_count {groups} does not divide {n} experts"
    nextn = s.get(f"{arch}.nextn_predict_layers")
    blocks = s.get(f"{arch}.block_count")
    if isinstance(nextn, int) and isinstance(blocks, int) and nextn > blocks:
        return f"corrupt metadata: {arch}.nextn_predict_layers is more than block_count"
    return None


def _check_vocab(header: HeaderLike, arch: str) -> str | None:
    s = header.scalars
    model = s.get("tokenizer.ggml.model")
    if isinstance(model, str) and model in NO_VOCAB_MODELS:
        return "the model has no vocabulary (tokenizer.ggml.model is 'none'): it cannot chat"
    tokens = header.arrays.get("tokenizer.ggml.tokens")
    n_tokens = tokens.count if tokens is not None else 0
    if model == "llama" and tokens is not None and tokens.byte_tokens < 256:
        # SPM falls back to "<0xXX>" for characters not in the vocabulary; a missing one
        # throws out of llama_tokenize, outside any try: std::terminate (llama-vocab.cpp:4014)
        missing = 256 - tokens.byte_tokens
        return f"corrupt vocabulary: {missing} of the 256 byte tokens <0x00>..<0xFF> are missing"
    defaults = {"llama": (1, 2), "gpt2": (11, 11)}.get(model if isinstance(model, str) else "", (None, None))
    for name, default, add_default in (
        ("bos", defaults[0], model == "llama"),
        ("eos", defaults[1], False),
    ):
        add = s.get(f"tokenizer.ggml.add_{name}_token", add_default)
        if add is not True:
            continue
        token = s.get(f"tokenizer.ggml.{name}_token_id", default)
        valid = isinstance(token, int) and 0 <= token < n_tokens
        if not valid and not (isinstance(default, int) and 0 <= default < n_tokens):
            # GGML_ASSERT(special_bos_id != LLAMA_TOKEN_NULL) when tokenizing (llama-vocab.cpp:3443)
            return f"corrupt vocabulary: the model adds a {name.upper()} token it does not have"
    return None
