"""A GGUF header parsed and checked as llama.cpp's ``gguf_init_from_file`` would: metadata
keys and values, short arrays kept, the tensor table with each tensor's size, and where the
data section starts and must end (``parse_header``, ``check_complete``)."""

from __future__ import annotations

from dataclasses import dataclass

import gguf
import numpy as np

from engine.catalog.gguf_reader import (
    INT_TYPES,
    NUMPY_TYPES,
    SCALAR_FORMATS,
    VT,
    Reader,
    ggml_type_name,
    incomplete_weights,
    read_preamble,
    shorten,
    type_name,
)
from engine.catalog.model_info import Scalar
from engine.catalog.vocabulary import (
    MERGES_KEY,
    TOKENS_KEY,
    check_duplicate_tokens,
    count_byte_tokens,
    items_digest,
    scan_string_array,
)

_DEFAULT_ALIGNMENT = 32
_MAX_DIMS = 4  # GGML_MAX_DIMS
_MAX_TENSOR_NAME = 63  # GGML_MAX_NAME is 64 including the terminating NUL
_INT64_MAX = 2**63 - 1
_KEEP_ARRAY_ITEMS = 512  # arrays at most this long are kept (ModelInfo.arrays)
_QUANT_SIZES: dict[int, tuple[int, int]] = {int(k): v for k, v in gguf.GGML_QUANT_SIZES.items()}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # ggml order: ne[0] first
    ggml_type: int
    offset: int
    n_elements: int
    n_bytes: int


@dataclass
class MetadataArray:
    item_type: int
    count: int
    values: tuple[Scalar, ...] | None  # kept only when short
    digest: str | None = None  # of the raw items, for the vocabulary only (ModelInfo.vocab_hash)
    byte_tokens: int = 0  # distinct "<0xXX>" items, for the vocabulary only (load_limits)


@dataclass
class Header:
    version: int
    scalars: dict[str, Scalar]
    types: dict[str, int]  # key -> GGUFValueType (ARRAY for arrays)
    arrays: dict[str, MetadataArray]
    tensors: list[TensorInfo]
    alignment: int
    data_offset: int
    expected_size: int  # data_offset + end of the last tensor


