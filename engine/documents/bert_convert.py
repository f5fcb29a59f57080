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

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.base.errors import EngineError, InvalidModelFile

# Bumped whenever the output for the same source changes: older conversions are redone.
CONVERTER_VERSION = 1
SOURCE_HASH_KEY = "hearth.source.sha256"
CONVERTER_KEY = "hearth.converter.version"

_WEIGHTS = "model.safetensors"
_VOCAB = "vocab.txt"
_CONFIG = "config.json"
_DEFAULT_POOLING_DIR = "1_Pooling"
_TOKENIZER_JSON = "tokenizer.json"
_TOKENIZER_CONFIG = "tokenizer_config.json"
_MODULES = "modules.json"

_PHANTOM_SPACE = "\u2581"
_CONTINUATION = "##"
# BERT's special tokens when the folder has no tokenizer.json naming them.
_DEFAULT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_SPECIAL_ROLES = {"cls": "[CLS]", "sep": "[SEP]", "unk": "[UNK]", "pad": "[PAD]", "mask": "[MASK]"}
# Tensors an embedding model never uses (the pooler, the pre-training heads).
_DROPPED_PREFIXES = ("pooler.", "cls.predictions", "cls.seq_relationship")
_DROPPED = frozenset({"embeddings.position_ids"})
_HASH_BLOCK = 8 << 20

Progress = Callable[[int, int], None]


class ConversionFailed(EngineError):
    """A model folder that cannot be converted to a GGUF, with the reason (one line)."""

    def __init__(self, folder: Path, reason: str) -> None:
        self.folder = folder
        self.reason = reason
        super().__init__(f"Cannot convert the embedding model in {folder}: {reason}")


@dataclass(frozen=True)
class BertSource:
    """The files of a sentence-transformers BERT folder that the conversion reads."""

    folder: Path
    weights: Path
    vocab: Path
    config: Path
    pooling_config: Path
    tokenizer_json: Path | None
    tokenizer_config: Path | None

    @property
    def files(self) -> tuple[Path, ...]:
        optional = (self.tokenizer_json, self.tokenizer_config)
        return (self.weights, self.vocab, self.config, self.pooling_config, *(p for p in optional if p))


