"""Tiny random-weight GGUF models, written in milliseconds.

They load and decode in llama.cpp like real models but produce gibberish: tests and
``hearth --self-test`` use them to exercise every native path without a download.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

BYTE_TOKEN_TYPE = 6  # gguf.TokenType.BYTE
NORMAL_TOKEN_TYPE = 1
CONTROL_TOKEN_TYPE = 3

DEFAULT_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


@dataclass(frozen=True)
class TinyTextSpec:
    """Shape of a tiny llama-architecture text model."""

    n_embd: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_head_kv: int = 2
    n_ff: int = 128
    n_ctx_train: int = 4096
    n_extra_words: int = 200
    name: str = "Tiny Llama"
    chat_template: str | None = DEFAULT_CHAT_TEMPLATE
    seed: int = 0
    # A scripted model ignores its input except for the last token: after any token
    # outside the script it says script[0], after script[i] it says script[i + 1], and
    # after the last one EOS (or script[0] again when ``script_loops``). Greedy output
    # is then exact, which lets tests split characters and stop strings across tokens.
    script: tuple[str, ...] = ()
    script_loops: bool = False
    # The block matrices' type: "F32", or "Q4_0"/"Q8_0" to run llama.cpp's quantized SIMD
    # kernels (the native probe does); quantized types need n_embd and n_ff multiples of 32.
    weight_type: str = "F32"
    # Control tokens added after the vocabulary's words (e.g. "<think>", "[TOOL_CALLS]"):
    # llama.cpp renders them as nothing unless asked, like a real model's markers.
    control_tokens: tuple[str, ...] = ()
    # Normal tokens added after the word pieces ("\u2581" for a space): longer pieces a
    # script can say, such as fragments of a JSON tool call.
    extra_tokens: tuple[str, ...] = ()


@dataclass(frozen=True)
class TinyProjectorSpec:
    """Shape of a tiny CLIP projector of type ``mlp``."""

    n_embd_text: int = 64
    image_size: int = 32
    patch_size: int = 8
    n_embd: int = 32
    n_ff: int = 48
    n_layer: int = 1
    n_head: int = 4
    hidden: int = 64
    seed: int = 1


def tiny_vocab(
    n_extra_words: int, control_tokens: tuple[str, ...] = (), extra_tokens: tuple[str, ...] = ()
) -> tuple[list[str], list[float], list[int]]:
    """Special tokens, the 256 byte tokens, some word pieces and ``extra_tokens``, then
    ``control_tokens`` (all unique)."""
    tokens = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    types = [2, CONTROL_TOKEN_TYPE, CONTROL_TOKEN_TYPE, CONTROL_TOKEN_TYPE, CONTROL_TOKEN_TYPE]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(BYTE_TOKEN_TYPE)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["\u2581" + c for c in letters] + list(letters)
    i = 0
    while len(words) < n_extra_words:
        a, b = letters[i % 26], letters[(i // 26) % 26]
        words.append(("\u2581" if i % 2 else "") + a + b)
        i += 1
    seen = set(tokens)
    for word in [*words[:n_extra_words], *extra_tokens]:
        if word not in seen:
            seen.add(word)
            tokens.append(word)
            types.append(NORMAL_TOKEN_TYPE)
    for control in control_tokens:
        if control not in seen:
            seen.add(control)
            tokens.append(control)
            types.append(CONTROL_TOKEN_TYPE)
    scores = [0.0] * len(tokens)
    for k in range(261, len(tokens)):
        scores[k] = -float(k)
    return tokens, scores, types


def _weights(rng: np.random.Generator, *shape: int, scale: float = 0.02) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def write_tiny_text_model(path: Path | str, spec: TinyTextSpec = TinyTextSpec()) -> Path:
    """Write a llama-architecture GGUF with random weights to ``path``."""
    path = Path(path)
    rng = np.random.default_rng(spec.seed)
    head_dim = spec.n_embd // spec.n_head
    tokens, scores, types = tiny_vocab(spec.n_extra_words, spec.control_tokens, spec.extra_tokens)
    n_vocab = len(tokens)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(spec.name)
    writer.add_uint32("llama.context_length", spec.n_ctx_train)
    writer.add_uint32("llama.embedding_length", spec.n_embd)
    writer.add_uint32("llama.block_count", spec.n_layer)
    writer.add_uint32("llama.feed_forward_length", spec.n_ff)
    writer.add_uint32("llama.attention.head_count", spec.n_head)
    writer.add_uint32("llama.attention.head_count_kv", spec.n_head_kv)
    writer.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    writer.add_uint32("llama.rope.dimension_count", head_dim)
    file_types = {
        "F32": gguf.LlamaFileType.ALL_F32,
        "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
        "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
    }
    writer.add_uint32("general.file_type", int(file_types[spec.weight_type]))
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    if spec.chat_template is not None:
        writer.add_chat_template(spec.chat_template)

    if spec.script:
        token_embd, output = _scripted_weights(spec, tokens)
    else:
        token_embd = _weights(rng, n_vocab, spec.n_embd, scale=0.5)
        output = _weights(rng, n_vocab, spec.n_embd, scale=0.5)
    # A scripted model's blocks must add nothing to the residual stream.
    block_scale = 0.0 if spec.script else 0.02
    writer.add_tensor("token_embd.weight", token_embd)
    writer.add_tensor("output_norm.weight", np.ones(spec.n_embd, dtype=np.float32))
    writer.add_tensor("output.weight", output)
    qtype = gguf.GGMLQuantizationType[spec.weight_type]

    def add_matrix(name: str, data: np.ndarray) -> None:
        if qtype is gguf.GGMLQuantizationType.F32:
            writer.add_tensor(name, data)
        else:
            writer.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)

    for i in range(spec.n_layer):
        p = f"blk.{i}"
        writer.add_tensor(f"{p}.attn_norm.weight", np.ones(spec.n_embd, dtype=np.float32))
        add_matrix(f"{p}.attn_q.weight", _weights(rng, spec.n_head * head_dim, spec.n_embd))
        add_matrix(f"{p}.attn_k.weight", _weights(rng, spec.n_head_kv * head_dim, spec.n_embd))
        add_matrix(f"{p}.attn_v.weight", _weights(rng, spec.n_head_kv * head_dim, spec.n_embd))
        add_matrix(
            f"{p}.attn_output.weight", _weights(rng, spec.n_embd, spec.n_head * head_dim, scale=block_scale)
        )
        writer.add_tensor(f"{p}.ffn_norm.weight", np.ones(spec.n_embd, dtype=np.float32))
        add_matrix(f"{p}.ffn_gate.weight", _weights(rng, spec.n_ff, spec.n_embd))
        add_matrix(f"{p}.ffn_up.weight", _weights(rng, spec.n_ff, spec.n_embd))
        add_matrix(f"{p}.ffn_down.weight", _weights(rng, spec.n_embd, spec.n_ff, scale=block_scale))
    _finish(writer)
    return path


def _scripted_weights(spec: TinyTextSpec, tokens: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Embeddings on orthogonal axes and an output matrix that maps axis i to the next token."""
    index = {t: i for i, t in enumerate(tokens)}
    unknown = [t for t in spec.script if t not in index]
    if unknown:
        raise ValueError(f"script tokens not in the tiny vocabulary: {unknown}")
    if len(set(spec.script)) != len(spec.script) or len(spec.script) + 1 > spec.n_embd:
        raise ValueError("a script needs distinct tokens, fewer than the embedding size")
    n_vocab = len(tokens)
    embd = np.zeros((n_vocab, spec.n_embd), dtype=np.float32)
    embd[:, 0] = 1.0  # axis 0: "any token outside the script"
    output = np.zeros((n_vocab, spec.n_embd), dtype=np.float32)
    output[index[spec.script[0]], 0] = 8.0
    for i, token in enumerate(spec.script):
        axis = i + 1
        embd[index[token]] = 0.0
        embd[index[token], axis] = 1.0
        if i + 1 < len(spec.script):
            following = spec.script[i + 1]
        else:
            following = spec.script[0] if spec.script_loops else tokens[2]  # "</s>"
        output[index[following], axis] = 8.0
    return embd, output


