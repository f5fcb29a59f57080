"""Each header value that would make llama.cpp abort is refused by the catalog in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np
import pytest

from engine.base.errors import InvalidModelFile
from engine.catalog import inspect_model
from tests.engine.catalog.test_catalog import write_gguf

BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]


def reason(path: Path) -> str | None:
    try:
        inspect_model(path)
    except InvalidModelFile as exc:
        return exc.reason
    return None


def with_keys(tmp_path: Path, extra: Callable[[gguf.GGUFWriter], None], arch: str = "llama", **kw) -> Path:
    return write_gguf(tmp_path / "m.gguf", arch, extra=extra, **kw)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            lambda w: w.add_float32("llama.attention.layer_norm_rms_epsilon", -1e-5),
            "layer_norm_rms_epsilon is -1e-05",
        ),
        (lambda w: w.add_float32("llama.attention.layer_norm_rms_epsilon", float("nan")), "is nan"),
        (lambda w: w.add_string("llama.rope.scaling.type", "lineaR"), "unknown rope scaling type 'lineaR'"),
        (lambda w: w.add_float32("llama.rope.freq_base", 0.0), "rope.freq_base is 0"),
        (lambda w: w.add_uint32("llama.rope.dimension_count", 3), "rope.dimension_count is 3"),
        (lambda w: w.add_uint32("llama.rope.dimension_count", 8), "rope.dimension_count is 8 for heads of 4"),
        (lambda w: w.add_bool("llama.attention.causal", False), "non-causal"),
        (lambda w: w.add_uint32("llama.pooling_type", 9), "pooling_type is 9"),
        (lambda w: w.add_uint32("llama.attention.head_count_kv", 0), "head_count_kv is 0"),
        (lambda w: w.add_uint32("llama.attention.head_count_kv", 3), "not a multiple of head_count_kv"),
        (lambda w: w.add_uint32("llama.expert_count", 2000), "expert_count is 2000"),
        (lambda w: w.add_uint32("llama.expert_used_count", 2), "uses experts it does not have"),
        (
            lambda w: (w.add_uint32("llama.expert_count", 8), w.add_uint32("llama.expert_used_count", 0)),
            "1 to 8",
        ),
        (
            lambda w: (w.add_uint32("llama.expert_count", 8), w.add_uint32("llama.expert_used_count", 9)),
            "1 to 8",
        ),
        (lambda w: w.add_custom_alignment(16), "alignment 16 is below the 32 bytes"),
    ],
)
def test_values_llama_cpp_asserts_on_are_refused(tmp_path: Path, extra, expected: str) -> None:
    found = reason(with_keys(tmp_path, extra))
    assert found is not None and expected in found, found


def test_the_same_file_without_the_bad_value_is_fine(tmp_path: Path) -> None:
    def good(w: gguf.GGUFWriter) -> None:
        w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-6)
        w.add_string("llama.rope.scaling.type", "linear")
        w.add_uint32("llama.rope.dimension_count", 4)
        w.add_uint32("llama.attention.head_count_kv", 1)
        w.add_uint32("llama.expert_count", 8)
        w.add_uint32("llama.expert_used_count", 2)
        w.add_bool("llama.attention.causal", True)

    assert reason(with_keys(tmp_path, good)) is None


def test_layer_and_head_counts(tmp_path: Path) -> None:
    assert "block_count is 0" in (reason(write_gguf(tmp_path / "a.gguf", n_layer=0)) or "")
    no_heads = with_keys(tmp_path, lambda w: None, arch="gemma3")
    assert reason(no_heads) is None  # write_gguf writes head_count=2
    # hybrid models give recurrent layers no KV heads: zeros inside an array are fine
    hybrid = write_gguf(
        tmp_path / "h.gguf", extra=lambda w: w.add_array("llama.attention.head_count_kv", [2, 0])
    )
    assert reason(hybrid) is None


def test_gemma3_without_head_count_would_divide_by_zero(tmp_path: Path) -> None:
    path = tmp_path / "g.gguf"
    writer = gguf.GGUFWriter(str(path), "gemma3")
    writer.add_uint32("gemma3.context_length", 256)
    writer.add_uint32("gemma3.embedding_length", 8)
    writer.add_uint32("gemma3.block_count", 1)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([f"t{i}" for i in range(20)])
    writer.add_tensor("token_embd.weight", np.zeros((20, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert reason(path) == "corrupt metadata: gemma3.attention.head_count is missing"


def tensor_types(tmp_path: Path, norm: np.ndarray, matrix_type: int | None = None) -> Path:
    path = tmp_path / "t.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_uint32("llama.context_length", 256)
    writer.add_uint32("llama.embedding_length", 8)
    writer.add_uint32("llama.block_count", 1)
    writer.add_uint32("llama.attention.head_count", 2)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([f"t{i}" for i in range(20)])
    matrix = np.zeros((20, 8), dtype=np.float32)
    if matrix_type is None:
        writer.add_tensor("token_embd.weight", matrix)
    else:
        writer.add_tensor(
            "token_embd.weight", matrix.view(np.uint8), raw_dtype=gguf.GGMLQuantizationType(matrix_type)
        )
    writer.add_tensor("output_norm.weight", norm)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_tensor_types_that_cannot_hold_weights(tmp_path: Path) -> None:
    ones = np.ones(8, dtype=np.float32)
    assert reason(tensor_types(tmp_path, ones)) is None
    i32 = int(gguf.GGMLQuantizationType.I32)  # the same size as F32: every size check passes
    assert "has type I32, which cannot hold weights" in (reason(tensor_types(tmp_path, ones, i32)) or "")
    half = reason(tensor_types(tmp_path, np.ones(8, dtype=np.float16)))
    assert half == "corrupt tensor table: vector 'output_norm.weight' is F16; llama.cpp needs F32"


def test_an_spm_vocabulary_needs_every_byte_token(tmp_path: Path) -> None:
    words = ["<unk>", "<s>", "</s>", *BYTE_TOKENS, "▁a", "b"]
    assert reason(spm_file(tmp_path / "ok.gguf", words)) is None
    missing = [w for w in words if w not in ("<0x41>", "<0xFF>")]
    assert reason(spm_file(tmp_path / "bad.gguf", missing)) == (
        "corrupt vocabulary: 2 of the 256 byte tokens <0x00>..<0xFF> are missing"
    )


def test_a_vocabulary_that_adds_a_bos_it_does_not_have(tmp_path: Path) -> None:
    words = ["<unk>", *BYTE_TOKENS]  # SPM: id 1 is "<0x00>", so the default BOS id 1 exists
    assert reason(spm_file(tmp_path / "ok.gguf", words)) is None
    # BPE's default BOS is id 11: a 5-token vocabulary that adds it has none
    small = spm_file(tmp_path / "bad.gguf", ["a", "b", "c", "d", "e"], model="gpt2", add_bos=True)
    assert reason(small) == "corrupt vocabulary: the model adds a BOS token it does not have"
    fixed = spm_file(tmp_path / "fixed.gguf", ["a", "b", "c", "d", "e"], model="gpt2", add_bos=True, bos=2)
    assert reason(fixed) is None


def test_a_model_without_vocabulary_is_refused(tmp_path: Path) -> None:
    path = spm_file(tmp_path / "none.gguf", ["a"], model="none")
    assert reason(path) == "the model has no vocabulary (tokenizer.ggml.model is 'none'): it cannot chat"


def spm_file(
    path: Path,
    tokens: list[str],
    *,
    model: str = "llama",
    bos: int | None = None,
    add_bos: bool | None = None,
) -> Path:
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_uint32("llama.context_length", 256)
    writer.add_uint32("llama.embedding_length", 8)
    writer.add_uint32("llama.block_count", 1)
    writer.add_uint32("llama.attention.head_count", 2)
    writer.add_tokenizer_model(model)
    writer.add_token_list(tokens)
    if bos is not None:
        writer.add_bos_token_id(bos)
    if add_bos is not None:
        writer.add_add_bos_token(add_bos)
    writer.add_tensor("token_embd.weight", np.zeros((len(tokens), 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_a_refused_value_really_aborts_llama_cpp(tmp_path: Path, make_tiny_model) -> None:
    """The rule is not a guess: the same file kills llama.cpp (a child here) at its first decode."""
    source = make_tiny_model("ok.gguf")
    data = bytearray(source.read_bytes())
    key = b"llama.attention.layer_norm_rms_epsilon"
    at = data.find(key) + len(key) + 4  # after the key and its value type
    data[at : at + 4] = np.float32(-1e-5).tobytes()
    bad = tmp_path / "negative-eps.gguf"
    bad.write_bytes(bytes(data))
    assert "layer_norm_rms_epsilon is -1e-05" in (reason(bad) or "")
    code = f"""
import sys, llama_cpp as ll
ll.llama_backend_init()
m = ll.llama_model_load_from_file({str(bad)!r}.encode(), ll.llama_model_default_params())
c = ll.llama_context_default_params(); c.n_ctx = 64
ctx = ll.llama_init_from_model(m, c)
b = ll.llama_batch_get_one((ll.llama_token * 2)(1, 300), 2)
sys.exit(ll.llama_decode(ctx, b))
"""
    env = dict(os.environ, GGML_NO_BACKTRACE="1")  # no gdb attach: die at once
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, env=env)
    assert done.returncode == -6, (done.returncode, done.stderr[-400:])  # SIGABRT: GGML_ASSERT(eps >= 0)