def find_source(folder: Path | str) -> BertSource:
    """The folder's files, or ConversionFailed naming the first one missing."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConversionFailed(folder, "no such folder")
    for name in (_WEIGHTS, _VOCAB, _CONFIG):
        if not (folder / name).is_file():
            raise ConversionFailed(folder, f"{name} is missing")
    pooling = folder / _pooling_dir(folder) / "config.json"
    if not pooling.is_file():
        raise ConversionFailed(folder, f"{pooling.relative_to(folder)} is missing (the pooling mode)")

    def optional(name: str) -> Path | None:
        path = folder / name
        return path if path.is_file() else None

    return BertSource(
        folder=folder,
        weights=folder / _WEIGHTS,
        vocab=folder / _VOCAB,
        config=folder / _CONFIG,
        pooling_config=pooling,
        tokenizer_json=optional(_TOKENIZER_JSON),
        tokenizer_config=optional(_TOKENIZER_CONFIG),
    )


def source_sha256(source: BertSource) -> str:
    """SHA-256 over every file the conversion reads (name and bytes) and the converter version."""
    digest = hashlib.sha256(f"hearth-bert-convert-{CONVERTER_VERSION}".encode())
    for path in source.files:
        digest.update(f"\0{path.relative_to(source.folder).as_posix()}\0".encode())
        with path.open("rb") as f:
            while block := f.read(_HASH_BLOCK):
                digest.update(block)
    return digest.hexdigest()


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

    config = _read_json(source.folder, source.config)
    hparams = _hyper_parameters(source.folder, config)
    pooling = _pooling_type(source.folder, source.pooling_config)
    vocab = _vocabulary(source, hparams.vocab_size)
    tensors = _tensors(source, hparams)

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConversionFailed(source.folder, f"cannot create {target.parent}: {exc.strerror}") from None
    partial = target.with_name(target.name + ".part")
    writer = gguf.GGUFWriter(str(partial), "bert")
    try:
        writer.add_type(gguf.GGUFType.MODEL)
        writer.add_name(name or _model_name(source.folder, config))
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


# --- configuration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _HyperParameters:
    n_layer: int
    n_ctx: int
    n_embd: int
    n_ff: int
    n_head: int
    norm_eps: float
    vocab_size: int
    n_token_types: int


def _read_json(folder: Path, path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConversionFailed(folder, f"{path.name} cannot be read: {exc}".splitlines()[0]) from None
    if not isinstance(data, dict):
        raise ConversionFailed(folder, f"{path.name} is not a JSON object")
    return data


def _pooling_dir(folder: Path) -> str:
    """The Pooling module's folder: as modules.json says, else sentence-transformers' default."""
    try:
        modules = json.loads((folder / _MODULES).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return _DEFAULT_POOLING_DIR
    if isinstance(modules, list):
        for module in modules:
            if isinstance(module, dict) and str(module.get("type", "")).endswith("Pooling"):
                path = module.get("path")
                if isinstance(path, str) and path and ".." not in Path(path).parts:
                    return path
    return _DEFAULT_POOLING_DIR


def _hyper_parameters(folder: Path, config: Mapping[str, Any]) -> _HyperParameters:
    model_type = config.get("model_type", "bert")
    if model_type != "bert":
        raise ConversionFailed(folder, f"model_type is '{model_type}'; only BERT models can be converted")
    activation = config.get("hidden_act", "gelu")
    if not (isinstance(activation, str) and activation.startswith("gelu")):
        raise ConversionFailed(folder, f"hidden_act '{activation}' is not GELU, which llama.cpp's BERT uses")
    position = config.get("position_embedding_type", "absolute")
    if position != "absolute":
        raise ConversionFailed(
            folder, f"position_embedding_type '{position}' is not supported (absolute only)"
        )

    def positive(key: str) -> int:
        value = config.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConversionFailed(
                folder, f"config.json: {key} must be a positive whole number (got {value!r})"
            )
        return value

    n_embd, n_head = positive("hidden_size"), positive("num_attention_heads")
    if n_embd % n_head:
        raise ConversionFailed(folder, f"hidden_size {n_embd} is not a multiple of {n_head} heads")
    eps = config.get("layer_norm_eps", 1e-12)
    if not isinstance(eps, int | float) or isinstance(eps, bool) or not 0 < eps < 1:
        raise ConversionFailed(folder, f"config.json: layer_norm_eps {eps!r} is not a small positive number")
    types = config.get("type_vocab_size", 1)
    return _HyperParameters(
        n_layer=positive("num_hidden_layers"),
        n_ctx=positive("max_position_embeddings"),
        n_embd=n_embd,
        n_ff=positive("intermediate_size"),
        n_head=n_head,
        norm_eps=float(eps),
        vocab_size=positive("vocab_size"),
        n_token_types=types if isinstance(types, int) and types > 0 else 1,
    )


def _pooling_type(folder: Path, path: Path) -> Any:
    """llama.cpp's pooling type from sentence-transformers' Pooling config (as the reference
    converter's ``_try_set_pooling_type`` reads it)."""
    from gguf import PoolingType

    pooling = _read_json(folder, path)
    if pooling.get("pooling_mode_mean_tokens"):
        return PoolingType.MEAN
    if pooling.get("pooling_mode_cls_token"):
        return PoolingType.CLS
    if pooling.get("pooling_mode_lasttoken"):
        return PoolingType.LAST
    by_name = {"mean": PoolingType.MEAN, "cls": PoolingType.CLS, "lasttoken": PoolingType.LAST}
    mode = pooling.get("pooling_mode")
    if isinstance(mode, str) and mode in by_name:
        return by_name[mode]
    raise ConversionFailed(folder, "the pooling mode is not mean, CLS or last token (llama.cpp has no other)")


def _model_name(folder: Path, config: Mapping[str, Any]) -> str:
    named = config.get("_name_or_path")
    if isinstance(named, str) and named.strip():
        return Path(named.strip()).name or folder.name
    return folder.name


# --- vocabulary ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Vocabulary:
    tokens: tuple[str, ...]  # in llama.cpp's phantom-space form
    types: tuple[int, ...]  # gguf.TokenType values
    special_ids: Mapping[str, int]  # role (bos, eos, unk, sep, pad, cls, mask) -> id
    lowercase: bool | None
    strip_accents: bool | None

    def write(self, writer: Any) -> None:
        writer.add_tokenizer_model("bert")
        # llama.cpp reads no pre-tokenizer name for a WordPiece vocabulary (its "bert"
        # tokenizer always splits as BERT does); "default" says exactly that.
        writer.add_tokenizer_pre("default")
        writer.add_token_list(list(self.tokens))
        writer.add_token_types(list(self.types))
        for role, token_id in self.special_ids.items():
            writer.add_uint32(_SPECIAL_ID_KEYS[role], token_id)
        # What the reference converter derives from the "[CLS] $A [SEP]" template; llama.cpp's
        # WordPiece tokenizer adds [CLS] and [SEP] whenever special tokens are asked for.
        writer.add_bool("tokenizer.ggml.add_bos_token", True)
        writer.add_bool("tokenizer.ggml.add_eos_token", True)
        writer.add_bool("tokenizer.ggml.add_sep_token", False)
        if self.lowercase is not None:
            writer.add_bool("tokenizer.ggml.normalizer.lowercase", self.lowercase)
        if self.strip_accents is not None:
            writer.add_bool("tokenizer.ggml.normalizer.strip_accents", self.strip_accents)


# Keys spelled as llama.cpp reads them ("seperator" included); gguf 0.19's writer lacks some.
_SPECIAL_ID_KEYS = {
    "bos": "tokenizer.ggml.bos_token_id",
    "eos": "tokenizer.ggml.eos_token_id",
    "unk": "tokenizer.ggml.unknown_token_id",
    "sep": "tokenizer.ggml.seperator_token_id",
    "pad": "tokenizer.ggml.padding_token_id",
    "cls": "tokenizer.ggml.cls_token_id",
    "mask": "tokenizer.ggml.mask_token_id",
}


def _vocabulary(source: BertSource, vocab_size: int) -> _Vocabulary:
    from gguf import TokenType

    folder = source.folder
    try:
        text = source.vocab.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConversionFailed(folder, f"vocab.txt cannot be read: {exc}".splitlines()[0]) from None
    # As transformers' load_vocab: one token per line, only the newline removed.
    words = text.split("\n")
    if words and words[-1] == "":
        words.pop()
    if not words:
        raise ConversionFailed(folder, "vocab.txt is empty")
    if len(words) > vocab_size:
        raise ConversionFailed(folder, f"vocab.txt has {len(words):,} tokens, the model {vocab_size:,}")
    tokenizer = _read_json(folder, source.tokenizer_json) if source.tokenizer_json else {}
    tokenizer_config = _read_json(folder, source.tokenizer_config) if source.tokenizer_config else {}

    control, user_defined = _added_tokens(tokenizer, words)
    tokens: list[str] = []
    types: list[int] = []
    for word in words:
        if word in control:
            tokens.append(word)
            types.append(TokenType.CONTROL)
            continue
        types.append(TokenType.USER_DEFINED if word in user_defined else TokenType.NORMAL)
        tokens.append(word[len(_CONTINUATION) :] if word.startswith(_CONTINUATION) else _PHANTOM_SPACE + word)
    for i in range(len(words), vocab_size):  # rows the embedding matrix has beyond the list
        tokens.append(f"[PAD{i}]")
        types.append(TokenType.UNUSED)
    seen: dict[str, int] = {}
    for i, token in enumerate(tokens):
        if (first := seen.setdefault(token, i)) != i:
            raise ConversionFailed(
                folder, f"tokens {first} and {i} are the same after conversion ({token!r})"
            )

    ids = {word: i for i, word in reversed(list(enumerate(words)))}
    special: dict[str, int] = {}
    for role, default in _SPECIAL_ROLES.items():
        wanted = _token_content(tokenizer_config.get(f"{role}_token")) or default
        if wanted in ids:
            special[role] = ids[wanted]
        elif role in ("cls", "sep", "unk"):
            # llama.cpp's WordPiece tokenizer asserts [CLS] and [SEP] exist (an abort, not an error).
            raise ConversionFailed(folder, f"vocab.txt has no {wanted} token")
    special_ids = {"bos": special["cls"], "eos": special["sep"], **special}
    lowercase, strip_accents = _normalizer(tokenizer.get("normalizer"), tokenizer_config)
    return _Vocabulary(tuple(tokens), tuple(types), special_ids, lowercase, strip_accents)


def _added_tokens(tokenizer: Mapping[str, Any], words: list[str]) -> tuple[frozenset[str], frozenset[str]]:
    """(special, other) added tokens: CONTROL and USER_DEFINED in the reference converter."""
    added = tokenizer.get("added_tokens")
    if not isinstance(added, list):
        return frozenset(w for w in _DEFAULT_SPECIALS if w in words), frozenset()
    special: set[str] = set()
    other: set[str] = set()
    for entry in added:
        if not isinstance(entry, dict) or not isinstance(content := entry.get("content"), str):
            continue
        (special if entry.get("special") else other).add(content)
    return frozenset(special), frozenset(other - special)


def _token_content(entry: Any) -> str | None:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and isinstance(content := entry.get("content"), str):
        return content
    return None


def _normalizer(normalizer: Any, tokenizer_config: Mapping[str, Any]) -> tuple[bool | None, bool | None]:
    """(lowercase, strip_accents) as gguf's SpecialVocab reads a BertNormalizer; None: unsaid
    (llama.cpp then lowercases, and strips accents when it lowercases)."""
    lowercase: bool | None = None
    strip: bool | None = None

    def visit(node: Any) -> None:
        nonlocal lowercase, strip
        if not isinstance(node, dict):
            return
        kind = node.get("type")
        if kind == "Lowercase":
            lowercase = True
        elif kind == "StripAccents":
            strip = True
        elif kind == "BertNormalizer":
            if isinstance(node.get("lowercase"), bool):
                lowercase = node["lowercase"]
            if isinstance(node.get("strip_accents"), bool):
                strip = node["strip_accents"]
        elif kind == "Sequence":
            for child in node.get("normalizers") or ():
                visit(child)

    visit(normalizer)
    if lowercase is None and isinstance(tokenizer_config.get("do_lower_case"), bool):
        lowercase = tokenizer_config["do_lower_case"]
    if strip is None and isinstance(tokenizer_config.get("strip_accents"), bool):
        strip = tokenizer_config["strip_accents"]
    return lowercase, strip


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


def _tensors(
    source: BertSource, hparams: _HyperParameters
) -> list[tuple[str, tuple[int, ...], TensorReader]]:
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