def write_tiny_projector(path: Path | str, spec: TinyProjectorSpec = TinyProjectorSpec()) -> Path:
    """Write a CLIP ``mlp`` projector whose output size is ``spec.n_embd_text``."""
    path = Path(path)
    rng = np.random.default_rng(spec.seed)
    n_patches = (spec.image_size // spec.patch_size) ** 2
    d, p = spec.n_embd, spec.patch_size

    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_name("Tiny CLIP projector")
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_string("clip.projector_type", "mlp")
    writer.add_uint32("clip.vision.image_size", spec.image_size)
    writer.add_uint32("clip.vision.patch_size", spec.patch_size)
    writer.add_uint32("clip.vision.embedding_length", d)
    writer.add_uint32("clip.vision.feed_forward_length", spec.n_ff)
    writer.add_uint32("clip.vision.projection_dim", spec.n_embd_text)
    writer.add_uint32("clip.vision.block_count", spec.n_layer)
    writer.add_uint32("clip.vision.attention.head_count", spec.n_head)
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    writer.add_bool("clip.use_gelu", True)
    writer.add_uint32("general.file_type", 0)

    writer.add_tensor("v.patch_embd.weight", _weights(rng, d, 3, p, p))
    writer.add_tensor("v.patch_embd.bias", np.zeros(d, dtype=np.float32))
    writer.add_tensor("v.position_embd.weight", _weights(rng, n_patches, d))
    for ln in ("v.pre_ln", "v.post_ln"):
        writer.add_tensor(f"{ln}.weight", np.ones(d, dtype=np.float32))
        writer.add_tensor(f"{ln}.bias", np.zeros(d, dtype=np.float32))
    for i in range(spec.n_layer):
        b = f"v.blk.{i}"
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            writer.add_tensor(f"{b}.{name}.weight", _weights(rng, d, d))
            writer.add_tensor(f"{b}.{name}.bias", np.zeros(d, dtype=np.float32))
        for ln in ("ln1", "ln2"):
            writer.add_tensor(f"{b}.{ln}.weight", np.ones(d, dtype=np.float32))
            writer.add_tensor(f"{b}.{ln}.bias", np.zeros(d, dtype=np.float32))
        writer.add_tensor(f"{b}.ffn_up.weight", _weights(rng, spec.n_ff, d))
        writer.add_tensor(f"{b}.ffn_up.bias", np.zeros(spec.n_ff, dtype=np.float32))
        writer.add_tensor(f"{b}.ffn_down.weight", _weights(rng, d, spec.n_ff))
        writer.add_tensor(f"{b}.ffn_down.bias", np.zeros(d, dtype=np.float32))
    writer.add_tensor("mm.0.weight", _weights(rng, spec.hidden, d))
    writer.add_tensor("mm.0.bias", np.zeros(spec.hidden, dtype=np.float32))
    writer.add_tensor("mm.2.weight", _weights(rng, spec.n_embd_text, spec.hidden))
    writer.add_tensor("mm.2.bias", np.zeros(spec.n_embd_text, dtype=np.float32))
    _finish(writer)
    return path


def _finish(writer: gguf.GGUFWriter) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
