"""What ``inspect`` reports about a GGUF file: ``ModelInfo`` (and ``ProjectorInfo`` for a
vision projector), and ``model_identity``, which names the model a token id sequence came from.

``ModelInfo.to_json`` / ``ModelInfo.from_json`` are its one JSON form (the library's cache of
inspection results keeps it); to the model's child process it travels pickled."""

from __future__ import annotations

import dataclasses
import enum
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

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
    def is_base_model(self) -> bool:
        """A text model without a chat template: trained to continue text, not to answer.

        The one test for it, so the model page and the chat warn about the same files.
        """
        return self.kind is ModelKind.TEXT and not self.has_chat_template

    @property
    def display_name(self) -> str:
        return self.name or self.path.stem

    @property
    def is_split_part(self) -> bool:
        """True for parts 2..N of a split model (not loadable on their own)."""
        return self.split_index > 0

    def to_json(self) -> dict[str, Any]:
        """Every field as JSON types: paths as strings, the kind by value, tuples as lists."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(ModelInfo):
            value = getattr(self, f.name)
            if isinstance(value, Path):
                value = str(value)
            elif isinstance(value, ModelKind):
                value = value.value
            elif isinstance(value, ProjectorInfo):
                value = dataclasses.asdict(value)
            elif isinstance(value, Mapping):
                value = {k: list(v) if isinstance(v, tuple) else v for k, v in value.items()}
            elif isinstance(value, tuple):
                value = [str(v) if isinstance(v, Path) else v for v in value]
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelInfo:
        """The value ``to_json`` wrote. A field missing from ``data`` (added since it was
        written) keeps its default; a required one missing raises TypeError."""
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(ModelInfo):
            if f.name not in data:
                continue
            value = data[f.name]
            if f.name == "path":
                value = Path(value)
            elif f.name == "kind":
                value = ModelKind(value)
            elif f.name == "projector":
                value = ProjectorInfo(**value) if value is not None else None
            elif f.name in _PATH_TUPLES:
                value = tuple(Path(v) for v in value)
            elif f.name in _MAPPINGS:
                items = {k: tuple(v) if isinstance(v, list) else v for k, v in value.items()}
                value = MappingProxyType(items)
            elif isinstance(value, list):
                value = tuple(tuple(v) if isinstance(v, list) else v for v in value)
            kwargs[f.name] = value
        return cls(**kwargs)


# The fields from_json cannot tell apart by their JSON value alone.
_PATH_TUPLES = frozenset({"split_paths"})
_MAPPINGS = frozenset({"metadata", "arrays"})


def model_identity(info: ModelInfo) -> str:
    """Which model a token id sequence belongs to: this file (name, size, modification time)
    and its vocabulary. Reply ids are reused only by the model with the same identity."""
    try:
        mtime = info.path.stat().st_mtime_ns
    except OSError:
        mtime = 0
    file_part = hashlib.sha1(f"{info.path.name}|{info.file_size}|{mtime}".encode(), usedforsecurity=False)
    return f"{file_part.hexdigest()[:12]}-{(info.vocab_hash or 'novocab')[:12]}"
