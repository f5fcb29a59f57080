"""GGUF files: read the header and tensor table, validate, describe.

Never reads tensor data: inspecting a multi-gigabyte model costs a few milliseconds.

The parser is our own rather than ``gguf.GGUFReader``: the reader memory-maps the whole
file and builds a numpy view per tensor and a Python object per array element (seconds
for a 262k-token vocabulary), and it trusts counts and lengths it reads. Here every read
is bounded by the file size before anything is allocated, so a damaged or hostile file
ends in ``InvalidModelFile`` with a one-line reason, never in a MemoryError, a hang, or
(further down the line) a llama.cpp abort. ``gguf`` is used only for its constants.

Public API:

- ``inspect(path, expect=None) -> ModelInfo`` reads and validates any GGUF (model,
  projector, split part); ``expect`` rejects the other kind with a human message.
- ``inspect_model(path)`` / ``inspect_projector(path)``: ``inspect`` with ``expect`` set.
- ``known_architectures()``: the text architectures the installed llama.cpp knows.
- ``split_part_paths(path, count)``: the file names of every part of a split GGUF.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import hashlib
import importlib.util
import re
import stat
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import BinaryIO

import gguf
import numpy as np

from engine.errors import InvalidModelFile
from engine.load_limits import check_llama_limits

Scalar = int | float | str | bool


class ModelKind(enum.Enum):
    TEXT = "text"
    PROJECTOR = "projector"


@dataclass(frozen=True)
class ProjectorInfo:
    """What a vision projector (mmproj) says about itself."""

    projector_type: str
    projection_dim: int  # must equal the text model's embedding size
    image_size: int
    patch_size: int
    embedding_length: int
    block_count: int
    has_vision: bool = True
    has_audio: bool = False

    @property
    def tokens_per_image(self) -> int:
        if self.patch_size <= 0:
            return 0
        return (self.image_size // self.patch_size) ** 2


@dataclass(frozen=True)
class ModelInfo:
    """Everything Hearth needs from a GGUF header (frozen value).

    For the first part of a split GGUF, the tensor figures (``parameter_count``,
    ``tensor_*``, ``block_tensor_bytes``) cover every part and ``split_paths`` lists them;
    ``file_size`` stays the size of this one file (``total_file_size`` is the sum).
    """

    path: Path
    file_size: int
    gguf_version: int
    kind: ModelKind
    architecture: str
    name: str
    size_label: str | None
    parameter_count: int
    file_type: str  # e.g. "Q4_K_M", "F16"; "unknown" when absent
    tensor_count: int
    tensor_bytes: int  # sum of all tensor data sizes
    block_tensor_bytes: tuple[int, ...]  # per repeating block (blk.N.*), index = N
    other_tensor_bytes: int  # everything outside blocks (embeddings, output, norms)
    output_tensor_bytes: int  # output.weight (0 when tied to token_embd)
    context_length: int | None = None
    block_count: int | None = None
    embedding_length: int | None = None
    feed_forward_length: int | None = None
    head_count: int | None = None
    head_count_kv: int | None = None
    key_length: int | None = None
    value_length: int | None = None
    sliding_window: int | None = None
    vocab_size: int | None = None
    vocab_hash: str | None = None  # tokenizer.ggml.tokens as stored: equal hashes, same token ids
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    chat_template: str | None = None
    split_count: int = 1
    split_index: int = 0
    projector: ProjectorInfo | None = None
    # Scalar metadata (no large arrays), for details views and planner specifics.
    metadata: Mapping[str, Scalar] = field(
        default_factory=lambda: MappingProxyType({}), compare=False, repr=False
    )
    # Added after the first contract; all have defaults.
    tokenizer_model: str | None = None  # tokenizer.ggml.model, e.g. "llama", "gpt2"
    # Per-layer values when the file stores an array (hybrid/recurrent models); the
    # scalar fields above then hold the maximum.
    head_count_per_layer: tuple[int, ...] = ()
    head_count_kv_per_layer: tuple[int, ...] = ()
    feed_forward_length_per_layer: tuple[int, ...] = ()
    data_offset: int = 0  # where tensor data starts in this file (after the header)
    alignment: int = 32
    split_paths: tuple[Path, ...] = ()  # every part, first included, for a split model
    total_file_size: int = 0  # all parts together (== file_size when not split)
    # Short arrays (<= 512 numbers or short strings), e.g. clip.vision.image_mean or a
    # per-layer sliding-window pattern. Token lists and merges are never kept.
    arrays: Mapping[str, tuple[Scalar, ...]] = field(
        default_factory=lambda: MappingProxyType({}), compare=False, repr=False
    )
    # Weights llama.cpp multiplies with (so its CPU backend may repack them), summed as
    # (ggml type name, rows divisible by 8 / 4 / neither -> 8, 4 or 1, bytes): what the
    # planner needs to predict the CPU_REPACK buffer without the tensor table.
    matmul_weights: tuple[tuple[str, int, int], ...] = ()
    merges_count: int = 0  # tokenizer.ggml.merges (BPE): llama.cpp keeps a table of them

    @property
    def has_chat_template(self) -> bool:
        return bool(self.chat_template)

    @property
    def is_projector(self) -> bool:
        return self.kind is ModelKind.PROJECTOR

    @property
    def display_name(self) -> str:
        return self.name or self.path.stem

    @property
    def is_split_part(self) -> bool:
        """True for parts 2..N of a split model (not loadable on their own)."""
        return self.split_index > 0


# --------------------------------------------------------------------------- constants

_MAGIC = b"GGUF"
_DEFAULT_ALIGNMENT = 32
_MAX_DIMS = 4  # GGML_MAX_DIMS
_MAX_TENSOR_NAME = 63  # GGML_MAX_NAME is 64 including the terminating NUL
_INT64_MAX = 2**63 - 1
# A real header (vocabulary, merges, templates) is a few tens of MB at most; refusing
# bigger ones bounds what a hostile file can make us read and hold.
_MAX_HEADER_BYTES = 256 * 1024 * 1024
_FIRST_READ = 1024 * 1024
_KEEP_ARRAY_ITEMS = 512  # arrays at most this long go into ModelInfo.arrays
_KEEP_STRING_CHARS = 1024  # longer strings stay out of ModelInfo.metadata

VT = gguf.GGUFValueType
_SCALAR_FORMATS: dict[int, struct.Struct] = {
    VT.UINT8: struct.Struct("<B"),
    VT.INT8: struct.Struct("<b"),
    VT.UINT16: struct.Struct("<H"),
    VT.INT16: struct.Struct("<h"),
    VT.UINT32: struct.Struct("<I"),
    VT.INT32: struct.Struct("<i"),
    VT.FLOAT32: struct.Struct("<f"),
    VT.BOOL: struct.Struct("<?"),
    VT.UINT64: struct.Struct("<Q"),
    VT.INT64: struct.Struct("<q"),
    VT.FLOAT64: struct.Struct("<d"),
}
_NUMPY_TYPES: dict[int, str] = {
    VT.UINT8: "<u1",
    VT.INT8: "<i1",
    VT.UINT16: "<u2",
    VT.INT16: "<i2",
    VT.UINT32: "<u4",
    VT.INT32: "<i4",
    VT.FLOAT32: "<f4",
    VT.BOOL: "<u1",
    VT.UINT64: "<u8",
    VT.INT64: "<i8",
    VT.FLOAT64: "<f8",
}
_INT_TYPES = frozenset({VT.UINT8, VT.INT8, VT.UINT16, VT.INT16, VT.UINT32, VT.INT32, VT.UINT64, VT.INT64})
_FLOAT_TYPES = frozenset({VT.FLOAT32, VT.FLOAT64})
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_QUANT_SIZES: dict[int, tuple[int, int]] = {int(k): v for k, v in gguf.GGML_QUANT_SIZES.items()}

_TOKENS_KEY = "tokenizer.ggml.tokens"
_MERGES_KEY = "tokenizer.ggml.merges"
_SCORES_KEY = "tokenizer.ggml.scores"
_TOKEN_TYPE_KEY = "tokenizer.ggml.token_type"
_SPLIT_RE = re.compile(r"^(?P<stem>.*)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)

# Used when the architecture names cannot be read from the installed libllama (or to
# complete them: the linker may fold a short name into the tail of a longer string,
# e.g. "qwen2" into "rwkv6qwen2", so it never shows up as a string of its own).
_FALLBACK_ARCHITECTURES = frozenset(
    """
    llama llama4 deci falcon grok gpt2 gptj gptneox mpt baichuan starcoder refact bert
    modern-bert nomic-bert nomic-bert-moe neo-bert jina-bert-v2 jina-bert-v3 eurobert bloom
    stablelm qwen qwen2 qwen2moe qwen2vl qwen3 qwen3moe qwen3next qwen3vl qwen3vlmoe qwen35
    qwen35moe phi2 phi3 phimoe plamo plamo2 codeshell orion internlm2 minicpm minicpm3
    gemma gemma2 gemma3 gemma3n gemma-embedding starcoder2 mamba mamba2 jamba falcon-h1
    xverse command-r cohere2 dbrx olmo olmo2 olmoe openelm arctic deepseek deepseek2
    chatglm glm4 glm4moe bitnet t5 t5encoder jais nemotron nemotron_h exaone exaone4 rwkv6
    rwkv6qwen2 rwkv7 arwkv7 granite granitemoe granitehybrid chameleon wavtokenizer-dec plm
    bailingmoe bailingmoe2 dots1 arcee ernie4_5 ernie4_5-moe hunyuan-moe hunyuan-dense
    smollm3 gpt-oss lfm2 lfm2moe dream smallthinker llada llada-moe seed_oss grovemoe
    apertus minimax-m2 cogvlm rnd1 pangu-embedded mistral3
    """.split()  # noqa: SIM905 - a word list reads better than 110 quoted strings
)

# clip.cpp reads its hyper-parameters with gguf_get_val_u32/_i32/_f32/_bool, which
# GGML_ASSERT the stored type: a projector with e.g. an INT32 image size aborts the
# process. These are the keys whose exact type we therefore insist on.
_CLIP_INT32_KEYS = frozenset({"clip.minicpmv_version", "clip.minicpmv_query_num"})
# llama.cpp reads these hyper-parameters with a type check and refuses the file when a
# scalar is not UINT32 (checked: INT32, UINT16 and UINT64 all fail to load). Per-layer
# arrays are a different, accepted form.
_TEXT_U32_SUFFIXES = (
    "context_length",
    "embedding_length",
    "block_count",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "attention.sliding_window",
    "vocab_size",
    "rope.dimension_count",
    "expert_count",
    "expert_used_count",
)
_TEXT_U32_KEYS = (
    "general.file_type",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.unknown_token_id",
    "tokenizer.ggml.padding_token_id",
    "tokenizer.ggml.eot_token_id",
    "tokenizer.ggml.eom_token_id",
)
_CLIP_REQUIRED_VISION_U32 = (
    "clip.vision.image_size",
    "clip.vision.patch_size",
    "clip.vision.embedding_length",
    "clip.vision.feed_forward_length",
    "clip.vision.projection_dim",
    "clip.vision.block_count",
    "clip.vision.attention.head_count",
)
_CLIP_REQUIRED_AUDIO_U32 = (
    "clip.audio.embedding_length",
    "clip.audio.feed_forward_length",
    "clip.audio.projection_dim",
    "clip.audio.block_count",
    "clip.audio.attention.head_count",
)


def _type_name(vtype: int) -> str:
    try:
        return VT(vtype).name
    except ValueError:
        return f"type {vtype}"


# --------------------------------------------------------------------------- reading


class _Reader:
    """Bounded reads from a file through a sliding window (no mmap).

    mmap would turn a file shrinking underneath us (a download being restarted) into
    SIGBUS; plain reads turn it into an exception. Skipped regions (scores, token types)
    are never read at all.
    """

    __slots__ = ("base", "buf", "fh", "path", "pos", "size")

    def __init__(self, path: Path, fh: BinaryIO, size: int) -> None:
        self.path = path
        self.fh = fh
        self.size = size
        self.buf = b""
        self.base = 0
        self.pos = 0

    def fail(self, reason: str) -> InvalidModelFile:
        return _invalid(self.path, reason)

    @property
    def remaining(self) -> int:
        return self.size - self.pos

    def ensure(self, n: int, what: str) -> int:
        """Make [pos, pos+n) readable; return its offset inside ``buf``."""
        end = self.pos + n
        if self.base <= self.pos and end <= self.base + len(self.buf):
            return self.pos - self.base
        if end > self.size:
            raise self.fail(f"truncated: the file ends inside its header ({what})")
        if end > _MAX_HEADER_BYTES:
            raise self.fail("corrupt metadata: header larger than 256 MiB")
        keep = b""
        if self.base <= self.pos < self.base + len(self.buf):
            keep = self.buf[self.pos - self.base :]
        want = min(max(n, _FIRST_READ), self.size - self.pos, _MAX_HEADER_BYTES - self.pos)
        try:
            self.fh.seek(self.pos + len(keep))
            chunk = _read_fully(self.fh, want - len(keep))
        except OSError as exc:
            raise self.fail(f"cannot read the file: {exc.strerror or exc}") from exc
        if len(keep) + len(chunk) < n:
            raise self.fail("truncated: the file got shorter while it was being read")
        self.buf = keep + chunk
        self.base = self.pos
        return 0

    def skip(self, n: int) -> None:
        self.pos += n

    def u32(self, what: str) -> int:
        off = self.ensure(4, what)
        self.pos += 4
        return _U32.unpack_from(self.buf, off)[0]

    def u64(self, what: str) -> int:
        off = self.ensure(8, what)
        self.pos += 8
        return _U64.unpack_from(self.buf, off)[0]

    def i64(self, what: str) -> int:
        off = self.ensure(8, what)
        self.pos += 8
        return _I64.unpack_from(self.buf, off)[0]

    def scalar(self, vtype: int, what: str) -> Scalar:
        fmt = _SCALAR_FORMATS[vtype]
        off = self.ensure(fmt.size, what)
        self.pos += fmt.size
        return fmt.unpack_from(self.buf, off)[0]

    def raw_string(self, what: str) -> bytes:
        start = self.pos
        n = self.u64(what)
        if n > self.remaining:
            raise self.fail(self.overrun(f"{what}: string of {n:,} bytes at byte {start:,}", n))
        off = self.ensure(n, what)
        self.pos += n
        return self.buf[off : off + n]

    def string(self, what: str) -> str:
        return self.raw_string(what).decode("utf-8", errors="replace")

    def overrun(self, claim: str, n: int) -> str:
        # A size no header could have is corruption; a plausible one that merely runs
        # past the end of the file is most likely an incomplete download.
        if n > self.size and n > _MAX_HEADER_BYTES:
            return f"corrupt metadata: {claim} is larger than the file"
        return f"truncated: the file ends inside its header ({claim})"


def _read_fully(fh: BinaryIO, n: int) -> bytes:
    # A raw read may return less than asked (signals, network file systems).
    parts: list[bytes] = []
    while n > 0:
        chunk = fh.read(n)
        if not chunk:
            break
        parts.append(chunk)
        n -= len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


# --------------------------------------------------------------------------- header


@dataclass(frozen=True)
class _Tensor:
    name: str
    shape: tuple[int, ...]  # ggml order: ne[0] first
    ggml_type: int
    offset: int
    n_elements: int
    n_bytes: int


@dataclass
class _Array:
    item_type: int
    count: int
    values: tuple[Scalar, ...] | None  # kept only when short
    digest: str | None = None  # of the raw items, for the vocabulary only (ModelInfo.vocab_hash)
    byte_tokens: int = 0  # distinct "<0xXX>" items, for the vocabulary only (load_limits)


@dataclass
class _Header:
    version: int
    scalars: dict[str, Scalar]
    types: dict[str, int]  # key -> GGUFValueType (ARRAY for arrays)
    arrays: dict[str, _Array]
    tensors: list[_Tensor]
    alignment: int
    data_offset: int
    expected_size: int  # data_offset + end of the last tensor


def _parse_header(reader: _Reader, *, check_vocab: bool) -> _Header:
    magic_off = reader.ensure(min(4, reader.size), "magic")
    if reader.size < 4 or reader.buf[magic_off : magic_off + 4] != _MAGIC:
        raise reader.fail("not a GGUF file")
    reader.skip(4)
    if reader.size < 24:
        raise reader.fail("truncated: the file ends inside its header")
    version = reader.u32("version")
    if version not in (2, 3):
        if version == 1:
            raise reader.fail("unsupported GGUF version 1 (too old for llama.cpp)")
        if _U32.unpack(struct.pack(">I", version))[0] in (2, 3):
            raise reader.fail("big-endian GGUF files are not supported")
        raise reader.fail(f"unsupported GGUF version {version}")
    tensor_count = reader.u64("tensor count")
    kv_count = reader.u64("key-value count")
    # Smallest possible entries: a KV is key length (8) + type (4) + one byte; a tensor
    # info is name length (8) + n_dims (4) + type (4) + offset (8).
    if kv_count * 13 > reader.remaining:
        raise reader.fail(reader.overrun(f"a count of {kv_count:,} key-value pairs", kv_count * 13))
    if tensor_count * 24 > reader.remaining:
        raise reader.fail(reader.overrun(f"a count of {tensor_count:,} tensors", tensor_count * 24))

    scalars: dict[str, Scalar] = {}
    types: dict[str, int] = {}
    arrays: dict[str, _Array] = {}
    for _ in range(kv_count):
        key = reader.string("metadata key")
        if key in types:
            raise reader.fail(f"corrupt metadata: duplicate key '{_short(key)}'")
        vtype = reader.u32(f"type of '{key}'")
        types[key] = vtype
        if vtype == VT.ARRAY:
            arrays[key] = _read_array(reader, key, check_vocab=check_vocab)
        elif vtype == VT.STRING:
            scalars[key] = reader.string(f"value of '{key}'")
        elif vtype in _SCALAR_FORMATS:
            scalars[key] = reader.scalar(vtype, f"value of '{key}'")
        else:
            raise reader.fail(f"corrupt metadata: key '{_short(key)}' has unknown type {vtype}")

    alignment = _DEFAULT_ALIGNMENT
    if "general.alignment" in types:
        # gguf_init_from_file reads this with gguf_get_val_u32, which aborts on any
        # other type; a zero or non-power-of-two alignment is rejected there too.
        if types["general.alignment"] != VT.UINT32:
            raise reader.fail(
                f"corrupt metadata: general.alignment has type {_type_name(types['general.alignment'])}, "
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
    return _Header(
        version=version,
        scalars=scalars,
        types=types,
        arrays=arrays,
        tensors=tensors,
        alignment=alignment,
        data_offset=data_offset,
        expected_size=expected,
    )


def _read_array(reader: _Reader, key: str, *, check_vocab: bool) -> _Array:
    item_type = reader.u32(f"item type of '{key}'")
    start = reader.pos
    count = reader.u64(f"length of '{key}'")
    if item_type == VT.STRING:
        min_size = 8
    elif item_type in _SCALAR_FORMATS:
        min_size = _SCALAR_FORMATS[item_type].size
    elif item_type == VT.ARRAY:
        # gguf.cpp does not read nested arrays; llama.cpp would refuse the file.
        raise reader.fail(f"corrupt metadata: key '{_short(key)}' is an array of arrays")
    else:
        raise reader.fail(f"corrupt metadata: array '{_short(key)}' has unknown item type {item_type}")
    if count * min_size > reader.remaining:
        raise reader.fail(
            reader.overrun(f"array '{_short(key)}' of {count:,} items at byte {start:,}", count * min_size)
        )
    if item_type == VT.STRING:
        keep = count <= _KEEP_ARRAY_ITEMS and key not in (_TOKENS_KEY, _MERGES_KEY)
        if count > 64 and not keep:
            duplicates = check_vocab and key == _TOKENS_KEY
            digest, byte_tokens = _scan_string_array(reader, key, count, check_duplicates=duplicates)
            if key != _TOKENS_KEY:
                return _Array(item_type, count, None)
            return _Array(item_type, count, None, digest, byte_tokens)
        items = [reader.raw_string(f"item of '{key}'") for _ in range(count)]
        if check_vocab and key == _TOKENS_KEY:
            _check_duplicate_tokens(reader, items)
        values = tuple(s.decode("utf-8", errors="replace") for s in items) if keep else None
        if key != _TOKENS_KEY:
            return _Array(item_type, count, values)
        return _Array(item_type, count, values, _items_digest(items), _count_byte_tokens(items))
    n_bytes = count * min_size
    if count > _KEEP_ARRAY_ITEMS:
        reader.skip(n_bytes)
        return _Array(item_type, count, None)
    off = reader.ensure(n_bytes, f"items of '{key}'")
    reader.skip(n_bytes)
    raw = np.frombuffer(reader.buf, dtype=_NUMPY_TYPES[item_type], count=count, offset=off)
    values = raw.astype(bool) if item_type == VT.BOOL else raw
    return _Array(item_type, count, tuple(values.tolist()))


def _read_tensor_infos(reader: _Reader, count: int) -> list[_Tensor]:
    tensors: list[_Tensor] = []
    seen: set[str] = set()
    for _ in range(count):
        raw_name = reader.raw_string("tensor name")
        name = raw_name.decode("utf-8", errors="replace")
        if len(raw_name) > _MAX_TENSOR_NAME:
            raise reader.fail(f"corrupt tensor table: tensor name '{_short(name)}' is too long")
        if name in seen:
            raise reader.fail(f"corrupt tensor table: duplicate tensor '{_short(name)}'")
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
                f"the {_ggml_type_name(ggml_type)} block size {block}"
            )
        n_bytes = n_elements // block * type_size
        tensors.append(_Tensor(name, shape, ggml_type, offset, n_elements, n_bytes))
    return tensors


# --------------------------------------------------------------------------- string arrays

_H1 = np.uint64(0x9E3779B97F4A7C15)
_H2 = np.uint64(0xC2B2AE3D27D4EB4F)
_H3 = np.uint64(0x165667B19E3779F9)


def _items_digest(items: Iterable[bytes]) -> str:
    """The vocabulary's identity: a hash of its items as stored (length field, then text)."""
    h = hashlib.sha1(usedforsecurity=False)
    for item in items:
        h.update(len(item).to_bytes(8, "little"))
        h.update(item)
    return h.hexdigest()


