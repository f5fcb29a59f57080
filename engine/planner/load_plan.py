"""What is asked and what is planned: ``LoadRequest``, ``LlamaParams``, ``LoadPlan`` and the
values they hold (KV cache types, load phases, verdicts, memory per device), with the
context rules every module shares (``pad_context``, ``cells_per_sequence``, ``output_rows``)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from engine.base.defaults import (
    DEFAULT_CONTEXT_PER_CONVERSATION,
    DEFAULT_KV_CACHE_TYPE,
    DEFAULT_MAX_DRAFT,
)
from engine.base.errors import EngineError
from engine.base.units import format_bytes
from engine.catalog import ModelInfo

MIB = 1024 * 1024
GIB = 1024 * MIB

# llama.cpp rounds n_ctx, and with kv_unified=False also n_ctx / n_seq_max, up to this.
CONTEXT_STEP = 256
MIN_CONTEXT = 256
MAX_PARALLEL = 256  # llama_max_parallel_sequences()
MAX_N_UBATCH = 8192
# Threads a request may ask for (llama.cpp's GGML_MAX_N_THREADS is 512).
MAX_THREADS = 256

# llama.cpp's LLAMA_FLASH_ATTN_TYPE_*
FLASH_ATTN_AUTO = -1
FLASH_ATTN_ENABLED = 1


class KvCacheType(enum.Enum):
    F16 = "f16"
    Q8_0 = "q8_0"
    Q4_0 = "q4_0"

    @property
    def ggml_type(self) -> int:
        """The ggml_type value llama.cpp's ``type_k`` / ``type_v`` take."""
        return _GGML_TYPE[self]

    @property
    def block_size(self) -> int:
        return _KV_BLOCK[self][1]

    @property
    def is_quantized(self) -> bool:
        return self is not KvCacheType.F16

    def row_bytes(self, n: int) -> int:
        """Bytes of one cache row of ``n`` elements (ggml_row_size)."""
        block_bytes, block = _KV_BLOCK[self]
        return n * block_bytes // block


_GGML_TYPE = {KvCacheType.F16: 1, KvCacheType.Q4_0: 2, KvCacheType.Q8_0: 8}
# (bytes per block, elements per block): q8_0 is 32 int8 + an f16 scale, q4_0 32 nibbles + f16.
_KV_BLOCK = {KvCacheType.F16: (2, 1), KvCacheType.Q8_0: (34, 32), KvCacheType.Q4_0: (18, 32)}
_DEFAULT_KV_TYPE = KvCacheType(DEFAULT_KV_CACHE_TYPE)


class LoadPhase(enum.Enum):
    VALIDATE = "validate"
    WORKERS = "workers"  # connect to each RPC worker (its tensors are sent during WEIGHTS)
    WEIGHTS = "weights"
    CONTEXT = "context"
    PROJECTOR = "projector"
    DRAFT = "draft"
    WARMUP = "warmup"
    READY = "ready"


class Verdict(enum.Enum):
    FITS = "fits"
    PARTIAL_OFFLOAD = "fits with partial offload"
    # Fits, but within TIGHT_MARGIN of the free RAM. The value is what machine-readable
    # output says; people read ``LoadPlan.headline``, which says "may swap" only where
    # the machine has swap, and otherwise how little it leaves free.
    TIGHT = "tight: may swap"
    DOES_NOT_FIT = "does not fit"


# A plan this close to a device's free memory (after the reserve) may still swap or be
# squeezed by whatever else the machine starts: say so, and offer headroom.
TIGHT_MARGIN = 0.10


class InvalidLoadRequest(EngineError, ValueError):
    """A request llama.cpp would reject (or abort on); ``message`` says which setting and why."""


