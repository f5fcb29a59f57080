"""The last load settings of each model, as JSON in the store's settings table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine import (
    DEFAULT_CONTEXT_PER_CONVERSATION,
    DEFAULT_MAX_DRAFT,
    MAX_THREADS,
    KvCacheType,
    LoadRequest,
    ModelInfo,
    SpeculationConfig,
    SpeculationMode,
    best_draft,
)

# For a model whose header does not say its training context.
MAX_CONTEXT = 262144


def first_request(
    info: ModelInfo,
    projectors: tuple[ModelInfo, ...],
    default_gpu_layers: int | None,
    offload: bool,
    drafts: tuple[ModelInfo, ...] = (),
) -> LoadRequest:
    """What a model never loaded before starts with, wherever it is loaded from (the load
    panel, the chat's picker, Discover's Load): the library's best projector, if any,
    Settings' default GPU layers where layers can go to a GPU, and the draft model the
    library pairs with it (``best_draft`` of ``drafts``; at warm-up it is let go where it
    cannot pay)."""
    return LoadRequest(
        context_per_conversation=min(DEFAULT_CONTEXT_PER_CONVERSATION, info.context_length or MAX_CONTEXT),
        gpu_layers=default_gpu_layers if offload else None,
        projector=projectors[0] if projectors else None,
        draft=best_draft(info, drafts),
    )


def request_speculation(request: LoadRequest) -> SpeculationConfig | None:
    """The speculation a request's draft model means (None without one)."""
    if request.draft is None:
        return None
    return SpeculationConfig(SpeculationMode.DRAFT_MODEL, draft_path=request.draft.path)


def settings_key(model_path: Path) -> str:
    return f"load:{model_path}"


def request_to_dict(request: LoadRequest, speculation: SpeculationConfig | None) -> dict[str, Any]:
    if speculation is None or speculation.mode is SpeculationMode.OFF:
        spec = "off"
    elif speculation.mode is SpeculationMode.PROMPT_LOOKUP:
        spec = "lookup"
    else:
        spec = f"draft:{speculation.draft_path}"
    return {
        "context_per_conversation": request.context_per_conversation,
        "parallel": request.parallel,
        "kv_pool": request.kv_pool,
        "gpu_layers": request.gpu_layers,
        "kv_type": request.kv_type.value,
        "projector": str(request.projector.path) if request.projector else None,
        "speculation": spec,
        # The model's own threads only: None follows the default (Settings, else the planner).
        "threads": request.threads,
    }


def request_from_dict(data: dict[str, Any], find: Callable[[Path], ModelInfo | None]) -> LoadRequest | None:
    """Tolerant: a setting that no longer makes sense (a projector gone) is dropped."""
    try:
        projector = find(Path(data["projector"])) if data.get("projector") else None
        spec = str(data.get("speculation", "off"))
        draft = find(Path(spec.removeprefix("draft:"))) if spec.startswith("draft:") else None
        return LoadRequest(
            context_per_conversation=int(data["context_per_conversation"]),
            parallel=int(data["parallel"]),
            gpu_layers=None if data.get("gpu_layers") is None else int(data["gpu_layers"]),
            kv_type=KvCacheType(data.get("kv_type", "f16")),
            projector=projector,
            draft=draft,
            max_draft=DEFAULT_MAX_DRAFT if spec == "lookup" else 0,
            threads=_threads(data.get("threads")),
            kv_pool=None if data.get("kv_pool") is None else int(data["kv_pool"]),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _threads(value: Any) -> int | None:
    """Settings saved before threads were (no key), or out of range: the default's."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 1 <= value <= MAX_THREADS else None