_BYTE_TOKEN = re.compile(rb"<0x[0-9A-F]{2}>")


def _count_byte_tokens(items: Iterable[bytes]) -> int:
    """How many of the 256 "<0xXX>" byte tokens an SPM vocabulary has (6-byte items only)."""
    return len({item for item in items if len(item) == 6 and _BYTE_TOKEN.fullmatch(item)})


def _scan_string_array(reader: _Reader, key: str, count: int, *, check_duplicates: bool) -> tuple[str, int]:
    """Walk ``count`` length-prefixed strings at ``reader.pos`` (and check duplicates);
    the digest of the raw array (``_items_digest`` of its items) and its byte-token count.

    A Python loop over a 262k-token vocabulary costs ~100 ms, so the common case is
    vectorised: every string starts with a u64 length whose high bytes are zero, followed
    by text that does not start with NUL, so string starts are "a run of >= 4 zero bytes
    then a non-zero byte, minus 8". Those candidates are then *verified* as an exact
    chain (start[k+1] == start[k] + 8 + length[k]); when the guess does not hold (NUL
    bytes in the text, empty strings side by side, absurd lengths) the exact slow path
    runs instead, so the speed-up never changes the result.
    """
    # ~17 bytes per entry is typical of vocabularies (8-byte length + short text); a
    # window that turns out too small grows from what the first pass has seen.
    estimate = min(count * 18 + 65536, reader.remaining, _MAX_HEADER_BYTES - reader.pos)
    for _ in range(8):
        reader.ensure(min(max(estimate, 8), reader.remaining), f"'{key}'")
        outcome = _fast_string_chain(reader, count)
        if outcome is None:
            break
        if isinstance(outcome, int):  # the window ends before the array does
            if outcome <= estimate or estimate >= reader.remaining:
                break
            estimate = outcome
            continue
        starts, lengths, end = outcome
        if check_duplicates:
            _check_duplicates_vectorised(reader, starts, lengths)
        lo = reader.pos - reader.base
        digest = hashlib.sha1(reader.buf[lo : lo + end], usedforsecurity=False).hexdigest()
        six = (lo + starts[lengths == 6] + 8).tolist()
        byte_tokens = _count_byte_tokens(bytes(reader.buf[a : a + 6]) for a in six)
        reader.pos += end
        return digest, byte_tokens
    return _scan_string_array_slowly(reader, key, count, check_duplicates=check_duplicates)


