"""Which GGUFs are embedding models, their pooling, window and size; the one-line refusals;
and the memory an open embedder is planned to take."""

from __future__ import annotations

import re
from pathlib import Path

import gguf
import pytest

from engine.base.errors import InvalidModelFile
from engine.catalog import inspect_model
from engine.documents.bert_convert import convert
from engine.documents.bert_text import BertText
from engine.documents.embedding_file import (
    MAX_WINDOW,
    NotAnEmbeddingModel,
    PoolingType,
    embedder_memory,
    estimate_embedder_memory,
    read_embedding_model,
)
from tests.engine.documents.conftest import rewrite_metadata, tiny_config, tiny_tensors, write_tiny_bert

VT = gguf.GGUFValueType


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("tiny-bert")
    return convert(write_tiny_bert(tmp / "src"), tmp / "tiny-bert.gguf")


def test_minilm_is_a_mean_pooled_encoder(embedder_gguf: Path) -> None:
    info = read_embedding_model(embedder_gguf)
    assert info.architecture == "bert"
    assert info.pooling is PoolingType.MEAN and info.pooling_in_file is PoolingType.MEAN
    assert not info.causal
    assert (info.n_ctx_train, info.n_embd, info.window) == (512, 384, 512)
    assert info.bert_text == BertText(lowercase=True, strip_accents=True)
    assert info.path == embedder_gguf


def test_the_chat_catalog_still_refuses_an_encoder(embedder_gguf: Path) -> None:
    with pytest.raises(InvalidModelFile, match="non-causal"):
        inspect_model(embedder_gguf)


def test_a_chat_model_is_refused_in_one_line(tiny_model: Path) -> None:
    with pytest.raises(NotAnEmbeddingModel) as caught:
        read_embedding_model(tiny_model)
    assert caught.value.message == (
        "Tiny Llama is a chat model (llama), not an embedding model: choose one such as all-MiniLM-L6-v2"
    )
    assert caught.value.path == tiny_model


def test_a_base_model_is_refused_too(make_tiny_model) -> None:
    with pytest.raises(NotAnEmbeddingModel, match=r"is a text generation model \(llama\), not an embedding"):
        read_embedding_model(make_tiny_model(chat_template=None))


def test_a_decoder_that_says_how_to_pool_is_an_embedder(tiny_model: Path, tmp_path: Path) -> None:
    # Qwen3-Embedding's shape: a causal llama-family model with a pooling type.
    path = rewrite_metadata(
        tiny_model, tmp_path / "pooled.gguf", set_keys={"llama.pooling_type": (3, VT.UINT32)}
    )
    info = read_embedding_model(path)
    assert info.pooling is PoolingType.LAST and info.causal
    assert info.window == MAX_WINDOW  # trained on 4096, embedded within 512
    assert info.bert_text is None  # not a WordPiece vocabulary


def test_a_decoder_with_attention_not_causal_is_an_embedder(tiny_model: Path, tmp_path: Path) -> None:
    path = rewrite_metadata(
        tiny_model, tmp_path / "bidir.gguf", set_keys={"llama.attention.causal": (False, VT.BOOL)}
    )
    info = read_embedding_model(path)
    assert not info.causal and info.pooling is PoolingType.MEAN and info.pooling_in_file is None


@pytest.mark.parametrize(
    ("pooling", "expected"),
    [
        (None, PoolingType.MEAN),
        (0, PoolingType.MEAN),
        (1, PoolingType.MEAN),
        (2, PoolingType.CLS),
        (3, PoolingType.LAST),
    ],
)
def test_pooling_from_the_file_or_mean(
    tiny_bert: Path, tmp_path: Path, pooling: int | None, expected: PoolingType
) -> None:
    if pooling is None:
        path = rewrite_metadata(tiny_bert, tmp_path / "p.gguf", drop_keys=("bert.pooling_type",))
    else:
        path = rewrite_metadata(
            tiny_bert, tmp_path / "p.gguf", set_keys={"bert.pooling_type": (pooling, VT.UINT32)}
        )
    info = read_embedding_model(path)
    assert info.pooling is expected
    assert info.pooling_in_file == (None if pooling is None else PoolingType(pooling))


@pytest.mark.parametrize(
    ("pooling", "error", "reason"),
    [(4, NotAnEmbeddingModel, "is a reranker"), (9, InvalidModelFile, "bert.pooling_type is 9")],
)
def test_rank_and_unknown_pooling_are_refused(
    tiny_bert: Path, tmp_path: Path, pooling: int, error: type[Exception], reason: str
) -> None:
    path = rewrite_metadata(
        tiny_bert, tmp_path / "p.gguf", set_keys={"bert.pooling_type": (pooling, VT.UINT32)}
    )
    with pytest.raises(error, match=re.escape(reason)):
        read_embedding_model(path)


def test_window_is_the_trained_context_up_to_512(tmp_path: Path) -> None:
    config = tiny_config(max_position_embeddings=128)
    short = convert(
        write_tiny_bert(tmp_path / "a", config=config, tensors=tiny_tensors(config)), tmp_path / "a.gguf"
    )
    assert read_embedding_model(short).window == 128
    config = tiny_config(max_position_embeddings=2048)
    long = convert(
        write_tiny_bert(tmp_path / "b", config=config, tensors=tiny_tensors(config)), tmp_path / "b.gguf"
    )
    assert read_embedding_model(long).window == MAX_WINDOW


def test_normalizer_keys_are_read(tiny_bert: Path, tmp_path: Path) -> None:
    cased = rewrite_metadata(
        tiny_bert, tmp_path / "cased.gguf", set_keys={"tokenizer.ggml.normalizer.lowercase": (False, VT.BOOL)}
    )
    assert read_embedding_model(cased).bert_text == BertText(lowercase=False, strip_accents=False)
    keep_accents = rewrite_metadata(
        tiny_bert,
        tmp_path / "acc.gguf",
        set_keys={"tokenizer.ggml.normalizer.strip_accents": (False, VT.BOOL)},
    )
    assert read_embedding_model(keep_accents).bert_text == BertText(lowercase=True, strip_accents=False)


def test_a_damaged_file_is_invalid(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 64)
    with pytest.raises(InvalidModelFile):
        read_embedding_model(bad)


def test_memory_estimate_adds_up_the_buffers(embedder_gguf: Path) -> None:
    info = read_embedding_model(embedder_gguf)
    memory = embedder_memory(info)
    assert memory.weights == info.model.tensor_bytes
    # llama.cpp's output buffer for 512 rows of 30,522 logits + 384 embeddings (it logs 60.4 MiB
    # once a 512-token batch has run).
    assert memory.output == 512 * (30522 + 384) * 4
    assert 5 << 20 < memory.compute < 8 << 20  # llama.cpp reserves 6.26 MiB
    assert estimate_embedder_memory(info) == memory.total
    assert memory.total < 150_000_000
