"""A sentence-transformers BERT folder as the converter reads it: its files
(``find_source``), their hash (``source_sha256``), the hyper-parameters and pooling mode from
its JSON, and ``ConversionFailed``, the one-line refusal of every step."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.base.errors import EngineError

# Bumped whenever the output for the same source changes: older conversions are redone.
CONVERTER_VERSION = 1

_WEIGHTS = "model.safetensors"
_VOCAB = "vocab.txt"
_CONFIG = "config.json"
_DEFAULT_POOLING_DIR = "1_Pooling"
_TOKENIZER_JSON = "tokenizer.json"
_TOKENIZER_CONFIG = "tokenizer_config.json"
_MODULES = "modules.json"
_HASH_BLOCK = 8 << 20


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


@dataclass(frozen=True)
class HyperParameters:
    n_layer: int
    n_ctx: int
    n_embd: int
    n_ff: int
    n_head: int
    norm_eps: float
    vocab_size: int
    n_token_types: int


def read_json(folder: Path, path: Path) -> dict[str, Any]:
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


def hyper_parameters(folder: Path, config: Mapping[str, Any]) -> HyperParameters:
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
    return HyperParameters(
        n_layer=positive("num_hidden_layers"),
        n_ctx=positive("max_position_embeddings"),
        n_embd=n_embd,
        n_ff=positive("intermediate_size"),
        n_head=n_head,
        norm_eps=float(eps),
        vocab_size=positive("vocab_size"),
        n_token_types=types if isinstance(types, int) and types > 0 else 1,
    )


def pooling_type(folder: Path, path: Path) -> Any:
    """llama.cpp's pooling type from sentence-transformers' Pooling config (as the reference
    converter's ``_try_set_pooling_type`` reads it)."""
    from gguf import PoolingType

    pooling = read_json(folder, path)
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


def model_name(folder: Path, config: Mapping[str, Any]) -> str:
    named = config.get("_name_or_path")
    if isinstance(named, str) and named.strip():
        return Path(named.strip()).name or folder.name
    return folder.name
