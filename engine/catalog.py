"""GGUF files: read the header and tensor table, validate, describe.

Never reads tensor data: inspecting a multi-gigabyte model costs a few milliseconds.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from engine.errors import InvalidModelFile

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

    @property
    def tokens_per_image(self) -> int:
        if self.patch_size <= 0:
            return 0
        return (self.image_size // self.patch_size) ** 2


@dataclass(frozen=True)
class ModelInfo:
    """Everything Hearth needs from a GGUF header (frozen value)."""

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

    @property
    def has_chat_template(self) -> bool:
        return bool(self.chat_template)

    @property
    def is_projector(self) -> bool:
        return self.kind is ModelKind.PROJECTOR

    @property
    def display_name(self) -> str:
        return self.name or self.path.stem


def inspect(path: Path | str) -> ModelInfo:
    """Read and validate ``path``'s GGUF header; raise InvalidModelFile with the reason."""
    raise NotImplementedError


__all__ = ["InvalidModelFile", "ModelInfo", "ModelKind", "ProjectorInfo", "inspect"]
