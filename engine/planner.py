"""Will it fit, and how to load it: LoadRequest -> LoadPlan."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from engine.catalog import ModelInfo
from engine.hardware import HardwareSnapshot


class KvCacheType(enum.Enum):
    F16 = "f16"
    Q8_0 = "q8_0"
    Q4_0 = "q4_0"


class LoadPhase(enum.Enum):
    VALIDATE = "validate"
    WEIGHTS = "weights"
    CONTEXT = "context"
    PROJECTOR = "projector"
    DRAFT = "draft"
    WARMUP = "warmup"
    READY = "ready"


class Verdict(enum.Enum):
    FITS = "fits"
    PARTIAL_OFFLOAD = "fits with partial offload"
    DOES_NOT_FIT = "does not fit"


@dataclass(frozen=True)
class LoadRequest:
    """What the user asks for. ``gpu_layers`` None means: as many as fit."""

    context_per_conversation: int = 4096
    parallel: int = 1
    gpu_layers: int | None = None
    kv_type: KvCacheType = KvCacheType.F16
    n_ubatch: int | None = None  # None: the planner chooses
    projector: ModelInfo | None = None
    draft: ModelInfo | None = None
    threads: int | None = None


@dataclass(frozen=True)
class LlamaParams:
    """Exactly the llama.cpp parameters loading will use."""

    n_gpu_layers: int
    n_ctx: int
    n_seq_max: int
    n_batch: int
    n_ubatch: int
    kv_unified: bool
    type_k: KvCacheType
    type_v: KvCacheType
    flash_attn: bool
    swa_full: bool
    n_threads: int
    n_threads_batch: int


@dataclass(frozen=True)
class DeviceMemory:
    """Predicted bytes on one device ("CPU" or a GPU name)."""

    device: str
    weights: int
    kv_cache: int
    compute: int
    output: int  # llama.cpp's logits/embeddings output buffer
    projector: int
    draft: int
    available: int  # free bytes on the device when planned

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.compute + self.output + self.projector + self.draft


@dataclass(frozen=True)
class Suggestion:
    """A concrete change that makes the plan fit; ``request`` is the one-click fix."""

    description: str
    request: LoadRequest


@dataclass(frozen=True)
class LoadPlan:
    model: ModelInfo
    request: LoadRequest
    params: LlamaParams
    memory: tuple[DeviceMemory, ...]
    verdict: Verdict
    limiting_resource: str | None  # e.g. "RAM", "VRAM on NVIDIA H200"
    deficit: int  # bytes missing on the limiting resource (0 when it fits)
    reasons: tuple[str, ...]  # one line each, for people
    suggestions: tuple[Suggestion, ...]
    phases: tuple[LoadPhase, ...]

    @property
    def total_bytes(self) -> int:
        return sum(m.total for m in self.memory)

    @property
    def fits(self) -> bool:
        return self.verdict is not Verdict.DOES_NOT_FIT


def plan_load(info: ModelInfo, hardware: HardwareSnapshot, request: LoadRequest) -> LoadPlan:
    raise NotImplementedError