def _fast_string_chain(reader: _Reader, count: int) -> tuple[np.ndarray, np.ndarray, int] | int | None:
    """Starts and lengths (relative to ``reader.pos``) and the end offset of the array;
    an int when the window must grow to about that size; None when the guess fails."""
    lo = reader.pos - reader.base
    buf = reader.buf
    size = len(buf) - lo
    if size < 24:
        return None
    # Aligned u16 words cover any run of >= 3 zero bytes with at least one all-zero word,
    # which makes this ~4x cheaper than testing every byte offset.
    first_word = lo // 2
    n_words = (len(buf) // 2) - first_word
    words = np.frombuffer(buf, dtype="<u2", count=n_words, offset=first_word * 2)
    zero = words == 0
    # Words j and j+1 zero (>= 4 zero bytes), word j+2 not: the non-zero byte that ends
    # the run is the first text byte of the string whose length field ends just before.
    pair = zero[:-1] & zero[1:]
    j = np.flatnonzero(pair[:-1] > zero[2:])  # bool ">" is "and not", in one pass
    text_at = (j + 2) * 2 + ((words[j + 2] & 0xFF) == 0) + first_word * 2 - lo
    starts = text_at - 8
    starts = starts[starts >= 0]
    k = min(len(starts), count)
    if k == 0 or starts[0] != 0:
        return None
    starts = starts[:k]
    u64 = np.ndarray((size - 7,), dtype="<u8", buffer=buf, offset=lo, strides=(1,))
    raw_lengths = u64[starts]
    lengths = np.minimum(raw_lengths, size).astype(np.int64)
    ends = starts + 8 + lengths
    chained = ends[:-1] == starts[1:]
    m = k if bool(chained.all()) else int(np.argmin(chained)) + 1
    if m == count and int(ends[m - 1]) <= size:
        return starts, lengths, int(ends[m - 1])
    reached = int(ends[m - 1])
    if reached < size - 32:
        return None  # broken inside the window: not the shape we guessed
    # Ran out of window: ask for room for the rest at the average size so far.
    return int(reached + (count - m) * (reached / m) * 1.1) + 4096


def _check_duplicates_vectorised(reader: _Reader, starts: np.ndarray, lengths: np.ndarray) -> None:
    lo = reader.pos - reader.base
    buf = reader.buf
    size = len(buf) - lo
    if _texts_hold_nul(buf, lo, starts, lengths):
        # llama.cpp reads tokens as C strings: compare them as it will, cut at the NUL.
        tokens = [
            bytes(buf[lo + int(a) + 8 : lo + int(a) + 8 + int(n)])
            for a, n in zip(starts, lengths, strict=True)
        ]
        _check_duplicate_tokens(reader, tokens)
        return
    u64 = np.ndarray((size - 7,), dtype="<u8", buffer=buf, offset=lo, strides=(1,))
    # Sample the last, first and middle 8 bytes of each string. For strings shorter than
    # 8 the samples overlap the string's own length field, which is a function of the
    # length, so equal strings always give equal samples: no duplicate is ever missed.
    # Unequal strings that collide are told apart exactly below.
    last = u64[np.minimum(starts + lengths, size - 8)]
    first = u64[starts + np.minimum(lengths, 8)]
    middle = u64[starts + np.minimum(lengths // 2 + 4, lengths)]
    h = last * _H1
    h ^= first * _H2
    h ^= middle * _H3
    h += lengths.astype(np.uint64)
    folded = ((h >> np.uint64(32)) ^ h).astype(np.uint32)
    empty = lengths == 0
    if empty.any():
        # llama.cpp renames empty tokens to "[EMPTY_<id>]", so they never collide with
        # each other; take them out of the hash test and check the names exactly.
        folded[empty] = 0
    live = folded[~empty] if empty.any() else folded
    # Only hashes sharing one of 2^20 buckets can be equal; sorting just those is ~3x
    # cheaper than sorting all 262k.
    bucket = (live >> np.uint32(12)).astype(np.intp)
    crowded = np.bincount(bucket, minlength=1 << 20)[bucket] > 1
    ordered = np.sort(live[crowded])
    same = ordered[1:] == ordered[:-1]
    if not same.any() and not empty.any():
        return
    suspects = np.flatnonzero(np.isin(folded, ordered[1:][same]) & ~empty)
    seen: dict[bytes, int] = {}
    for i in suspects.tolist():
        a = lo + int(starts[i]) + 8
        token = buf[a : a + int(lengths[i])]
        if token in seen:
            raise reader.fail(f"duplicate vocabulary entry {_quote_token(token)}")
        seen[token] = i
    if empty.any():
        names = {f"[EMPTY_{i}]".encode() for i in np.flatnonzero(empty).tolist()}
        sizes = {len(n) for n in names}
        for i in np.flatnonzero(np.isin(lengths, list(sizes))).tolist():
            a = lo + int(starts[i]) + 8
            token = buf[a : a + int(lengths[i])]
            if token in names:
                raise reader.fail(f"duplicate vocabulary entry {_quote_token(token)}")


def _scan_string_array_slowly(
    reader: _Reader, key: str, count: int, *, check_duplicates: bool
) -> tuple[str, int]:
    items = [reader.raw_string(f"item of '{key}'") for _ in range(count)]
    if check_duplicates:
        _check_duplicate_tokens(reader, items)
    return _items_digest(items), _count_byte_tokens(items)


def _texts_hold_nul(
    buf: bytes | bytearray | memoryview, lo: int, starts: np.ndarray, lengths: np.ndarray
) -> bool:
    """Whether any string's text has a NUL byte: all zero bytes of the array, less those of
    the 8-byte length fields (known from the lengths), without locating any of them."""
    end = lo + int(starts[-1]) + 8 + int(lengths[-1])
    region = np.frombuffer(buf, dtype=np.uint8, count=end - lo, offset=lo)
    in_lengths = np.count_nonzero(lengths.astype("<u8").view(np.uint8) == 0)
    return int(np.count_nonzero(region == 0)) > int(in_lengths)


def _check_duplicate_tokens(reader: _Reader, tokens: list[bytes]) -> None:
    seen: dict[bytes, int] = {}
    for i, token in enumerate(tokens):
        # llama.cpp keeps what comes before a NUL (C strings) and renames empty tokens
        word = token.split(b"\0", 1)[0] or f"[EMPTY_{i}]".encode()
        if word in seen:
            j = seen[word]
            if b"\0" in token or b"\0" in tokens[j]:
                raise reader.fail(
                    f"vocabulary entries {j} and {i} are the same token {_quote_token(word)} "
                    "once cut at a NUL byte, as llama.cpp reads them"
                )
            raise reader.fail(f"duplicate vocabulary entry {_quote_token(word)}")
        seen[word] = i


def _quote_token(token: bytes) -> str:
    text = token.decode("utf-8", errors="replace")
    if not text.isprintable():
        text = text.encode("unicode_escape").decode("ascii")
    return f"'{_short(text, 40)}'"


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _invalid(path: Path, reason: str) -> InvalidModelFile:
    """The error, with a reason kept to one printable line whatever the file contained."""
    if not reason.isprintable():
        reason = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in reason)
    return InvalidModelFile(path, _short(reason, 300))


# --------------------------------------------------------------------------- architectures


@functools.cache
def known_architectures() -> frozenset[str]:
    """Text-model architectures the installed llama.cpp knows (cached).

    Read from the string table of the installed libllama (the ``LLM_ARCH_NAMES`` literals
    sit together between "llama" and "(unknown)") without loading it, so the list always
    matches the build; completed with, or replaced by, a built-in list.
    """
    names = set(_FALLBACK_ARCHITECTURES)
    with contextlib.suppress(OSError, ValueError, ImportError):
        names |= _architectures_from_library()
    names.discard("clip")  # an mmproj tag, not something llama_model_load accepts
    return frozenset(names)


def _architectures_from_library() -> set[str]:
    spec = importlib.util.find_spec("llama_cpp")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return set()
    found: set[str] = set()
    for folder in spec.submodule_search_locations:
        for lib_dir in (Path(folder) / "lib", Path(folder) / "bin"):  # bin: Windows wheels
            if lib_dir.is_dir():
                found |= _scan_library_folder(lib_dir)
    return found


def _scan_library_folder(lib_dir: Path) -> set[str]:
    found: set[str] = set()
    for lib in sorted(lib_dir.iterdir()):
        if "llama" in lib.name and lib.suffix in (".so", ".dylib", ".dll"):
            found |= _architecture_block(lib.read_bytes())
    return found


def _architecture_block(data: bytes) -> set[str]:
    start = data.find(b"\0llama\0llama4\0")
    if start < 0:
        return set()
    end = data.find(b"\0(unknown)\0", start)
    if end < 0 or end - start > 64 * 1024:
        return set()
    names = data[start + 1 : end].split(b"\0")
    valid = re.compile(rb"^[a-z][a-z0-9_.\-]{0,40}$")
    return {n.decode() for n in names if valid.match(n)}


# --------------------------------------------------------------------------- inspect


def inspect(path: Path | str, expect: ModelKind | None = None) -> ModelInfo:
    """Read and validate ``path``'s GGUF header; raise InvalidModelFile with the reason.

    Reads only the header and tensor table. ``expect`` (TEXT or PROJECTOR) additionally
    rejects a file of the other kind, and for TEXT a non-first part of a split model.
    """
    path = Path(path)
    fh, size = _open(path)
    with fh:
        reader = _Reader(path, fh, size)
        header = _parse_header(reader, check_vocab=True)
    _check_complete(reader, header)
    info = _describe(path, size, header)
    if expect is not None:
        _check_expected(info, expect)
    return info


def model_identity(info: ModelInfo) -> str:
    """Which model a token id sequence belongs to: this file (name, size, modification time)
    and its vocabulary. Reply ids are reused only by the model with the same identity."""
    try:
        mtime = info.path.stat().st_mtime_ns
    except OSError:
        mtime = 0
    file_part = hashlib.sha1(f"{info.path.name}|{info.file_size}|{mtime}".encode(), usedforsecurity=False)
    return f"{file_part.hexdigest()[:12]}-{(info.vocab_hash or 'novocab')[:12]}"


def inspect_model(path: Path | str) -> ModelInfo:
    """``inspect`` for a language model: a projector or split part 2..N is refused."""
    return inspect(path, expect=ModelKind.TEXT)


def inspect_projector(path: Path | str) -> ModelInfo:
    """``inspect`` for a vision projector (mmproj): a language model is refused."""
    return inspect(path, expect=ModelKind.PROJECTOR)


def _check_expected(info: ModelInfo, expect: ModelKind) -> None:
    if expect is ModelKind.TEXT and info.kind is ModelKind.PROJECTOR:
        raise _invalid(info.path, "this is a vision projector (mmproj), not a language model")
    if expect is ModelKind.PROJECTOR and info.kind is ModelKind.TEXT:
        raise _invalid(info.path, "this is a language model, not a vision projector (mmproj)")
    if expect is ModelKind.TEXT and info.split_index > 0:
        first = split_part_paths(info.path, info.split_count)
        hint = f"; open {first[0].name}" if first else "; open its first part"
        raise _invalid(
            info.path, f"this is part {info.split_index + 1} of {info.split_count} of a split model{hint}"
        )


def _open(path: Path) -> tuple[BinaryIO, int]:
    try:
        st = path.stat()
    except FileNotFoundError:
        raise _invalid(path, "file not found") from None
    except OSError as exc:
        raise _invalid(path, f"cannot read the file: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise _invalid(path, "this is a folder, not a GGUF file")
    if not stat.S_ISREG(st.st_mode):
        raise _invalid(path, "not a regular file")
    if st.st_size == 0:
        raise _invalid(path, "empty file")
    try:
        fh = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by the caller's with
    except PermissionError:
        raise _invalid(path, "cannot read the file: permission denied") from None
    except OSError as exc:
        raise _invalid(path, f"cannot read the file: {exc.strerror or exc}") from None
    return fh, st.st_size


def _check_complete(reader: _Reader, header: _Header) -> None:
    if reader.size < header.expected_size:
        present = reader.size * 100 / header.expected_size
        percent = min(99, max(0, round(present)))
        raise reader.fail(f"truncated: {percent}% present")


def _describe(path: Path, size: int, header: _Header) -> ModelInfo:
    s = header.scalars
    arch_value = s.get("general.architecture")
    split_count = _as_int(s.get("split.count")) or 1
    split_index = _as_int(s.get("split.no")) or 0
    if split_count < 1 or not 0 <= split_index < split_count:
        raise _invalid(path, f"corrupt metadata: split part {split_index} of {split_count}")
    is_projector = arch_value == "clip" or "clip.has_vision_encoder" in s or "clip.has_audio_encoder" in s
    kind = ModelKind.PROJECTOR if is_projector else ModelKind.TEXT

    if arch_value is None:
        if kind is ModelKind.TEXT and split_index == 0:
            raise _invalid(path, "corrupt metadata: general.architecture is missing")
        arch = "clip" if is_projector else ""
    elif not isinstance(arch_value, str):
        raise _invalid(path, "corrupt metadata: general.architecture is not a string")
    else:
        arch = arch_value

    if kind is ModelKind.TEXT and split_index == 0:
        _check_text_model(path, header, arch)
    projector = _projector_info(path, header) if kind is ModelKind.PROJECTOR else None

    tensors = list(header.tensors)
    split_paths: tuple[Path, ...] = ()
    total_size = size
    if split_count > 1 and split_index == 0:
        parts = _read_split_parts(path, split_count)
        split_paths = (path, *(p for p, _, _ in parts))
        for _, part_size, part_header in parts:
            tensors.extend(part_header.tensors)
            total_size += part_size
        names = [t.name for t in tensors]
        if len(set(names)) != len(names):
            raise _invalid(path, "corrupt split model: a tensor appears in two parts")

    block_prefix = "v.blk." if kind is ModelKind.PROJECTOR else "blk."
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
    matmul_weights = _matmul_weights(tensors)
    parameter_count = sum(t.n_elements for t in tensors)

    def key(suffix: str) -> Scalar | None:
        return s.get(f"{arch}.{suffix}")

    head_count, head_per_layer = _int_or_layers(header, f"{arch}.attention.head_count")
    head_kv, head_kv_per_layer = _int_or_layers(header, f"{arch}.attention.head_count_kv")
    n_ff, n_ff_per_layer = _int_or_layers(header, f"{arch}.feed_forward_length")
    if head_kv is None and head_count is not None and kind is ModelKind.TEXT:
        head_kv = head_count  # llama.cpp's default: no grouped-query attention
    n_embd = _as_int(key("embedding_length"))
    key_length = _as_int(key("attention.key_length"))
    value_length = _as_int(key("attention.value_length"))
    if n_embd and head_count:
        key_length = key_length if key_length is not None else n_embd // head_count
        value_length = value_length if value_length is not None else n_embd // head_count

    tokens = header.arrays.get(_TOKENS_KEY)
    vocab_size = tokens.count if tokens is not None else _as_int(key("vocab_size"))
    template = s.get("tokenizer.chat_template")
    size_label = s.get("general.size_label")
    if not isinstance(size_label, str) or not size_label.strip():
        size_label = _size_label(parameter_count)
    name = s.get("general.name")
    tokenizer_model = s.get("tokenizer.ggml.model")

    return ModelInfo(
        path=path,
        file_size=size,
        gguf_version=header.version,
        kind=kind,
        architecture=arch,
        name=name if isinstance(name, str) else "",
        size_label=size_label,
        parameter_count=parameter_count,
        file_type=_file_type(s.get("general.file_type"), header.types.get("general.file_type"), tensors),
        tensor_count=len(tensors),
        tensor_bytes=sum(t.n_bytes for t in tensors),
        block_tensor_bytes=tuple(block_bytes.get(i, 0) for i in range(n_blocks)),
        other_tensor_bytes=other,
        output_tensor_bytes=output,
        matmul_weights=matmul_weights,
        context_length=_as_int(key("context_length")),
        block_count=_as_int(key("block_count")),
        embedding_length=n_embd,
        feed_forward_length=n_ff,
        head_count=head_count,
        head_count_kv=head_kv,
        key_length=key_length,
        value_length=value_length,
        sliding_window=_as_int(key("attention.sliding_window")),
        vocab_size=vocab_size,
        merges_count=merges.count if (merges := header.arrays.get(_MERGES_KEY)) is not None else 0,
        vocab_hash=tokens.digest if tokens is not None else None,
        bos_token_id=_as_int(s.get("tokenizer.ggml.bos_token_id")),
        eos_token_id=_as_int(s.get("tokenizer.ggml.eos_token_id")),
        chat_template=template if isinstance(template, str) and template.strip() else None,
        split_count=split_count,
        split_index=split_index,
        projector=projector,
        metadata=MappingProxyType(
            {
                k: v
                for k, v in s.items()
                if k != "tokenizer.chat_template" and not (isinstance(v, str) and len(v) > _KEEP_STRING_CHARS)
            }
        ),
        tokenizer_model=tokenizer_model if isinstance(tokenizer_model, str) else None,
        head_count_per_layer=head_per_layer,
        head_count_kv_per_layer=head_kv_per_layer,
        feed_forward_length_per_layer=n_ff_per_layer,
        data_offset=header.data_offset,
        alignment=header.alignment,
        split_paths=split_paths,
        total_file_size=total_size,
        arrays=MappingProxyType(
            {
                k: a.values
                for k, a in header.arrays.items()
                # a small vocabulary's scores and types are not "short things" either
                if a.values is not None and not k.startswith("tokenizer.ggml.")
            }
        ),
    )


def _check_text_model(path: Path, header: _Header, arch: str) -> None:
    s = header.scalars
    if s.get("general.type") == "adapter":
        raise _invalid(path, "this is a LoRA adapter, not a model")
    if arch not in known_architectures():
        raise _invalid(path, f"unknown architecture '{_short(arch)}': this llama.cpp build cannot run it")
    for key in (*(f"{arch}.{suffix}" for suffix in _TEXT_U32_SUFFIXES), *_TEXT_U32_KEYS):
        vtype = header.types.get(key)
        if vtype is not None and vtype not in (VT.UINT32, VT.ARRAY):
            raise _invalid(path, f"corrupt metadata: {key} has type {_type_name(vtype)}, expected UINT32")
    if not header.tensors and _as_int(s.get("split.count")) in (None, 1):
        raise _invalid(path, "the file holds no weights (a vocabulary-only GGUF?)")
    # llama-vocab reads these with gguf_get_arr_str / gguf_get_arr_data, which abort on
    # a wrong item type, and then indexes scores/types by token id without a bound check.
    for key in (_TOKENS_KEY, _MERGES_KEY):
        array = header.arrays.get(key)
        if key in header.types and (array is None or array.item_type != VT.STRING):
            raise _invalid(path, f"corrupt metadata: {key} is not a list of strings")
    tokens = header.arrays.get(_TOKENS_KEY)
    n_tokens = tokens.count if tokens else 0
    for key in (_SCORES_KEY, _TOKEN_TYPE_KEY):
        if key not in header.types:
            continue
        array = header.arrays.get(key)
        if array is None or array.item_type == VT.STRING or _SCALAR_FORMATS[array.item_type].size != 4:
            raise _invalid(path, f"corrupt metadata: {key} is not a list of 4-byte numbers")
        if array.count < n_tokens:
            raise _invalid(
                path, f"corrupt metadata: {key} has {array.count:,} entries for {n_tokens:,} tokens"
            )
    reason = check_llama_limits(header, arch)
    if reason:
        raise _invalid(path, reason)


def _projector_info(path: Path, header: _Header) -> ProjectorInfo:
    s, types = header.scalars, header.types

    def fail(reason: str) -> InvalidModelFile:
        return _invalid(path, f"projector metadata {reason}")

    for key, vtype in types.items():
        if not key.startswith("clip.") or vtype == VT.ARRAY:
            continue
        expected = _clip_expected_type(key, vtype)
        if expected is not None and vtype != expected:
            raise fail(f"{key} has type {_type_name(vtype)}, expected {_type_name(expected)}")
    has_vision = bool(s.get("clip.has_vision_encoder", header.scalars.get("general.architecture") == "clip"))
    has_audio = bool(s.get("clip.has_audio_encoder", False))
    if not has_vision and not has_audio:
        raise fail("says the file has neither a vision nor an audio encoder")
    required = [*(_CLIP_REQUIRED_VISION_U32 if has_vision else ())]
    required += _CLIP_REQUIRED_AUDIO_U32 if has_audio else ()
    for key in required:
        if key not in types:
            raise fail(f"{key} is missing")
        if types[key] != VT.UINT32:
            raise fail(f"{key} has type {_type_name(types[key])}, expected UINT32")
    if has_vision:
        # clip.cpp GGML_ASSERTs these exist and then reads three floats from each.
        for key in ("clip.vision.image_mean", "clip.vision.image_std"):
            array = header.arrays.get(key)
            if array is None or array.item_type != VT.FLOAT32 or array.count < 3:
                raise fail(f"{key} must be a list of 3 FLOAT32 values")
    ftype = types.get("general.file_type")
    if ftype is not None and ftype != VT.UINT32:
        raise fail(f"general.file_type has type {_type_name(ftype)}, expected UINT32")

    modality = "vision" if has_vision else "audio"
    projector_type = s.get(f"clip.{modality}.projector_type", s.get("clip.projector_type", "mlp"))
    return ProjectorInfo(
        projector_type=str(projector_type),
        projection_dim=_as_int(s.get(f"clip.{modality}.projection_dim")) or 0,
        image_size=_as_int(s.get("clip.vision.image_size")) or 0,
        patch_size=_as_int(s.get("clip.vision.patch_size")) or 0,
        embedding_length=_as_int(s.get(f"clip.{modality}.embedding_length")) or 0,
        block_count=_as_int(s.get(f"clip.{modality}.block_count")) or 0,
        has_vision=has_vision,
        has_audio=has_audio,
    )


def _clip_expected_type(key: str, actual: int) -> int | None:
    """The only type clip.cpp accepts for ``key``, or None when any type is harmless."""
    leaf = key.rsplit(".", 1)[-1]
    if leaf.startswith(("has_", "use_")):
        return VT.BOOL
    if leaf == "projector_type":
        return VT.STRING
    if key in _CLIP_INT32_KEYS:
        return VT.INT32
    if "epsilon" in leaf:
        return VT.FLOAT32
    if actual in _INT_TYPES:
        return VT.UINT32
    if actual in _FLOAT_TYPES:
        return VT.FLOAT32
    return None


def _read_split_parts(path: Path, count: int) -> list[tuple[Path, int, _Header]]:
    names = split_part_paths(path, count)
    if not names:
        raise _invalid(
            path, f"split model in {count} parts, but the file name does not say where the others are"
        )
    parts: list[tuple[Path, int, _Header]] = []
    for index, part in enumerate(names[1:], start=1):
        label = f"part {index + 1} of {count} ({part.name})"
        try:
            fh, size = _open(part)
        except InvalidModelFile as exc:
            raise _invalid(path, f"split model {label}: {exc.reason}") from None
        with fh:
            reader = _Reader(part, fh, size)
            try:
                header = _parse_header(reader, check_vocab=False)
                _check_complete(reader, header)
            except InvalidModelFile as exc:
                raise _invalid(path, f"split model {label}: {exc.reason}") from None
        says = (_as_int(header.scalars.get("split.no")), _as_int(header.scalars.get("split.count")))
        if says != (index, count):
            raise _invalid(path, f"split model {label} belongs to another model")
        parts.append((part, size, header))
    return parts


def split_part_paths(path: Path | str, count: int | None = None) -> tuple[Path, ...]:
    """Every part of the split GGUF ``path`` names ("x-00002-of-00003.gguf"), first first.

    Empty when the name does not follow the llama.cpp split naming convention.
    """
    path = Path(path)
    m = _SPLIT_RE.match(path.name)
    if not m:
        return ()
    n = int(m["count"])
    if count is not None and count != n:
        return ()
    stem, width = m["stem"], len(m["index"])
    return tuple(path.with_name(f"{stem}-{i:0{width}d}-of-{m['count']}.gguf") for i in range(1, n + 1))


def _block_index(name: str, prefix: str) -> int | None:
    if not name.startswith(prefix):
        return None
    number, _, rest = name[len(prefix) :].partition(".")
    return int(number) if number.isdigit() and rest else None


def _as_int(value: object) -> int | None:
    # bool is an int subclass, but a boolean is never a hyper-parameter.
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _int_or_layers(header: _Header, key: str) -> tuple[int | None, tuple[int, ...]]:
    scalar = _as_int(header.scalars.get(key))
    if scalar is not None:
        return scalar, ()
    array = header.arrays.get(key)
    if array is None or array.values is None or array.item_type not in _INT_TYPES:
        return None, ()
    layers = tuple(int(v) for v in array.values)
    return (max(layers) if layers else None), layers


def _file_type(value: Scalar | None, vtype: int | None, tensors: Iterable[_Tensor]) -> str:
    ftype = _as_int(value) if vtype in _INT_TYPES else None
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
    return _ggml_type_name(max(by_type, key=lambda k: by_type[k]))


def _size_label(parameter_count: int) -> str | None:
    """ "268M"-style label, as convert_hf_to_gguf writes into general.size_label."""
    if parameter_count <= 0:
        return None
    return gguf.utility.model_weight_count_rounded_notation(parameter_count)


# Looked up by row (GET_ROWS), never multiplied: llama.cpp keeps them in the mapped file.
_LOOKUP_TENSORS = ("token_embd.", "pos_embd.", "token_types.")


def _matmul_weights(tensors: Iterable[_Tensor]) -> tuple[tuple[str, int, int], ...]:
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


def _add_weight(sums: dict[tuple[str, int], int], t: _Tensor) -> None:
    rows = t.shape[1]
    multiple = 8 if rows % 8 == 0 else 4 if rows % 4 == 0 else 1
    key = (_ggml_type_name(t.ggml_type), multiple)
    sums[key] = sums.get(key, 0) + t.n_bytes


def _ggml_type_name(ggml_type: int) -> str:
    try:
        return gguf.GGMLQuantizationType(ggml_type).name
    except ValueError:
        return f"type {ggml_type}"


__all__ = [
    "InvalidModelFile",
    "ModelInfo",
    "ModelKind",
    "ProjectorInfo",
    "inspect",
    "inspect_model",
    "inspect_projector",
    "known_architectures",
    "split_part_paths",
]


# ------------------------------------------------------------------------- token tables
# A vocabulary as stored, for comparing two models' vocabularies (a draft model's with its
# target's) without loading either.

# gguf.TokenType: UNKNOWN, CONTROL, USER_DEFINED. Their strings are what chat templates and
# stop handling match on, so two vocabularies that disagree about them differ where a turn ends.
SPECIAL_TOKEN_TYPES = frozenset({2, 3, 4})

_SPECIAL_ID_KEY = re.compile(r"^tokenizer\.ggml\.(\w+)_token_id$")
_U64 = struct.Struct("<Q")
_INT_TYPES = frozenset(
    {
        VT.UINT8,
        VT.INT8,
        VT.UINT16,
        VT.INT16,
        VT.UINT32,
        VT.INT32,
        VT.UINT64,
        VT.INT64,
    }
)


class TokenTable:
    """A GGUF's token strings as stored (length-prefixed, back to back), plus token types.

    Two files with byte-identical tables are compatible at once (one comparison); only
    when they differ are token offsets walked, and only as far as a lookup needs.
    """

    __slots__ = ("_blob", "_offsets", "count", "path", "special_ids", "token_types")

    def __init__(
        self,
        path: Path,
        count: int,
        blob: bytes,
        token_types: np.ndarray | None,
        special_ids: Mapping[str, int],
    ) -> None:
        self.path = path
        self.count = count
        self._blob = blob
        self.token_types = token_types
        self.special_ids = dict(special_ids)
        self._offsets = [0]  # _offsets[i]: where token i's length field starts

    def same_strings(self, other: TokenTable) -> bool:
        return self.count == other.count and self._blob == other._blob

    def token(self, i: int) -> bytes:
        if not 0 <= i < self.count:
            raise IndexError(f"token {i} outside a vocabulary of {self.count}")
        offsets = self._offsets
        blob = self._blob
        while len(offsets) <= i + 1:
            at = offsets[-1]
            if at + 8 > len(blob):
                raise _invalid(self.path, "corrupt vocabulary: a token runs past the token list")
            end = at + 8 + _U64.unpack_from(blob, at)[0]
            if end > len(blob):
                raise _invalid(self.path, "corrupt vocabulary: a token runs past the token list")
            offsets.append(end)
        return blob[offsets[i] + 8 : offsets[i + 1]]

    def special_tokens(self) -> frozenset[int]:
        """Ids named by ``tokenizer.ggml.*_token_id`` and ids typed unknown/control/user-defined."""
        ids = {i for i in self.special_ids.values() if 0 <= i < self.count}
        if self.token_types is not None:
            mask = np.isin(self.token_types, list(SPECIAL_TOKEN_TYPES))
            ids.update(int(i) for i in np.flatnonzero(mask) if i < self.count)
        return frozenset(ids)


def read_token_table(path: Path | str) -> TokenTable:
    """The vocabulary of a GGUF from its header only (never the tensor data).

    Reuses the catalog's bounded reader, so a damaged header ends in ``InvalidModelFile``
    rather than an unbounded allocation. ``gguf.GGUFReader`` is not used: it maps the file
    and builds an object per token, seconds for a 262k vocabulary.
    """
    path = Path(path)
    vt = VT
    fh, size = _open(path)
    with fh:
        reader = _Reader(path, fh, size)
        if size < 24:
            raise reader.fail("truncated: the file ends inside its header")
        at = reader.ensure(4, "magic")
        if reader.buf[at : at + 4] != _MAGIC:
            raise reader.fail("not a GGUF file")
        reader.skip(4)
        version = reader.u32("version")
        if version not in (2, 3):
            raise reader.fail(f"unsupported GGUF version {version}")
        reader.u64("tensor count")
        kv_count = reader.u64("key-value count")
        if kv_count * 13 > reader.remaining:
            raise reader.fail(reader.overrun(f"a count of {kv_count:,} key-value pairs", kv_count * 13))
        span: tuple[int, int, int] | None = None
        types: np.ndarray | None = None
        special: dict[str, int] = {}
        for _ in range(kv_count):
            key = reader.string("metadata key")
            vtype = reader.u32(f"type of '{key}'")
            if vtype == vt.ARRAY:
                item = reader.u32(f"item type of '{key}'")
                count = reader.u64(f"length of '{key}'")
                if item == vt.STRING:
                    if count * 8 > reader.remaining:
                        raise reader.fail(reader.overrun(f"array '{key}' of {count:,} strings", count * 8))
                    start = reader.pos
                    _scan_string_array(reader, key, count, check_duplicates=False)
                    if key == _TOKENS_KEY:
                        span = (start, reader.pos, count)
                elif item in _SCALAR_FORMATS:
                    n_bytes = count * _SCALAR_FORMATS[item].size
                    if n_bytes > reader.remaining:
                        raise reader.fail(reader.overrun(f"array '{key}' of {count:,} items", n_bytes))
                    if key == _TOKEN_TYPE_KEY and item in _INT_TYPES:
                        at = reader.ensure(n_bytes, f"items of '{key}'")
                        raw = np.frombuffer(reader.buf, dtype=_NUMPY_TYPES[item], count=count, offset=at)
                        types = raw.astype(np.int64)
                    reader.skip(n_bytes)
                else:
                    raise reader.fail(f"corrupt metadata: array '{key}' has unsupported item type {item}")
            elif vtype == vt.STRING:
                reader.raw_string(f"value of '{key}'")
            elif vtype in _SCALAR_FORMATS:
                value = reader.scalar(vtype, f"value of '{key}'")
                match = _SPECIAL_ID_KEY.match(key)
                if match and vtype in _INT_TYPES:
                    special[match.group(1)] = int(value)
            else:
                raise reader.fail(f"corrupt metadata: key '{key}' has unknown type {vtype}")
        if span is None:
            raise reader.fail("this model has no vocabulary (tokenizer.ggml.tokens)")
        start, end, count = span
        try:
            fh.seek(start)
            blob = _read_fully(fh, end - start)
        except OSError as exc:
            raise reader.fail(f"cannot read the file: {exc.strerror or exc}") from exc
        if len(blob) != end - start:
            raise reader.fail("truncated: the file got shorter while it was being read")
    return TokenTable(path, count, blob, types, special)
