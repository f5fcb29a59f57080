"""What a GGUF's tensor table adds up to: bytes per repeating block, the weights llama.cpp
multiplies with (for the planner's CPU_REPACK estimate), and the names derived from it when
the metadata is silent (file type, size label)."""

from __future__ import annotations

from collections.abc import Iterable

import gguf

from engine.catalog.gguf_header import TensorInfo, as_int
from engine.catalog.gguf_reader import INT_TYPES, ggml_type_name
from engine.catalog.model_info import Scalar


def bytes_by_block(tensors: Iterable[TensorInfo], block_prefix: str) -> tuple[tuple[int, ...], int, int]:
    """Tensor bytes per repeating block (``blk.N.*``, ``v.blk.N.*`` in a projector; index N),
    the bytes outside any block (embeddings, output, norms), and those of ``output.weight``
    (0 when tied)."""
    block_bytes: dict[int, int] = {}
    other = 0
    output = 0
    for t in tensors:
        index = _block_index(t.name, block_prefix)
        if index is None:
            other += t.n_bytes
        else:
            block_bytes[index] = block_bytes.get(index, 0) + t.n_bytes
        if t.name == "output.weight":
            output = t.n_bytes
    n_blocks = max(block_bytes) + 1 if block_bytes else 0
    return tuple(block_bytes.get(i, 0) for i in range(n_blocks)), other, output


def _block_index(name: str, prefix: str) -> int | None:
    if not name.startswith(prefix):
        return None
    number, _, rest = name[len(prefix) :].partition(".")
    return int(number) if number.isdigit() and rest else None


def file_type_name(value: Scalar | None, vtype: int | None, tensors: Iterable[TensorInfo]) -> str:
    """The file type's name ("Q4_K_M") from ``general.file_type`` (its value and stored type),
    else from the tensors."""
    ftype = as_int(value) if vtype in INT_TYPES else None
    if ftype is not None:
        try:
            name = gguf.LlamaFileType(ftype & ~gguf.LlamaFileType.GUESSED).name
        except ValueError:
            return f"type {ftype}"
        return name.removeprefix("MOSTLY_").removeprefix("ALL_")
    # No file type recorded: name it after the type holding most of the weight bytes
    # among matrices (1-D norms and biases are F32 in every quantisation).
    by_type: dict[int, int] = {}
    for t in tensors:
        if len([d for d in t.shape if d > 1]) >= 2:
            by_type[t.ggml_type] = by_type.get(t.ggml_type, 0) + t.n_bytes
    if not by_type:
        return "unknown"
    return ggml_type_name(max(by_type, key=lambda k: by_type[k]))


def size_label_for(parameter_count: int) -> str | None:
    """ "268M"-style label, as convert_hf_to_gguf writes into general.size_label."""
    if parameter_count <= 0:
        return None
    return gguf.utility.model_weight_count_rounded_notation(parameter_count)


# Looked up by row (GET_ROWS), never multiplied: llama.cpp keeps them in the mapped file.
_LOOKUP_TENSORS = ("token_embd.", "pos_embd.", "token_types.")


def matmul_weights(tensors: Iterable[TensorInfo]) -> tuple[tuple[str, int, int], ...]:
    """Bytes of the 2-D and 3-D (expert) weights, by type and row multiple. A model
    without ``output.weight`` multiplies with a second copy of its token embeddings."""
    sums: dict[tuple[str, int], int] = {}
    names = set()
    embeddings = None
    for t in tensors:
        names.add(t.name)
        if t.name == "token_embd.weight":
            embeddings = t
        if len(t.shape) not in (2, 3) or t.name.startswith(_LOOKUP_TENSORS) or "conv1d" in t.name:
            continue
        _add_weight(sums, t)
    if embeddings is not None and "output.weight" not in names and len(embeddings.shape) == 2:
        _add_weight(sums, embeddings)
    return tuple(sorted((name, rows, n) for (name, rows), n in sums.items()))


def _add_weight(sums: dict[tuple[str, int], int], t: TensorInfo) -> None:
    rows = t.shape[1]
    multiple = 8 if rows % 8 == 0 else 4 if rows % 4 == 0 else 1
    key = (ggml_type_name(t.ggml_type), multiple)
    sums[key] = sums.get(key, 0) + t.n_bytes
