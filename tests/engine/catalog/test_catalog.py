"""catalog.inspect: field values, every validation reason, and fuzzing of the header."""

from __future__ import annotations

import builtins
import functools
import os
import struct
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.base.units import format_bytes
from engine.catalog import (
    InvalidModelFile,
    ModelInfo,
    ModelKind,
    architectures,
    gguf_reader,
    inspect,
    inspect_model,
    inspect_projector,
    known_architectures,
    split_part_paths,
    vocabulary,
)
from engine.library.index import Library

# ----------------------------------------------------------------------------- helpers


def write_gguf(
    path: Path,
    arch: str = "llama",
    *,
    tokens: list[str] | None = None,
    extra: Callable[[gguf.GGUFWriter], None] | None = None,
    n_embd: int = 8,
    n_layer: int = 2,
    split_max_tensors: int = 0,
) -> Path:
    """A minimal text-model GGUF: metadata complete enough for inspect, tiny tensors.

    Its vocabulary is BPE ("gpt2"), which needs no byte tokens: an SPM ("llama") one
    without all 256 "<0xXX>" tokens is refused (see test_load_limits.py).
    """
    tokens = tokens if tokens is not None else [f"tok{i}" for i in range(100)]
    writer = gguf.GGUFWriter(str(path), arch, split_max_tensors=split_max_tensors)
    writer.add_name("Test Model")
    writer.add_uint32(f"{arch}.context_length", 256)
    writer.add_uint32(f"{arch}.embedding_length", n_embd)
    writer.add_uint32(f"{arch}.block_count", n_layer)
    writer.add_uint32(f"{arch}.feed_forward_length", 16)
    writer.add_uint32(f"{arch}.attention.head_count", 2)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * len(tokens))
    writer.add_token_types([1] * len(tokens))
    if extra is not None:
        extra(writer)
    writer.add_tensor("token_embd.weight", np.zeros((max(len(tokens), 1), n_embd), dtype=np.float32))
    for i in range(n_layer):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", np.zeros((16, n_embd), dtype=np.float16))
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_projector(path: Path, *, int32_image_size: bool = False, with_mean: bool = True) -> Path:
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_string("clip.projector_type", "mlp")
    if int32_image_size:
        writer.add_int32("clip.vision.image_size", 32)
    else:
        writer.add_uint32("clip.vision.image_size", 32)
    for key, value in (
        ("patch_size", 8),
        ("embedding_length", 16),
        ("feed_forward_length", 24),
        ("projection_dim", 8),
        ("block_count", 1),
        ("attention.head_count", 2),
    ):
        writer.add_uint32(f"clip.vision.{key}", value)
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    if with_mean:
        writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
        writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    writer.add_tensor("mm.2.weight", np.zeros((8, 16), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def patched_copy(src: Path, dst: Path, patches: dict[int, bytes]) -> Path:
    data = bytearray(src.read_bytes())
    for offset, raw in patches.items():
        data[offset : offset + len(raw)] = raw
    dst.write_bytes(bytes(data))
    return dst


def key_offset(path: Path, key: str) -> int:
    """Offset of the value-type field that follows ``key`` in the header."""
    data = path.read_bytes()
    at = data.find(struct.pack("<Q", len(key)) + key.encode())
    assert at >= 0, key
    return at + 8 + len(key)


def reason(path: Path, **kwargs: object) -> str:
    with pytest.raises(InvalidModelFile) as excinfo:
        inspect(path, **kwargs)  # type: ignore[arg-type]
    message = excinfo.value.reason
    assert message == excinfo.value.message == str(excinfo.value)
    assert "\n" not in message
    return message


# ----------------------------------------------------------------------------- fields


def test_tiny_model_fields(tiny_model: Path) -> None:
    info = inspect(tiny_model)
    assert isinstance(info, ModelInfo)
    assert info.kind is ModelKind.TEXT and not info.is_projector
    assert info.architecture == "llama"
    assert info.name == "Tiny Llama" and info.display_name == "Tiny Llama"
    assert info.gguf_version == 3
    assert info.file_type == "F32"
    assert info.file_size == tiny_model.stat().st_size == info.total_file_size
    assert (info.context_length, info.block_count, info.embedding_length) == (4096, 2, 64)
    assert (info.feed_forward_length, info.head_count, info.head_count_kv) == (128, 4, 2)
    assert (info.key_length, info.value_length) == (16, 16)  # n_embd / n_head by default
    assert info.sliding_window is None
    assert info.vocab_size == 461
    assert (info.bos_token_id, info.eos_token_id) == (1, 2)
    assert info.has_chat_template and "<|im_start|>" in (info.chat_template or "")
    assert info.tokenizer_model == "llama"
    assert info.tensor_count == 21
    assert len(info.block_tensor_bytes) == 2 and info.block_tensor_bytes[0] == info.block_tensor_bytes[1]
    assert sum(info.block_tensor_bytes) + info.other_tensor_bytes == info.tensor_bytes
    assert info.output_tensor_bytes == 461 * 64 * 4
    assert info.parameter_count * 4 == info.tensor_bytes  # all F32
    assert info.size_label == "133K"  # derived: the file has no general.size_label
    assert info.data_offset + info.tensor_bytes <= info.file_size
    assert (info.split_count, info.split_index, info.split_paths) == (1, 0, ())
    # Large arrays never reach the metadata; the template has its own field.
    assert "tokenizer.ggml.tokens" not in info.metadata
    assert "tokenizer.ggml.tokens" not in info.arrays
    assert "tokenizer.chat_template" not in info.metadata
    assert info.metadata["llama.context_length"] == 4096


def test_a_model_without_a_chat_template_is_a_base_model(
    tiny_model: Path, tiny_projector: Path, make_tiny_model
) -> None:
    base = inspect(make_tiny_model("base.gguf", chat_template=None))
    assert not base.has_chat_template and base.is_base_model
    assert not inspect(tiny_model).is_base_model
    assert not inspect(tiny_projector).is_base_model  # a projector neither chats nor continues text


def test_tensor_sizes_agree_with_gguf_reader(tiny_model: Path) -> None:
    reader = gguf.GGUFReader(str(tiny_model))
    info = inspect(tiny_model)
    assert info.tensor_bytes == sum(int(t.n_bytes) for t in reader.tensors)
    assert info.parameter_count == sum(int(t.n_elements) for t in reader.tensors)
    assert info.data_offset == reader.data_offset


def test_tiny_projector_fields(tiny_projector: Path) -> None:
    info = inspect(tiny_projector)
    assert info.kind is ModelKind.PROJECTOR and info.is_projector
    assert info.architecture == "clip"
    assert info.projector is not None
    p = info.projector
    assert (p.projector_type, p.projection_dim, p.image_size, p.patch_size) == ("mlp", 64, 32, 8)
    assert (p.embedding_length, p.block_count, p.has_vision) == (32, 1, True)
    assert p.tokens_per_image == 16
    assert len(info.block_tensor_bytes) == 1  # v.blk.0
    assert info.arrays["clip.vision.image_mean"] == pytest.approx((0.5, 0.5, 0.5))
    assert info.vocab_size is None and info.embedding_length is None


@pytest.mark.gemma
def test_gemma_fields(gemma_path: Path) -> None:
    info = inspect_model(gemma_path)
    assert info.architecture == "gemma3"
    assert info.name == "Gemma 3 270m"
    assert info.size_label == "270M"
    assert info.file_type == "Q4_K_M"
    assert info.parameter_count == 268_098_176
    assert info.vocab_size == 262_144
    assert (info.block_count, info.embedding_length, info.feed_forward_length) == (18, 640, 2048)
    assert (info.head_count, info.head_count_kv, info.key_length, info.value_length) == (4, 1, 256, 256)
    assert (info.context_length, info.sliding_window) == (32768, 512)
    assert (info.bos_token_id, info.eos_token_id) == (2, 1)
    assert info.chat_template is None and not info.has_chat_template and info.is_base_model
    assert info.tensor_count == 236
    assert len(info.block_tensor_bytes) == 18
    assert info.output_tensor_bytes == 0  # tied to token_embd
    assert sum(info.block_tensor_bytes) + info.other_tensor_bytes == info.tensor_bytes
    # The data section is exactly the tensors (plus alignment padding).
    assert 0 <= info.file_size - info.data_offset - info.tensor_bytes < 32 * info.tensor_count


@pytest.mark.gemma
def test_gemma_reads_the_header_only(gemma_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read = 0
    original = gguf_reader.read_fully

    def counting(fh, n):  # type: ignore[no-untyped-def]
        nonlocal read
        chunk = original(fh, n)
        read += len(chunk)
        return chunk

    monkeypatch.setattr(gguf_reader, "read_fully", counting)
    info = inspect(gemma_path)
    # The header is ~6.5 MB of a 253 MB file; allow one read-ahead chunk past it.
    assert read <= info.data_offset + 1024 * 1024


@pytest.mark.gemma
def test_gemma_vectorised_vocab_scan_matches_the_exact_loop(
    gemma_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = inspect(gemma_path)
    monkeypatch.setattr(vocabulary, "_fast_string_chain", lambda reader, count: None)
    slow = inspect(gemma_path)
    assert fast == slow
    assert dict(fast.metadata) == dict(slow.metadata)


def test_version_2_is_read_like_version_3(tiny_model: Path, tmp_path: Path) -> None:
    info = inspect(patched_copy(tiny_model, tmp_path / "v2.gguf", {4: struct.pack("<I", 2)}))
    assert info.gguf_version == 2 and info.vocab_size == 461


def test_file_type_inferred_from_tensors_when_absent(tmp_path: Path) -> None:
    info = inspect(write_gguf(tmp_path / "m.gguf"))
    # token_embd (F32, 100x8) outweighs the F16 ffn_up matrices; norms are ignored.
    assert info.file_type == "F32"
    info16 = inspect(write_gguf(tmp_path / "m16.gguf", tokens=[f"t{i}" for i in range(2)]))
    assert info16.file_type == "F16"


def test_per_layer_head_counts(tmp_path: Path) -> None:
    def extra(w: gguf.GGUFWriter) -> None:
        w.add_array("llama.attention.head_count_kv", [2, 0, 2])

    info = inspect(write_gguf(tmp_path / "m.gguf", extra=extra))
    assert info.head_count_kv == 2
    assert info.head_count_kv_per_layer == (2, 0, 2)


def test_known_architectures() -> None:
    names = known_architectures()
    assert {"llama", "gemma3", "qwen2", "bert"} <= names
    assert "clip" not in names and "(unknown)" not in names


def test_architecture_block_is_read_from_library_strings() -> None:
    blob = b"junk\0unknown\0clip\0llama\0llama4\0newarch-x\0(unknown)\0general.type\0"
    assert architectures._architecture_block(blob) == {"llama", "llama4", "newarch-x"}
    assert architectures._architecture_block(b"nothing here") == set()


# ----------------------------------------------------------------------------- validation


def test_bad_magic(tiny_model: Path, tmp_path: Path) -> None:
    assert reason(patched_copy(tiny_model, tmp_path / "x.gguf", {0: b"GGML"})) == "not a GGUF file"
    (tmp_path / "text.gguf").write_text("hello")
    assert reason(tmp_path / "text.gguf") == "not a GGUF file"
    (tmp_path / "tiny.gguf").write_bytes(b"GG")
    assert reason(tmp_path / "tiny.gguf") == "not a GGUF file"


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        (99, "unsupported GGUF version 99"),
        (1, "unsupported GGUF version 1 (too old for llama.cpp)"),
        (0x03000000, "big-endian GGUF files are not supported"),
    ],
)
def test_unsupported_version(tiny_model: Path, tmp_path: Path, version: int, expected: str) -> None:
    path = patched_copy(tiny_model, tmp_path / "x.gguf", {4: struct.pack("<I", version)})
    assert reason(path) == expected


def test_absurd_string_length_fails_fast(tiny_model: Path, tmp_path: Path) -> None:
    # The first key's length field sits right after magic, version and the two counts.
    path = patched_copy(tiny_model, tmp_path / "x.gguf", {24: struct.pack("<Q", 2**60)})
    tracemalloc.start()
    try:
        message = reason(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert message.startswith("corrupt metadata:") and "larger than the file" in message
    assert peak < 8 * 1024 * 1024


def test_absurd_array_count_fails_fast(tiny_model: Path, tmp_path: Path) -> None:
    at = key_offset(tiny_model, "tokenizer.ggml.tokens") + 8  # after value type and item type
    path = patched_copy(tiny_model, tmp_path / "x.gguf", {at: struct.pack("<Q", 2**50)})
    message = reason(path)
    assert message.startswith("corrupt metadata:") and "tokenizer.ggml.tokens" in message


def test_absurd_counts_in_the_preamble(tiny_model: Path, tmp_path: Path) -> None:
    kv = patched_copy(tiny_model, tmp_path / "kv.gguf", {16: struct.pack("<Q", 2**40)})
    assert (
        reason(kv) == "corrupt metadata: a count of 1,099,511,627,776 key-value pairs is larger than the file"
    )
    tensors = patched_copy(tiny_model, tmp_path / "t.gguf", {8: struct.pack("<Q", 2**40)})
    assert reason(tensors) == "corrupt metadata: a count of 1,099,511,627,776 tensors is larger than the file"


def test_truncated_reports_percentage_present(tiny_model: Path, tmp_path: Path) -> None:
    """A file cut in its weights: how much is here, how much is missing, what to do."""
    data = tiny_model.read_bytes()
    path = tmp_path / "cut.gguf"
    cut = int(len(data) * 0.62)
    path.write_bytes(data[:cut])
    missing = format_bytes(len(data) - cut)
    assert reason(path) == (
        f"incomplete file: 62% of it is here ({format_bytes(cut)} of {format_bytes(len(data))}); "
        f"{missing} of its weights are missing. Download it again."
    )
    path.write_bytes(data[:-1])
    assert reason(path).startswith("incomplete file: 99% of it is here")
    assert "1 B of its weights are missing" in reason(path)


def test_truncated_inside_header(tiny_model: Path, tmp_path: Path) -> None:
    """A file cut in its header (as an unfinished download is): in plain words, with the
    bytes that are here, at least how many more are needed, and what to do; no key names."""
    path = tmp_path / "cut.gguf"
    path.write_bytes(tiny_model.read_bytes()[:2000])
    message = reason(path)
    assert message.startswith(
        "incomplete file: only its first 2.0 KiB are here and it stops inside its header"
    )
    assert "at least " in message and " more are missing" in message
    assert message.endswith("Download it again.")
    assert "tokenizer" not in message and "array" not in message and "byte " not in message
    # At least what the next item it stops in needs: the file is that much shorter than whole.
    at_least = message.split("at least ", 1)[1].split(" more", 1)[0]
    assert at_least.endswith(("B", "KiB")) and at_least != "0 B"
    path.write_bytes(tiny_model.read_bytes()[:20])  # inside the preamble
    assert reason(path).startswith("incomplete file: only its first 20 B are here")
    assert "at least 4 B more are missing" in reason(path)


def test_a_truncated_model_reads_whole_in_the_library(tiny_model: Path, tmp_path: Path) -> None:
    """The library keeps the whole reason (the window shows it whole: tooltip, details)."""
    path = tmp_path / "broken.gguf"
    path.write_bytes(tiny_model.read_bytes()[:3000])
    library = Library(tmp_path / "library.json")
    entry = library.add_file(path)
    assert library.invalid() == (entry,)
    assert entry.error == reason(path) and entry.error.endswith("Download it again.")


def test_empty_directory_missing_unreadable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty.gguf").write_bytes(b"")
    assert reason(tmp_path / "empty.gguf") == "empty file"
    assert reason(tmp_path) == "this is a folder, not a GGUF file"
    assert reason(tmp_path / "missing.gguf") == "file not found"
    locked = tmp_path / "locked.gguf"
    locked.write_bytes(b"GGUF" + b"\0" * 100)

    denied: list[object] = []

    def deny(*args: object, **kwargs: object) -> object:
        denied.append(args[0] if args else None)
        raise PermissionError(13, "Permission denied")

    # Tests may run as root, which ignores file modes: simulate the refusal instead.
    monkeypatch.setattr(gguf_reader, "open", deny, raising=False)
    assert reason(locked) == "cannot read the file: permission denied"
    assert denied, "the refusal was never reached"


def test_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.gguf"
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    os.mkfifo(fifo)
    assert reason(fifo) == "not a regular file"


@pytest.mark.parametrize("n_tokens", [10, 300])  # exact loop below 64 tokens, vectorised above
def test_duplicate_vocabulary_entry(tmp_path: Path, n_tokens: int) -> None:
    tokens = [f"w{i}" for i in range(n_tokens)]
    tokens[n_tokens // 2] = "xyz"
    tokens[n_tokens - 1] = "xyz"
    assert reason(write_gguf(tmp_path / "dup.gguf", tokens=tokens)) == "duplicate vocabulary entry 'xyz'"


def test_duplicate_vocabulary_entry_on_the_fallback_path(tmp_path: Path) -> None:
    # A token starting with NUL defeats the vectorised scan; the exact loop still runs.
    tokens = [f"w{i}" for i in range(200)] + ["\x00nul", "w7"]
    assert reason(write_gguf(tmp_path / "dup.gguf", tokens=tokens)) == "duplicate vocabulary entry 'w7'"


def test_long_tokens_that_share_samples_are_not_duplicates(tmp_path: Path) -> None:
    # Same length, first, middle and last 8 bytes: only the exact comparison tells them apart.
    base = "A" * 8 + "B" * 10 + "C" * 8 + "D" * 10 + "E" * 8
    other = base[:9] + "x" + base[10:]
    tokens = [f"w{i}" for i in range(100)] + [base, other]
    info = inspect(write_gguf(tmp_path / "ok.gguf", tokens=tokens))
    assert info.vocab_size == 102


def test_empty_tokens_follow_llama_cpp_renaming(tmp_path: Path) -> None:
    tokens = [f"w{i}" for i in range(100)] + ["", ""]  # become [EMPTY_100], [EMPTY_101]
    assert inspect(write_gguf(tmp_path / "ok.gguf", tokens=tokens)).vocab_size == 102
    clash = [*tokens, "[EMPTY_100]"]
    assert (
        reason(write_gguf(tmp_path / "bad.gguf", tokens=clash)) == "duplicate vocabulary entry '[EMPTY_100]'"
    )


def test_unknown_architecture(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", arch="notanarch")
    assert reason(path) == "unknown architecture 'notanarch': this llama.cpp build cannot run it"


def test_projector_where_model_expected_and_vice_versa(tiny_model: Path, tiny_projector: Path) -> None:
    assert reason(tiny_projector, expect=ModelKind.TEXT) == (
        "this is a vision projector (mmproj), not a language model"
    )
    with pytest.raises(InvalidModelFile, match="not a language model"):
        inspect_model(tiny_projector)
    with pytest.raises(InvalidModelFile, match="this is a language model, not a vision projector"):
        inspect_projector(tiny_model)
    assert inspect_projector(tiny_projector).is_projector


def test_projector_integer_of_the_wrong_type(tmp_path: Path) -> None:
    path = write_projector(tmp_path / "mmproj.gguf", int32_image_size=True)
    assert reason(path) == "projector metadata clip.vision.image_size has type INT32, expected UINT32"


def test_projector_without_normalisation_constants(tmp_path: Path) -> None:
    path = write_projector(tmp_path / "mmproj.gguf", with_mean=False)
    assert reason(path) == "projector metadata clip.vision.image_mean must be a list of 3 FLOAT32 values"


def test_projector_written_here_is_valid(tmp_path: Path) -> None:
    info = inspect(write_projector(tmp_path / "mmproj.gguf"))
    assert info.projector is not None and info.projector.projection_dim == 8


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (lambda w: w.add_uint64("general.alignment", 32), "general.alignment has type UINT64"),
        (lambda w: w.add_uint32("general.alignment", 48), "alignment 48 is not a power of two"),
        (lambda w: w.add_string("general.type", "adapter"), "this is a LoRA adapter, not a model"),
        (lambda w: w.add_array("tokenizer.ggml.merges", [1, 2, 3]), "tokenizer.ggml.merges is not a list"),
        (lambda w: w.add_array("llama.nested", [[1], [2]]), "is an array of arrays"),
    ],
)
def test_metadata_llama_cpp_would_refuse_or_abort_on(
    tmp_path: Path, extra: Callable[[gguf.GGUFWriter], None], expected: str
) -> None:
    assert expected in reason(write_gguf(tmp_path / "m.gguf", extra=extra))


def test_text_hyperparameter_of_the_wrong_integer_type(tiny_model: Path, tmp_path: Path) -> None:
    # llama.cpp refuses (without crashing) a context length stored as INT32: say so up front.
    at = key_offset(tiny_model, "llama.context_length")
    path = patched_copy(tiny_model, tmp_path / "x.gguf", {at: struct.pack("<I", gguf.GGUFValueType.INT32)})
    assert reason(path) == "corrupt metadata: llama.context_length has type INT32, expected UINT32"


def test_scores_shorter_than_the_vocabulary(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_gguf(path)
    # Shrink the scores array's count: llama.cpp would read past its end.
    at = key_offset(path, "tokenizer.ggml.scores") + 8
    patched = patched_copy(path, tmp_path / "short.gguf", {at: struct.pack("<Q", 10)})
    message = reason(patched)
    # The header no longer lines up after the shortened array, so either complaint is right.
    assert "tokenizer.ggml.scores has 10 entries" in message or message.startswith("corrupt")


def test_duplicate_key_and_unknown_value_type(tiny_model: Path, tmp_path: Path) -> None:
    at = key_offset(tiny_model, "llama.context_length")
    bad_type = patched_copy(tiny_model, tmp_path / "t.gguf", {at: struct.pack("<I", 77)})
    assert reason(bad_type) == "corrupt metadata: key 'llama.context_length' has unknown type 77"
    # Rename llama.block_count to llama.context_len... of the same length: a duplicate.
    data = tiny_model.read_bytes()
    src = b"llama.embedding_length"
    dst = b"llama.context_length\0\0"[: len(src)]
    assert len(src) == len(dst)
    dup = tmp_path / "dup.gguf"
    dup.write_bytes(
        data.replace(struct.pack("<Q", 22) + src, struct.pack("<Q", 20) + b"llama.context_length", 1)
    )
    assert "corrupt" in reason(dup)


def test_tensor_table_checks(tiny_model: Path, tmp_path: Path) -> None:
    data = tiny_model.read_bytes()
    name = b"output_norm.weight"
    at = data.find(struct.pack("<Q", len(name)) + name) + 8 + len(name)  # -> n_dims
    n_dims = struct.unpack_from("<I", data, at)[0]
    type_at = at + 4 + 8 * n_dims
    offset_at = type_at + 4
    dims5 = patched_copy(tiny_model, tmp_path / "d.gguf", {at: struct.pack("<I", 5)})
    assert "has 5 dimensions" in reason(dims5)
    bad_type = patched_copy(tiny_model, tmp_path / "t.gguf", {type_at: struct.pack("<I", 4)})
    assert reason(bad_type) == "corrupt tensor table: tensor 'output_norm.weight' has unknown type 4"
    moved = patched_copy(tiny_model, tmp_path / "o.gguf", {offset_at: struct.pack("<Q", 64)})
    assert reason(moved).startswith("corrupt tensor table: tensor 'output_norm.weight' starts at offset 64")


def test_split_model(tmp_path: Path) -> None:
    first = write_gguf(tmp_path / "big.gguf", split_max_tensors=2)  # 6 tensors -> 3 parts
    parts = sorted(tmp_path.glob("big-*.gguf"))
    assert [p.name for p in parts] == [f"big-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    assert not first.exists()
    whole = inspect_model(parts[0])
    assert whole.split_count == 3 and whole.split_index == 0
    assert whole.split_paths == tuple(parts)
    assert whole.tensor_count == 6 and len(whole.block_tensor_bytes) == 2
    assert whole.total_file_size == sum(p.stat().st_size for p in parts)
    assert split_part_paths(parts[1]) == tuple(parts)

    second = inspect(parts[1])
    assert second.is_split_part and second.split_index == 1
    with pytest.raises(
        InvalidModelFile, match=r"this is part 2 of 3 of a split model; open big-00001-of-00003"
    ):
        inspect_model(parts[1])

    parts[2].unlink()
    assert reason(parts[0]) == "split model part 3 of 3 (big-00003-of-00003.gguf): file not found"


# ----------------------------------------------------------------------------- fuzzing

_FUZZ_PEAK_BYTES = 64 * 1024 * 1024


@functools.cache
def _fuzz_seed_bytes(kind: str) -> bytes:
    # Not a fixture: hypothesis would print the whole file in every failure report.
    from engine.devtools.tiny_models import TinyTextSpec, write_tiny_projector, write_tiny_text_model

    with tempfile.TemporaryDirectory() as folder:
        if kind == "projector":
            path = write_tiny_projector(Path(folder) / "p.gguf")
        else:
            path = write_tiny_text_model(Path(folder) / "m.gguf", TinyTextSpec(n_extra_words=40))
        return path.read_bytes()


@settings(max_examples=200, deadline=1000, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(
    kind=st.sampled_from(["text", "projector"]),
    mutations=st.lists(
        st.tuples(st.integers(0, 9215), st.binary(min_size=1, max_size=8)), min_size=1, max_size=6
    ),
)
def test_mutated_headers_never_escape_as_other_errors(kind: str, mutations: list[tuple[int, bytes]]) -> None:
    """Random bytes over the header (the whole header of both tiny files): inspect returns
    or raises InvalidModelFile with a one-line reason; never another exception, and never
    a large allocation (hypothesis' deadline catches hangs)."""
    data = bytearray(_fuzz_seed_bytes(kind))
    for offset, raw in mutations:
        data[offset : offset + len(raw)] = raw
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fuzz.gguf"
        path.write_bytes(bytes(data))
        tracemalloc.start()
        try:
            try:
                result = inspect(path)
            except InvalidModelFile as exc:
                assert exc.reason and exc.reason.isprintable()
            else:
                assert isinstance(result, ModelInfo)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < _FUZZ_PEAK_BYTES


_EDITS = ("", "\x00z", "é▁", "<0x00>", "a" * 300, "a" * 299 + "b", "copy")


@settings(max_examples=60, deadline=2000, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(65, 120),
    edits=st.lists(st.tuples(st.integers(0, 119), st.sampled_from(_EDITS), st.integers(0, 119)), max_size=6),
)
def test_vocab_scan_matches_llama_cpp_rules(n: int, edits: list[tuple[int, str, int]]) -> None:
    """Fast or slow path, the verdict equals llama.cpp's: tokens read as C strings (cut at a
    NUL), empty ones renamed, then all unique."""
    tokens = [f"t{i}" for i in range(n)]
    for i, edit, j in edits:
        tokens[i % n] = tokens[j % n] if edit == "copy" else edit
    renamed = [t.encode().split(b"\0")[0] or f"[EMPTY_{i}]".encode() for i, t in enumerate(tokens)]
    has_duplicates = len(set(renamed)) != len(renamed)
    with tempfile.TemporaryDirectory() as folder:
        path = write_gguf(Path(folder) / "v.gguf", tokens=tokens)
        if has_duplicates:
            with pytest.raises(InvalidModelFile, match=r"duplicate vocabulary entry|once cut at a NUL byte"):
                inspect(path)
        else:
            assert inspect(path).vocab_size == len(tokens)


def test_builtin_open_is_untouched() -> None:
    # test_empty_directory_missing_unreadable patches gguf_reader.open; make sure it was undone.
    assert not hasattr(gguf_reader, "open") or gguf_reader.open is builtins.open


@pytest.mark.parametrize("n_tokens", [10, 300])  # exact loop below 64 tokens, vectorised above
def test_tokens_equal_once_cut_at_a_nul_are_refused(tmp_path: Path, n_tokens: int) -> None:
    tokens = [f"w{i}" for i in range(n_tokens)]
    tokens[n_tokens - 1] = "w1\x00lo"  # llama.cpp reads "w1": the same as token 1
    assert reason(write_gguf(tmp_path / "nul.gguf", tokens=tokens)) == (
        f"vocabulary entries 1 and {n_tokens - 1} are the same token 'w1' once cut at a NUL byte, "
        "as llama.cpp reads them"
    )
    tokens[n_tokens - 1] = "zz\x00lo"  # cut to "zz": no clash
    assert inspect(write_gguf(tmp_path / "ok.gguf", tokens=tokens)).vocab_size == n_tokens


def nul_inside_a_token(tiny_model: Path, target: Path) -> Path:
    """The issue's reproduction: a NUL after "▁b" in the token "▁ba" makes it "▁b" for llama.cpp."""
    data = bytearray(tiny_model.read_bytes())
    token = "\u2581ba".encode()
    at = data.find(len(token).to_bytes(8, "little") + token)
    assert at > 0
    data[at + 8 + len("\u2581b".encode())] = 0
    target.write_bytes(bytes(data))
    return target


def test_the_nul_token_that_aborts_llama_cpp_is_refused(tmp_path: Path, tiny_model: Path) -> None:
    bad = nul_inside_a_token(tiny_model, tmp_path / "nul.gguf")
    assert "once cut at a NUL byte" in reason(bad)
    # ... and it is a real abort: llama.cpp itself, in a child process, dies on this file.
    code = (
        "import sys, llama_cpp as ll; ll.llama_backend_init();"
        "p = ll.llama_model_default_params(); p.vocab_only = True;"
        f"m = ll.llama_model_load_from_file({str(bad)!r}.encode(), p); sys.exit(0 if m else 3)"
    )
    import subprocess
    import sys

    env = dict(os.environ, GGML_NO_BACKTRACE="1")  # no gdb attach: die at once
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, env=env)
    assert done.returncode == -6, (done.returncode, done.stderr[-500:])  # SIGABRT
