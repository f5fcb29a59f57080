"""Hearth's engine: everything about models and inference, no widgets.

The public API, for the GUI now and an HTTP API later::

    from engine import Engine, ChatRequest, ChatMessage, LoadRequest
    from engine import inspect_model, plan_load, take_snapshot

    request = LoadRequest(context_per_conversation=4096, parallel=4)
    plan = plan_load(inspect_model(path), take_snapshot(), request)
    model = Engine.load(plan).wait_ready()          # or connect to phase_* / ready / load_failed signals
    handle = model.submit(ChatRequest(messages=(ChatMessage("user", "Hello!"),)))
    handle.delta.connect(print)                      # Qt signals, queued into the receiver's thread
    completion = handle.wait()                       # or iterate handle.events()
    model.stats()                                    # per-sequence KV cells, prefix hits, tokens/s
    model.unload()

Names resolve lazily so ``import engine.catalog`` stays cheap (no Qt, no llama.cpp).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Engine": "engine.loaded_model",
    "LoadedModel": "engine.loaded_model",
    "ChatRequest": "engine.requests",
    "SamplingParams": "engine.requests",
    "GREEDY": "engine.requests",
    "Completion": "engine.requests",
    "StopReason": "engine.requests",
    "RequestHandle": "engine.requests",
    "EngineStats": "engine.requests",
    "ChatMessage": "engine.chat",
    "Role": "engine.chat",
    "ModelInfo": "engine.catalog",
    "inspect": "engine.catalog",
    "inspect_model": "engine.catalog",
    "inspect_projector": "engine.catalog",
    "Library": "engine.library",
    "HardwareSnapshot": "engine.hardware",
    "Telemetry": "engine.hardware",
    "take_snapshot": "engine.hardware",
    "LoadRequest": "engine.planner",
    "LoadPlan": "engine.planner",
    "LoadPhase": "engine.planner",
    "KvCacheType": "engine.planner",
    "plan_load": "engine.planner",
    "EngineError": "engine.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