@dataclass(frozen=True)
class LoadRequest:
    """What the user asks for. ``gpu_layers`` None means: as many as fit."""

    context_per_conversation: int = DEFAULT_CONTEXT_PER_CONVERSATION
    parallel: int = 1
    gpu_layers: int | None = None
    kv_type: KvCacheType = _DEFAULT_KV_TYPE
    n_ubatch: int | None = None  # None: the planner chooses
    projector: ModelInfo | None = None
    draft: ModelInfo | None = None
    # CPU threads: the model's own setting (None: it has none), else ``default_threads``
    # (the user's default for every model), else the planner chooses from the cores that
    # other programs leave free.
    threads: int | None = None
    default_threads: int | None = None
    # Draft tokens each sequence may verify per tick (speculation); 0: none. With a draft
    # model and 0 here, the default draft length is reserved.
    max_draft: int = 0
    # Share of the offloaded layers per offload device (RPC workers' devices first, then
    # the GPUs: llama.cpp's order); None: in proportion to their free memory.
    tensor_split: tuple[float, ...] | None = None
    # "Memory for conversations": one KV pool of this many cells that the ``parallel``
    # conversations share (llama.cpp's kv_unified), each up to ``context_per_conversation``
    # (then "longest conversation"). None: each conversation has its own context.
    kv_pool: int | None = None

    @property
    def draft_rows(self) -> int:
        if self.max_draft:
            return self.max_draft
        return DEFAULT_MAX_DRAFT if self.draft is not None else 0


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
    flash_attn: bool  # True: enabled (required by a quantized V cache); False: auto
    swa_full: bool
    n_threads: int
    n_threads_batch: int
    projector_use_gpu: bool = False  # mtmd_context_params.use_gpu
    draft_n_gpu_layers: int = 0
    # Logit rows llama.cpp reserves (0: n_batch). A batch with more aborts the process:
    # the batch planner keeps under it.
    n_outputs_max: int = 0
    n_outputs_max_per_seq: int = 0
    # With RPC workers: the offload devices, in order (``RemoteDevice.key`` for a worker's,
    # ``"gpu:N"`` for a local GPU), and each one's share of the offloaded layers — passed
    # to llama.cpp as ``devices`` / ``tensor_split`` so it places layers as planned. ()
    # leaves llama.cpp's own choice (every local GPU, split by free memory).
    devices: tuple[str, ...] = ()
    tensor_split: tuple[float, ...] = ()
    # With a shared pool (kv_unified): the longest a conversation may grow (0: the pool).
    longest_conversation: int = 0

    @property
    def shared_pool(self) -> bool:
        return self.kv_unified and self.n_seq_max > 1

    @property
    def outputs_max(self) -> int:
        """The logit rows one batch may ask for, as llama.cpp will enforce it."""
        return min(self.n_outputs_max, self.n_batch) if self.n_outputs_max else self.n_batch

    @property
    def flash_attn_type(self) -> int:
        """llama_context_params.flash_attn_type: ENABLED (1) or AUTO (-1).

        Auto lets llama.cpp probe each device; it turns flash attention on wherever the
        backend supports it (always on the CPU), which the compute estimate assumes.
        """
        return FLASH_ATTN_ENABLED if self.flash_attn else FLASH_ATTN_AUTO

    @property
    def n_ctx_seq(self) -> int:
        """KV cells one conversation may fill: its own context, or in a shared pool the
        longest-conversation limit."""
        cells = cells_per_sequence(self.n_ctx, self.n_seq_max, self.kv_unified)
        limited = self.kv_unified and self.longest_conversation
        return min(cells, self.longest_conversation) if limited else cells


def output_rows(n_seq: int, max_draft: int, n_batch: int) -> tuple[int, int]:
    """(n_outputs_max, n_outputs_max_per_seq): a row per sequence plus its draft rows,
    within the batch (llama-server's common_speculative_get_output_limits)."""
    per_seq = min(n_batch, 1 + max(0, max_draft))
    return min(n_batch, max(1, n_seq) * per_seq), per_seq


def cells_per_sequence(n_ctx: int, n_seq: int, kv_unified: bool) -> int:
    """KV cells one conversation may fill: all of them in a unified cache, else its share.
    The one rule for it: the plan, the executor and the draft model all ask here."""
    return n_ctx if kv_unified else n_ctx // max(1, n_seq)


def pad_context(n: int) -> int:
    """Round up to llama.cpp's 256-cell step."""
    return -(-n // CONTEXT_STEP) * CONTEXT_STEP


# What a device's total adds up: the byte counts ``DeviceMemory`` reports and the planner's
# per-device tally (``placement.Tally``) accumulates.
MEMORY_PARTS = ("weights", "repack", "runtime", "kv_cache", "compute", "output", "projector", "draft")


def memory_total(parts: object) -> int:
    """The sum of ``parts``' MEMORY_PARTS attributes."""
    return sum(getattr(parts, name) for name in MEMORY_PARTS)


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
    reserve: int = 0  # of ``available``, kept free for the OS, the app or the GPU driver
    repack: int = 0  # CPU_REPACK: weights copied into this CPU's SIMD layout
    runtime: int = 0  # outside llama.cpp's named buffers: vocabulary tables, working set

    @property
    def total(self) -> int:
        return memory_total(self)

    @property
    def usable(self) -> int:
        return max(0, self.available - self.reserve)

    @property
    def deficit(self) -> int:
        return max(0, self.total - self.usable)


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
    # Split across RPC workers: the machines holding part of the model (this one counts),
    # and the bytes one decoded token sends over the network at this split (0: none).
    machines: int = 1
    network_bytes_per_token: int = 0
    may_swap: bool = False  # the machine has swap space (HardwareSnapshot.swap_total)

    @property
    def ram_left(self) -> int:
        """RAM still free once loaded, of what was free when planned."""
        ram = self.memory[0]
        return max(0, ram.available - ram.total)

    @property
    def total_bytes(self) -> int:
        return sum(m.total for m in self.memory)

    @property
    def fits(self) -> bool:
        return self.verdict is not Verdict.DOES_NOT_FIT

    @property
    def context_per_conversation(self) -> int:
        """Tokens each conversation can hold (after clamping and padding)."""
        return self.params.n_ctx_seq

    @property
    def workers(self) -> tuple[str, ...]:
        """Endpoints of the RPC workers this plan places layers on, in device order."""
        out: list[str] = []
        for key in self.params.devices:
            if key.startswith("rpc:"):
                endpoint = key[4:].rpartition("#")[0]
                if endpoint not in out:
                    out.append(endpoint)
        return tuple(out)

    @property
    def headline(self) -> str:
        """The verdict in words: "fits", or "fits across 3 machines" for a split model; a
        tight plan "tight: may swap" where the machine has swap, else "fits, leaves only
        1.2 GiB free"."""
        verdict = self.verdict.value
        if self.verdict is Verdict.TIGHT and not self.may_swap:
            verdict = f"fits, leaves only {format_bytes(self.ram_left)} free"
        if self.machines > 1 and self.fits:
            return f"{verdict} across {self.machines} machines"
        return verdict
