"""A sentence-transformers BERT folder: its files, their hash, the hyper-parameters and the
pooling mode, each refusal one line."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import gguf
import pytest

from engine.documents.bert_source import (
    ConversionFailed,
    find_source,
    hyper_parameters,
    model_name,
    pooling_type,
    source_sha256,
)
from tests.engine.documents.conftest import tiny_config, write_tiny_bert


def test_the_files_read(tmp_path: Path) -> None:
    folder = write_tiny_bert(tmp_path / "src")
    source = find_source(folder)
    assert [p.name for p in source.files] == ["model.safetensors", "vocab.txt", "config.json", "config.json"]
    assert source.pooling_config == folder / "1_Pooling" / "config.json"
    (folder / "tokenizer.json").write_text("{}")
    assert find_source(folder).tokenizer_json == folder / "tokenizer.json"


def test_modules_json_names_the_pooling_folder(tmp_path: Path) -> None:
    folder = write_tiny_bert(tmp_path / "src")
    shutil.move(folder / "1_Pooling", folder / "pool")
    modules = [{"type": "sentence_transformers.models.Transformer", "path": ""}]
    modules.append({"type": "sentence_transformers.models.Pooling", "path": "pool"})
    (folder / "modules.json").write_text(json.dumps(modules))
    assert find_source(folder).pooling_config == folder / "pool" / "config.json"
    # A path that climbs out of the folder is not followed.
    modules[1]["path"] = "../elsewhere"
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ConversionFailed, match=re.escape("1_Pooling/config.json is missing")):
        find_source(folder)


@pytest.mark.parametrize("name", ["model.safetensors", "vocab.txt", "config.json", "1_Pooling/config.json"])
def test_the_hash_follows_every_file(tmp_path: Path, name: str) -> None:
    folder = write_tiny_bert(tmp_path / "src")
    before = source_sha256(find_source(folder))
    assert source_sha256(find_source(folder)) == before
    with (folder / name).open("ab") as f:
        f.write(b" ")
    assert source_sha256(find_source(folder)) != before


def test_the_hash_follows_an_added_tokenizer_file(tmp_path: Path) -> None:
    folder = write_tiny_bert(tmp_path / "src")
    before = source_sha256(find_source(folder))
    (folder / "tokenizer_config.json").write_text("{}")
    assert source_sha256(find_source(folder)) != before


def test_hyper_parameters(tmp_path: Path) -> None:
    h = hyper_parameters(tmp_path, tiny_config(type_vocab_size=None, layer_norm_eps=1e-5))
    assert (h.n_layer, h.n_ctx, h.n_embd, h.n_ff, h.n_head, h.vocab_size) == (2, 64, 32, 64, 4, 17)
    assert h.norm_eps == 1e-5 and h.n_token_types == 1


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"model_type": "xlm-roberta"}, "model_type is 'xlm-roberta'; only BERT models"),
        ({"hidden_act": "relu"}, "hidden_act 'relu' is not GELU"),
        ({"position_embedding_type": "relative_key"}, "absolute only"),
        ({"hidden_size": 30}, "hidden_size 30 is not a multiple of 4 heads"),
        ({"num_hidden_layers": 0}, "num_hidden_layers must be a positive whole number"),
        ({"intermediate_size": "64"}, "intermediate_size must be a positive whole number"),
        ({"vocab_size": True}, "vocab_size must be a positive whole number"),
        ({"layer_norm_eps": 2.0}, "layer_norm_eps 2.0 is not a small positive number"),
    ],
)
def test_hyper_parameter_refusals(tmp_path: Path, overrides: dict, reason: str) -> None:
    with pytest.raises(ConversionFailed, match=re.escape(reason)):
        hyper_parameters(tmp_path, tiny_config(**overrides))


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"pooling_mode_mean_tokens": True}, gguf.PoolingType.MEAN),
        ({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}, gguf.PoolingType.CLS),
        ({"pooling_mode_lasttoken": True}, gguf.PoolingType.LAST),
        ({"pooling_mode": "mean"}, gguf.PoolingType.MEAN),
    ],
)
def test_pooling_modes(tmp_path: Path, config: dict, expected: gguf.PoolingType) -> None:
    path = tmp_path / "pooling.json"
    path.write_text(json.dumps(config))
    assert pooling_type(tmp_path, path) == expected


@pytest.mark.parametrize(
    "config", [{"pooling_mode_max_tokens": True}, {"pooling_mode_mean_sqrt_len_tokens": True}, {}]
)
def test_pooling_llama_cpp_cannot_do_is_refused(tmp_path: Path, config: dict) -> None:
    path = tmp_path / "pooling.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ConversionFailed, match="not mean, CLS or last token"):
        pooling_type(tmp_path, path)


def test_a_config_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "pooling.json"
    path.write_text("[1, 2]")
    with pytest.raises(ConversionFailed, match=re.escape("pooling.json is not a JSON object")):
        pooling_type(tmp_path, path)


def test_model_name(tmp_path: Path) -> None:
    assert (
        model_name(tmp_path, {"_name_or_path": "nreimers/MiniLM-L6-H384-uncased"}) == "MiniLM-L6-H384-uncased"
    )
    assert model_name(tmp_path / "my-model", {}) == "my-model"