def parse_header(reader: Reader, *, check_vocab: bool) -> Header:
    version, tensor_count, kv_count = read_preamble(reader)

    scalars: dict[str, Scalar] = {}
    types: dict[str, int] = {}
    arrays: dict[str, MetadataArray] = {}
    for _ in range(kv_count):
        key = reader.string("metadata key")
        if key in types:
            raise reader.fail(f"corrupt metadata: duplicate key '{shorten(key)}'")
        vtype = reader.u32(f"type of '{key}'")
        types[key] = vtype
        if vtype == VT.ARRAY:
            arrays[key] = _read_array(reader, key, check_vocab=check_vocab)
        elif vtype == VT.STRING:
            scalars[key] = reader.string(f"value of '{key}'")
        elif vtype in SCALAR_FORMATS:
            scalars[key] = reader.scalar(vtype, f"value of '{key}'")
        else:
            raise reader.fail(f"corrupt metadata: key '{shorten(key)}' has unknown type {vtype}")

    alignment = _DEFAULT_ALIGNMENT
    if "general.alignment" in types:
        # gguf_init_from_file reads this with gguf_get_val_u32, which aborts on any
        # other type; a zero or non-power-of-two alignment is rejected there too.
        if types["general.alignment"] != VT.UINT32:
            raise reader.fail(
                f"corrupt metadata: general.alignment has type {type_name(types['general.alignment'])}, "
                "expected UINT32"
            )
        alignment = int(scalars["general.alignment"])
        if alignment <= 0 or alignment & (alignment - 1):
            raise reader.fail(f"corrupt metadata: alignment {alignment} is not a power of two")

    tensors = _read_tensor_infos(reader, tensor_count)
    data_offset = -(-reader.pos // alignment) * alignment
    expected = reader.pos  # a file without tensors needs no data section
    running = 0
    for t in tensors:
        # llama.cpp requires tensors to be stored back to back in table order, each
        # padded to the alignment; anything else is rejected when loading.
        if t.offset != running:
            raise reader.fail(
                f"corrupt tensor table: tensor '{t.name}' starts at offset {t.offset:,}, expected {running:,}"
            )
        expected = data_offset + t.offset + t.n_bytes
        running += -(-t.n_bytes // alignment) * alignment
    return Header(
        version=version,
        scalars=scalars,
        types=types,
        arrays=arrays,
        tensors=tensors,
        alignment=alignment,
        data_offset=data_offset,
        expected_size=expected,
    )


def _read_array(reader: Reader, key: str, *, check_vocab: bool) -> MetadataArray:
    item_type = reader.u32(f"item type of '{key}'")
    start = reader.pos
    count = reader.u64(f"length of '{key}'")
    if item_type == VT.STRING:
        min_size = 8
    elif item_type in SCALAR_FORMATS:
        min_size = SCALAR_FORMATS[item_type].size
    elif item_type == VT.ARRAY:
        # gguf.cpp does not read nested arrays; llama.cpp would refuse the file.
        raise reader.fail(f"corrupt metadata: key '{shorten(key)}' is an array of arrays")
    else:
        raise reader.fail(f"corrupt metadata: array '{shorten(key)}' has unknown item type {item_type}")
    if count * min_size > reader.remaining:
        raise reader.fail(
            reader.overrun(f"array '{shorten(key)}' of {count:,} items at byte {start:,}", count * min_size)
        )
    if item_type == VT.STRING:
        keep = count <= _KEEP_ARRAY_ITEMS and key not in (TOKENS_KEY, MERGES_KEY)
        if count > 64 and not keep:
            duplicates = check_vocab and key == TOKENS_KEY
            digest, byte_tokens = scan_string_array(reader, key, count, check_duplicates=duplicates)
            if key != TOKENS_KEY:
                return MetadataArray(item_type, count, None)
            return MetadataArray(item_type, count, None, digest, byte_tokens)
        items = [reader.raw_string(f"item of '{key}'") for _ in range(count)]
        if check_vocab and key == TOKENS_KEY:
            check_duplicate_tokens(reader, items)
        values = tuple(s.decode("utf-8", errors="replace") for s in items) if keep else None
        if key != TOKENS_KEY:
            return MetadataArray(item_type, count, values)
        return MetadataArray(item_type, count, values, items_digest(items), count_byte_tokens(items))
    n_bytes = count * min_size
    if count > _KEEP_ARRAY_ITEMS:
        reader.skip(n_bytes)
        return MetadataArray(item_type, count, None)
    off = reader.ensure(n_bytes, f"items of '{key}'")
    reader.skip(n_bytes)
    raw = np.frombuffer(reader.buf, dtype=NUMPY_TYPES[item_type], count=count, offset=off)
    values = raw.astype(bool) if item_type == VT.BOOL else raw
    return MetadataArray(item_type, count, tuple(values.tolist()))


def _read_tensor_infos(reader: Reader, count: int) -> list[TensorInfo]:
    tensors: list[TensorInfo] = []
    seen: set[str] = set()
    for _ in range(count):
        raw_name = reader.raw_string("tensor name")
        name = raw_name.decode("utf-8", errors="replace")
        if len(raw_name) > _MAX_TENSOR_NAME:
            raise reader.fail(f"corrupt tensor table: tensor name '{shorten(name)}' is too long")
        if name in seen:
            raise reader.fail(f"corrupt tensor table: duplicate tensor '{shorten(name)}'")
        seen.add(name)
        n_dims = reader.u32(f"dimensions of '{name}'")
        if n_dims > _MAX_DIMS:
            raise reader.fail(f"corrupt tensor table: tensor '{name}' has {n_dims} dimensions")
        shape = tuple(reader.i64(f"shape of '{name}'") for _ in range(n_dims))
        ggml_type = reader.u32(f"type of '{name}'")
        offset = reader.u64(f"offset of '{name}'")
        if any(d < 0 for d in shape):
            raise reader.fail(f"corrupt tensor table: tensor '{name}' has a negative dimension")
        sizes = _QUANT_SIZES.get(ggml_type)
        if sizes is None:
            raise reader.fail(f"corrupt tensor table: tensor '{name}' has unknown type {ggml_type}")
        block, type_size = sizes
        n_elements = 1
        for d in shape:
            n_elements *= d
        if n_elements > _INT64_MAX:
            raise reader.fail(f"corrupt tensor table: tensor '{name}' is impossibly large")
        ne0 = shape[0] if shape else 1
        if ne0 % block:
            raise reader.fail(
                f"corrupt tensor table: tensor '{name}' width {ne0} is not a multiple of "
                f"the {ggml_type_name(ggml_type)} block size {block}"
            )
        n_bytes = n_elements // block * type_size
        tensors.append(TensorInfo(name, shape, ggml_type, offset, n_elements, n_bytes))
    return tensors


def check_complete(reader: Reader, header: Header) -> None:
    if reader.size < header.expected_size:
        raise reader.fail(incomplete_weights(reader.size, header.expected_size))


def as_int(value: object) -> int | None:
    # bool is an int subclass, but a boolean is never a hyper-parameter.
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def int_or_layers(header: Header, key: str) -> tuple[int | None, tuple[int, ...]]:
    scalar = as_int(header.scalars.get(key))
    if scalar is not None:
        return scalar, ()
    array = header.arrays.get(key)
    if array is None or array.values is None or array.item_type not in INT_TYPES:
        return None, ()
    layers = tuple(int(v) for v in array.values)
    return (max(layers) if layers else None), layers
