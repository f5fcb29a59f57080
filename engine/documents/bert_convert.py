"""Hearth's own BERT converter: a sentence-transformers folder into an f16 GGUF that llama.cpp
runs as architecture ``bert``.

llama.cpp's ``convert_hf_to_gguf.py`` imports torch and transformers; this needs only
``gguf``, ``safetensors`` (numpy) and the WordPiece ``vocab.txt``, and writes what that
script's ``BertModel`` writes for the same folder (llama.cpp of llama-cpp-python 0.3.36):

- the hyper-parameters, ``bert.attention.causal = false`` and ``bert.pooling_type`` from
  ``1_Pooling/config.json`` (the folder ``modules.json`` names, when there is one);
- the vocabulary in llama.cpp's phantom-space form: a ``##x`` continuation becomes ``x``,
  every other token but the special ones gets a leading ``▁`` (llama.cpp's WordPiece
  tokenizer prefixes each word with ``▁`` and matches from there); the special tokens
  ([CLS], [SEP], ...) are CONTROL and kept as they are;
- [CLS] as BOS and [SEP] as EOS, both added (``[CLS] text [SEP]``), no extra separator;
- weights under gguf's tensor names: 1-D tensors, norms, position and token-type
  embeddings in f32, the other matrices in f16.

The source's SHA-256 (of every file read, and the converter's version) is recorded in the
header, so ``ensure_converted`` converts again only when something changed; the file is
written beside the target and renamed, so an interrupted run never leaves a torn model.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from engine.base.errors import InvalidModelFile
from engine.documents.bert_source import (
    CONVERTER_VERSION,
    BertSource,
    ConversionFailed,
    HyperParameters,
    find_source,
    hyper_parameters,
    model_name,
    pooling_type,
    read_json,
    source_sha256,
)
from engine.documents.bert_vocab import read_vocabulary

SOURCE_HASH_KEY = "hearth.source.sha256"
CONVERTER_KEY = "hearth.converter.version"
_DROPPED_PREFIXES = ("pooler.", "cls.predictions", "cls.seq_relationship")
_DROPPED = frozenset({"embeddings.position_ids"})

Progress = Callable[[int, int], None]


def recorded_sha256(target: Path) -> str | None:
    """The source hash a converted file records; None for a missing or unreadable file."""
    from engine.catalog import inspect

    try:
        info = inspect(target, embedding=True)
    except (InvalidModelFile, OSError):
        return None
    value = info.metadata.get(SOURCE_HASH_KEY)
    return value if isinstance(value, str) else None


def ensure_converted(
    src_dir: Path | str, target: Path | str, *, name: str | None = None, progress: Progress | None = None
) -> Path:
    """``target`` converted from ``src_dir``; left alone when it already records this source."""
    source = find_source(src_dir)
    target = Path(target)
    sha = source_sha256(source)
    if target.is_file() and recorded_sha256(target) == sha:
        return target
    return _convert(source, target, sha, name=name, progress=progress)


def convert(
    src_dir: Path | str, target: Path | str, *, name: str | None = None, progress: Progress | None = None
) -> Path:
    """Convert ``src_dir`` to ``target`` (replacing it); ``progress(done, total)`` per tensor."""
    source = find_source(src_dir)
    return _convert(source, Path(target), source_sha256(source), name=name, progress=progress)


def _convert(
    source: BertSource, target: Path, sha: str, *, name: str | None, progress: Progress | None
) -> Path:
    import gguf

    config = read_json(source.folder, source.config)
    hparams = hyper_parameters(source.folder, config)
    pooling = pooling_type(source.folder, source.pooling_config)
    vocab = read_vocabulary(source, hparams.vocab_size)
    tensors = _tensors(source, hparams)

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConversionFailed(source.folder, f"cannot create {target.parent}: {exc.strerror}") from None
    partial = target.with_name(target.name + ".part")
    writer = gguf.GGUFWriter(str(partial), "bert")
    try:
        writer.add_type(gguf.GGUFType.MODEL)
        writer.add_name(name or model_name(source.folder, config))
        total_params = sum(int(np.prod(shape)) for _, shape, _ in tensors)
        writer.add_size_label(gguf.size_label(total_params, 0, 0, 0))
        writer.add_block_count(hparams.n_layer)
        writer.add_context_length(hparams.n_ctx)
        writer.add_embedding_length(hparams.n_embd)
        writer.add_feed_forward_length(hparams.n_ff)
        writer.add_head_count(hparams.n_head)
        writer.add_layer_norm_eps(hparams.norm_eps)
        writer.add_causal_attention(False)
        writer.add_pooling_type(pooling)
        writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
        vocab.write(writer)
        writer.add_token_type_count(hparams.n_token_types)
        writer.add_string(SOURCE_HASH_KEY, sha)
        writer.add_uint32(CONVERTER_KEY, CONVERTER_VERSION)
        with _open_weights(source) as weights:
            for done, (gguf_name, _, read) in enumerate(tensors, start=1):
                writer.add_tensor(gguf_name, read(weights))
                if progress is not None:
                    progress(done, len(tensors) + 1)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(partial, target)
    except BaseException:
        writer.close()
        partial.unlink(missing_ok=True)
        raise
    if progress is not None:
        progress(len(tensors) + 1, len(tensors) + 1)
    return target


# --- tensors ---------------------------------------------------------------------------------

TensorReader = Callable[[Any], np.ndarray]


def _open_weights(source: BertSource) -> Any:
    from safetensors import safe_open

    try:
        return safe_open(str(source.weights), framework="np")
    except Exception as exc:  # safetensors raises its own error types for a damaged file
        raise ConversionFailed(
            source.folder, f"model.safetensors cannot be read: {exc}".splitlines()[0]
        ) from None


def _tensors(source: BertSource, hparams: HyperParameters) -> list[tuple[str, tuple[int, ...], TensorReader]]:
    """(gguf name, shape, reader) for every tensor llama.cpp gets, in the file's order.

    Reads only the safetensors header here; each reader loads and converts one tensor."""
    import gguf

    folder = source.folder
    name_map = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, hparams.n_layer)
    f32_kinds = (gguf.MODEL_TENSOR.POS_EMBD, gguf.MODEL_TENSOR.TOKEN_TYPES)
    out: list[tuple[str, tuple[int, ...], TensorReader]] = []
    with _open_weights(source) as weights:
        for original in weights.keys():  # noqa: SIM118 - safe_open is not a Mapping
            name = _hf_name(original)
            if name is None:
                continue
            found = name_map.get_type_and_name(name, try_suffixes=(".weight", ".bias"))
            if found is None:
                raise ConversionFailed(folder, f"unexpected tensor {original} (not a BERT encoder weight)")
            kind, gguf_name = found
            shape = tuple(weights.get_slice(original).get_shape())
            f32 = len(shape) <= 1 or gguf_name.endswith("_norm.weight") or kind in f32_kinds
            out.append((gguf_name, shape, _reader(folder, original, np.float32 if f32 else np.float16)))
    names = {n for n, _, _ in out}
    if len(names) != len(out):
        raise ConversionFailed(folder, "two tensors map to the same llama.cpp name")
    missing = sorted(set(_required_names(hparams.n_layer)) - names)
    if missing:
        raise ConversionFailed(folder, f"the weights lack {missing[0]} ({len(missing)} tensors missing)")
    by_name = {n: s for n, s, _ in out}
    expected = {
        "token_embd.weight": (hparams.vocab_size, hparams.n_embd),
        "position_embd.weight": (hparams.n_ctx, hparams.n_embd),
        "blk.0.ffn_up.weight": (hparams.n_ff, hparams.n_embd),
    }
    for gguf_name, shape in expected.items():
        if by_name[gguf_name] != shape:
            raise ConversionFailed(
                folder, f"{gguf_name} has shape {by_name[gguf_name]}, config.json says {shape}"
            )
    return out


def _hf_name(name: str) -> str | None:
    """The reference converter's renames (``bert.`` prefix, gamma/beta); None: not converted."""
    name = name.removeprefix("bert.")
    if name.endswith(".gamma"):
        name = name[: -len(".gamma")] + ".weight"
    elif name.endswith(".beta"):
        name = name[: -len(".beta")] + ".bias"
    if name in _DROPPED or name.startswith(_DROPPED_PREFIXES):
        return None
    return name


