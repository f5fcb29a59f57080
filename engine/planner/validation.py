"""A ``LoadRequest`` checked against what llama.cpp accepts, then clamped and padded."""

from __future__ import annotations

from dataclasses import dataclass

from engine.base.defaults import DEFAULT_N_BATCH, DEFAULT_N_UBATCH
from engine.catalog import ModelInfo
from engine.machine.hardware import HardwareSnapshot
from engine.planner.load_plan import (
    CONTEXT_STEP,
    MAX_N_UBATCH,
    MAX_PARALLEL,
    MIN_CONTEXT,
    InvalidLoadRequest,
    LoadRequest,
    pad_context,
)
from engine.planner.memory_estimate import non_causal_image_tokens
from engine.planner.model_shape import ModelShape
from engine.planner.threads import check_threads, choose_threads
from engine.speculation.policy import MAX_DRAFT_LIMIT


@dataclass(frozen=True)
class Settings:
    """The request after validation, clamping and padding."""

    context: int  # cells per conversation, padded (with a pool: the longest conversation)
    parallel: int
    n_ubatch: int
    n_batch: int
    threads: int
    reasons: tuple[str, ...]
    pool: int | None = None  # cells the conversations share, padded; None: their own each

    @property
    def n_ctx(self) -> int:
        return self.pool if self.pool is not None else self.context * self.parallel


def validate_request(
    info: ModelInfo, shape: ModelShape, request: LoadRequest, hardware: HardwareSnapshot
) -> Settings:
    """``request`` checked (InvalidLoadRequest for what llama.cpp would reject), then the
    context clamped to the training length and padded, the batch sizes and threads chosen."""
    if request.context_per_conversation < MIN_CONTEXT:
        raise InvalidLoadRequest(
            f"Context per conversation must be at least {MIN_CONTEXT} tokens "
            f"(got {request.context_per_conversation})"
        )
    if not 1 <= request.parallel <= MAX_PARALLEL:
        raise InvalidLoadRequest(
            f"Parallel conversations must be 1 to {MAX_PARALLEL} (got {request.parallel})"
        )
    if request.kv_pool is not None and request.kv_pool < MIN_CONTEXT:
        raise InvalidLoadRequest(
            f"Memory for conversations must be at least {MIN_CONTEXT} tokens (got {request.kv_pool})"
        )
    if request.gpu_layers is not None and request.gpu_layers < 0:
        raise InvalidLoadRequest(f"GPU layers must be 0 or more (got {request.gpu_layers})")
    if request.n_ubatch is not None and not 1 <= request.n_ubatch <= MAX_N_UBATCH:
        raise InvalidLoadRequest(
            f"Micro-batch (n_ubatch) must be 1 to {MAX_N_UBATCH} (got {request.n_ubatch})"
        )
    check_threads(request)
    if not 0 <= request.max_draft <= MAX_DRAFT_LIMIT:
        raise InvalidLoadRequest(
            f"Draft length must be 0 to {MAX_DRAFT_LIMIT} tokens (got {request.max_draft})"
        )
    if request.kv_type.is_quantized:
        block = request.kv_type.block_size
        # llama_init_from_model refuses a quantized cache whose rows are not whole blocks.
        for label, n in (("key", shape.key_length), ("value", shape.value_length)):
            if n % block:
                raise InvalidLoadRequest(
                    f"A {request.kv_type.value} KV cache needs a {label} head size divisible by {block}; "
                    f"{info.display_name}'s is {n}: use f16"
                )
    if request.draft is not None and request.draft.is_projector:
        raise InvalidLoadRequest(f"{request.draft.display_name} is a projector, not a draft model")
    if request.projector is not None:
        proj = request.projector.projector
        if not request.projector.is_projector or proj is None:
            raise InvalidLoadRequest(f"{request.projector.display_name} is not a vision projector")
        if proj.projection_dim != shape.n_embd:
            # mtmd_init_from_file fails when the projector's output size differs.
            raise InvalidLoadRequest(
                f"{request.projector.display_name} outputs {proj.projection_dim}-wide embeddings; "
                f"{info.display_name} expects {shape.n_embd}"
            )

    reasons: list[str] = []
    context = request.context_per_conversation
    train = info.context_length
    if train and context > train:
        # Floor to the 256 step so padding cannot push a conversation past training length.
        context = max(MIN_CONTEXT, train // CONTEXT_STEP * CONTEXT_STEP) if train >= MIN_CONTEXT else train
        reasons.append(
            f"Context per conversation limited to {context:,} tokens: "
            f"{info.display_name} was trained on {train:,}."
        )
    padded = pad_context(context)
    if padded != context:
        reasons.append(
            f"Context per conversation rounded up to {padded:,} tokens (llama.cpp allocates in steps of 256)."
        )

    pool = pad_context(request.kv_pool) if request.kv_pool is not None else None
    if pool is not None and padded > pool:
        padded = pool
        reasons.append(
            f"Longest conversation limited to {pool:,} tokens: the memory for all conversations."
        )

    image_tokens = non_causal_image_tokens(request.projector)
    n_ubatch = request.n_ubatch or DEFAULT_N_UBATCH
    if image_tokens > n_ubatch:
        # mtmd evaluates an image's tokens in one micro-batch (non-causal attention).
        reasons.append(f"Micro-batch raised to {image_tokens} tokens so one image fits in it.")
        n_ubatch = image_tokens
    n_ctx = pool if pool is not None else padded * request.parallel
    n_batch = min(max(DEFAULT_N_BATCH, n_ubatch), n_ctx)
    n_ubatch = min(n_ubatch, n_batch)
    threads = choose_threads(request, hardware)
    if threads.reason:
        reasons.append(threads.reason)
    return Settings(padded, request.parallel, n_ubatch, n_batch, threads.threads, tuple(reasons), pool)
