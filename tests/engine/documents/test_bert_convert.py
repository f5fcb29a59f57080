"""Hearth's BERT converter: what the GGUF says (as llama.cpp's convert_hf_to_gguf.py BertModel
writes it), when it converts again, and each folder it refuses in one line."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import gguf
import numpy as np
import pytest

from engine.documents.bert_convert import (
    SOURCE_HASH_KEY,
    ConversionFailed,
    convert,
    ensure_converted,
    find_source,
    recorded_sha256,
    source_sha256,
)
from tests.engine.documents.conftest import (
    TINY_SPECIALS,
    TINY_WORDS,
    tiny_config,
    tiny_tensors,
    write_tiny_bert,
)

T = gguf.GGMLQuantizationType


def fields(path: Path) -> dict[str, object]:
    reader = gguf.GGUFReader(str(path))
    return {f.name: f.contents() for f in reader.fields.values() if not f.name.startswith("GGUF.")}


def tensor_types(path: Path) -> dict[str, tuple[T, tuple[int, ...]]]:
    reader = gguf.GGUFReader(str(path))
    return {t.name: (T(t.tensor_type), tuple(int(d) for d in t.shape)) for t in reader.tensors}


def test_minilm_header_is_what_llama_cpp_reads(embedder_gguf: Path, minilm_folder: Path) -> None:
    f = fields(embedder_gguf)
    assert f["general.architecture"] == "bert"
    assert f["general.name"] == "all-MiniLM-L6-v2"
    assert f["general.file_type"] == gguf.LlamaFileType.MOSTLY_F16
    assert f["bert.block_count"] == 6
    assert f["bert.context_length"] == 512
    assert f["bert.embedding_length"] == 384
    assert f["bert.feed_forward_length"] == 1536
    assert f["bert.attention.head_count"] == 12
    assert f["bert.attention.layer_norm_epsilon"] == pytest.approx(1e-12)
    assert f["bert.attention.causal"] is False
    assert f["bert.pooling_type"] == gguf.PoolingType.MEAN  # 1_Pooling: pooling_mode_mean_tokens
    assert f["tokenizer.ggml.model"] == "bert"
    assert f["tokenizer.ggml.token_type_count"] == 2
    ids = {
        "bos": 101, "eos": 102, "cls": 101, "seperator": 102, "unknown": 100, "padding": 0, "mask": 103,
    }  # fmt: skip
    for role, token_id in ids.items():
        assert f[f"tokenizer.ggml.{role}_token_id"] == token_id, role
    assert f["tokenizer.ggml.add_bos_token"] is True
    assert f["tokenizer.ggml.add_eos_token"] is True
    assert f["tokenizer.ggml.add_sep_token"] is False
    assert f["tokenizer.ggml.normalizer.lowercase"] is True  # BertNormalizer(lowercase=True)
    assert "tokenizer.ggml.normalizer.strip_accents" not in f  # None there: llama.cpp follows lowercase
    assert f[SOURCE_HASH_KEY] == source_sha256(find_source(minilm_folder))


def test_minilm_vocabulary_in_phantom_space_form(embedder_gguf: Path, minilm_folder: Path) -> None:
    reader = gguf.GGUFReader(str(embedder_gguf))
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    words = (minilm_folder / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(tokens) == len(words) == 30522
    control = gguf.TokenType.CONTROL
    for token_id in (0, 100, 101, 102, 103):  # [PAD] [UNK] [CLS] [SEP] [MASK]: kept, CONTROL
        assert tokens[token_id] == words[token_id] and types[token_id] == control
    assert words[1] == "[unused0]" and tokens[1] == "\u2581[unused0]"  # not special in tokenizer.json
    the = words.index("the")
    assert tokens[the] == "\u2581the" and types[the] == gguf.TokenType.NORMAL
    ing = words.index("##ing")
    assert tokens[ing] == "ing" and types[ing] == gguf.TokenType.NORMAL
    assert sum(t == control for t in types) == 5


def test_norms_biases_positions_and_token_types_f32_matrices_f16(embedder_gguf: Path) -> None:
    types = tensor_types(embedder_gguf)
    blocks = [
        "attn_q",
        "attn_k",
        "attn_v",
        "attn_output",
        "attn_output_norm",
        "ffn_up",
        "ffn_down",
        "layer_output_norm",
    ]
    expected = {"token_embd.weight", "token_types.weight", "position_embd.weight"}
    expected |= {f"token_embd_norm.{s}" for s in ("weight", "bias")}
    expected |= {f"blk.{i}.{b}.{s}" for i in range(6) for b in blocks for s in ("weight", "bias")}
    assert set(types) == expected  # no pooler, no position_ids
    for name, (kind, shape) in types.items():
        f32 = len(shape) == 1 or "norm" in name or name in ("position_embd.weight", "token_types.weight")
        assert kind == (T.F32 if f32 else T.F16), name
    assert types["token_embd.weight"][1] == (384, 30522)  # ne0 = n_embd, as llama.cpp creates it
    assert types["blk.0.ffn_up.weight"][1] == (384, 1536)
    assert types["blk.0.ffn_down.weight"][1] == (1536, 384)


def test_weights_are_the_safetensors_values(embedder_gguf: Path, minilm_folder: Path) -> None:
    from safetensors.numpy import load_file

    source = load_file(str(minilm_folder / "model.safetensors"))
    reader = gguf.GGUFReader(str(embedder_gguf))
    data = {t.name: np.array(t.data) for t in reader.tensors}
    q = source["encoder.layer.3.attention.self.query.weight"]
    np.testing.assert_array_equal(data["blk.3.attn_q.weight"], q.astype(np.float16))
    np.testing.assert_array_equal(
        data["position_embd.weight"], source["embeddings.position_embeddings.weight"]
    )
    np.testing.assert_array_equal(
        data["blk.5.layer_output_norm.bias"], source["encoder.layer.5.output.LayerNorm.bias"]
    )


def test_converted_once_then_left_alone(tmp_path: Path) -> None:
    folder = write_tiny_bert(tmp_path / "src")
    target = tmp_path / "out" / "tiny.gguf"
    seen: list[tuple[int, int]] = []
    assert ensure_converted(folder, target, progress=lambda d, t: seen.append((d, t))) == target
    assert seen[-1][0] == seen[-1][1] and len(seen) > 2
    assert recorded_sha256(target) == source_sha256(find_source(folder))
    assert not list(target.parent.glob("*.part"))
    mtime = target.stat().st_mtime_ns
    assert ensure_converted(folder, target) == target
    assert target.stat().st_mtime_ns == mtime

    # Any source file changed: converted again.
    config = tiny_config(layer_norm_eps=1e-6)
    (folder / "config.json").write_text(json.dumps(config))
    ensure_converted(folder, target)
    assert target.stat().st_mtime_ns != mtime
    assert fields(target)["bert.attention.layer_norm_epsilon"] == pytest.approx(1e-6)


@pytest.mark.parametrize("damage", ["garbage", "other-hash"])
def test_a_target_that_does_not_record_this_source_is_replaced(tmp_path: Path, damage: str) -> None:
    folder = write_tiny_bert(tmp_path / "src")
    target = tmp_path / "tiny.gguf"
    if damage == "garbage":
        target.write_bytes(b"not a gguf at all")
    else:
        other = write_tiny_bert(tmp_path / "other", tensors=tiny_tensors(tiny_config(), seed=7))
        convert(other, target)
    ensure_converted(folder, target)
    assert recorded_sha256(target) == source_sha256(find_source(folder))


def test_a_failed_conversion_leaves_neither_target_nor_part(tmp_path: Path) -> None:
    tensors = tiny_tensors(tiny_config())
    tensors["encoder.layer.1.output.dense.weight"][0, 0] = 1e6  # beyond f16
    folder = write_tiny_bert(tmp_path / "src", tensors=tensors)
    target = tmp_path / "out" / "tiny.gguf"
    with pytest.raises(ConversionFailed, match="do not fit float16"):
        ensure_converted(folder, target)
    assert list((tmp_path / "out").iterdir()) == []


def test_folder_layout_variants_are_read(tmp_path: Path) -> None:
    # A "bert." prefix and gamma/beta names (older checkpoints), CLS pooling in a folder that
    # modules.json names, a vocabulary shorter than the embedding matrix.
    config = tiny_config(vocab_size=len(TINY_SPECIALS) + len(TINY_WORDS) + 3)
    tensors = tiny_tensors(config, prefix="bert.")
    tensors = {
        (k[: -len(".weight")] + ".gamma" if "LayerNorm.weight" in k else k): v for k, v in tensors.items()
    }
    folder = write_tiny_bert(
        tmp_path / "src", config=config, tensors=tensors, pooling={"pooling_mode": "cls"}
    )
    shutil.move(folder / "1_Pooling", folder / "pool")
    (folder / "modules.json").write_text(
        json.dumps([{"type": "sentence_transformers.models.Pooling", "path": "pool"}])
    )
    target = convert(folder, tmp_path / "tiny.gguf")
    f = fields(target)
    assert f["bert.pooling_type"] == gguf.PoolingType.CLS
    tokens = f["tokenizer.ggml.tokens"]
    assert len(tokens) == config["vocab_size"] and tokens[-1] == f"[PAD{len(tokens) - 1}]"
    assert "token_embd_norm.weight" in tensor_types(target)
    assert f["general.name"] == "bert-test"  # config's _name_or_path, without its owner


def test_the_tiny_conversion_loads_and_embeds(tmp_path: Path) -> None:
    from engine.documents.embedding import open_embedder

    folder = write_tiny_bert(tmp_path / "src")
    with open_embedder(convert(folder, tmp_path / "tiny.gguf"), n_threads=1) as embedder:
        assert (embedder.dim, embedder.window) == (32, 64)
        cls, sep = TINY_SPECIALS.index("[CLS]"), TINY_SPECIALS.index("[SEP]")
        word = {w: i + len(TINY_SPECIALS) for i, w in enumerate(TINY_WORDS)}
        assert embedder.tokenize("The cats sat.") == [
            cls,
            word["the"],
            word["cat"],
            word["##s"],
            word["sat"],
            word["."],
            sep,
        ]
        rows = embedder.embed(["the cat sat on the mat", "a dog running"])
        np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, rtol=1e-5)


def _without(name: str):
    def change(folder: Path) -> None:
        path = folder / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()

    return change


def _config(**overrides: object):
    def change(folder: Path) -> None:
        (folder / "config.json").write_text(json.dumps(tiny_config(**overrides)))

    return change


def _write(name: str, text: str):
    def change(folder: Path) -> None:
        (folder / name).write_text(text)

    return change


def _tensors(edit):
    def change(folder: Path) -> None:
        from safetensors.numpy import save_file

        tensors = tiny_tensors(tiny_config())
        edit(tensors)
        save_file(tensors, str(folder / "model.safetensors"))

    return change


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (_without("model.safetensors"), "model.safetensors is missing"),
        (_without("vocab.txt"), "vocab.txt is missing"),
        (_without("config.json"), "config.json is missing"),
        (_without("1_Pooling"), "1_Pooling/config.json is missing"),
        (_write("1_Pooling/config.json", '{"pooling_mode_max_tokens": true}'), "not mean, CLS or last token"),
        (_write("config.json", "{not json"), "config.json cannot be read"),
        (_config(model_type="xlm-roberta"), "only BERT models"),
        (_config(hidden_act="relu"), "is not GELU"),
        (_config(position_embedding_type="relative_key"), "absolute only"),
        (_config(hidden_size=30), "not a multiple of 4 heads"),
        (_config(num_hidden_layers=0), "num_hidden_layers must be a positive whole number"),
        (_config(vocab_size=5), "vocab.txt has 17 tokens, the model 5"),
        (_write("vocab.txt", "[PAD]\n[UNK]\n[CLS]\nthe\n"), "no [SEP] token"),
        (_write("vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nx\n##\u2581x\n"), "the same after conversion"),
        (_write("vocab.txt", ""), "vocab.txt is empty"),
        (_write("model.safetensors", "\0\0\0 damaged"), "model.safetensors cannot be read"),
        (_tensors(lambda t: t.pop("encoder.layer.1.attention.self.key.weight")), "lack blk.1.attn_k.weight"),
        (_tensors(lambda t: t.update(extra=np.zeros(3, np.float32))), "unexpected tensor extra"),
        (
            _tensors(
                lambda t: t.update({"embeddings.word_embeddings.weight": np.zeros((17, 8), np.float32)})
            ),
            "token_embd.weight has shape",
        ),
        (
            _tensors(lambda t: t.update({"embeddings.LayerNorm.bias": np.zeros(32, np.int32)})),
            "holds int32 values",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_refusals_are_one_line(tmp_path: Path, change, reason: str) -> None:
    folder = write_tiny_bert(tmp_path / "src")
    change(folder)
    with pytest.raises(ConversionFailed) as caught:
        ensure_converted(folder, tmp_path / "tiny.gguf")
    message = caught.value.message
    assert reason in message and "\n" not in message
    assert message.startswith(f"Cannot convert the embedding model in {folder}: ")
    assert not (tmp_path / "tiny.gguf").exists()


def test_no_folder_at_all(tmp_path: Path) -> None:
    with pytest.raises(ConversionFailed, match="no such folder"):
        ensure_converted(tmp_path / "absent", tmp_path / "x.gguf")


def test_an_unwritable_target_folder_is_one_line(tmp_path: Path) -> None:
    folder = write_tiny_bert(tmp_path / "src")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConversionFailed, match="cannot create"):
        ensure_converted(folder, blocker / "sub" / "x.gguf")
    assert sorted(os.listdir(tmp_path)) == ["file", "src"]