def _required_names(n_layer: int) -> tuple[str, ...]:
    """What llama.cpp's BERT loader requires (llama_model_bert::load_arch_tensors)."""
    names = ["token_embd.weight", "position_embd.weight", "token_embd_norm.weight", "token_embd_norm.bias"]
    for i in range(n_layer):
        names += [
            f"blk.{i}.{t}"
            for t in (
                "attn_q.weight",
                "attn_k.weight",
                "attn_v.weight",
                "attn_output.weight",
                "attn_output_norm.weight",
                "attn_output_norm.bias",
                "ffn_up.weight",
                "ffn_down.weight",
                "layer_output_norm.weight",
                "layer_output_norm.bias",
            )
        ]
    return tuple(names)


def _reader(folder: Path, original: str, dtype: type[np.floating]) -> TensorReader:
    def read(weights: Any) -> np.ndarray:
        try:
            data = weights.get_tensor(original)
        except Exception as exc:  # e.g. bfloat16, which numpy has no type for
            raise ConversionFailed(folder, f"{original} cannot be read: {exc}".splitlines()[0]) from None
        if data.dtype.kind != "f":
            raise ConversionFailed(folder, f"{original} holds {data.dtype} values, not floating point")
        with np.errstate(over="ignore"):  # an overflow is refused just below
            converted = np.ascontiguousarray(data, dtype=dtype)
        if not np.isfinite(converted).all():
            raise ConversionFailed(folder, f"{original} has values that do not fit {np.dtype(dtype).name}")
        return converted

    return read


__all__ = [
    "CONVERTER_KEY",
    "CONVERTER_VERSION",
    "SOURCE_HASH_KEY",
    "BertSource",
    "ConversionFailed",
    "convert",
    "ensure_converted",
    "find_source",
    "recorded_sha256",
    "source_sha256",
]
