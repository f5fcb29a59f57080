"""Hearth's engine: everything about models and inference, no widgets.

The public API, for the GUI now and an HTTP API later::

    from engine import Engine, ChatRequest, ChatMessage, LoadRequest
    from engine import inspect_model, plan_load, take_snapshot

    request = LoadRequest(context_per_conversation=4096, parallel=4)
    plan = plan_load(inspect_model(path), take_snapshot(), request)
    model = Engine.load(plan).wait_ready()          # or connect to phase_* / ready / load_failed signals
    handle = model.submit(ChatRequest(messages=(ChatMessage("user", "Hello!"),)))
    handle.text_delta.connect(print)                 # Qt signals, queued into the receiver's thread
    completion = handle.wait()                       # or iterate handle.events()
    model.stats()                                    # per-sequence KV cells, prefix hits, tokens/s
    model.unload()

Names resolve lazily so ``import engine.catalog`` stays cheap (no Qt, no llama.cpp).
"""

from __future__ import annotations

import importlib
from typing import Any

# Where the face's names come from: every package's own ``__all__`` (the first package listed
# that exports a name owns it), then the root modules. Nothing here restates a package's list.
# Packages whose ``__init__`` only declares a table come first, so a name is found without
# importing Qt or llama.cpp on the way.
_PACKAGES = (
    "engine.base",
    "engine.requests",
    "engine.sampling",
    "engine.machine",
    "engine.library",
    "engine.native",
    "engine.runtime",
    "engine.speculation",
    "engine.model_process",
    "engine.devtools",
    "engine.catalog",
    "engine.planner",
    "engine.chat",
    "engine.multimodal",
    "engine.remote",
    "engine.rpc",
    "engine.hub",
    "engine.documents",
    "engine.tools",
    "engine.loaded_model",
    "engine.chat_model",
)

# Names the face gives under another name than their module's, or from a module that is not
# in a package's list (the child processes of `hearth --native-probe`, ...).
_ALIASES = {
    "run_native_probe_child": "engine.native.probe:child_main",
    "run_model_check_child": "engine.native.model_check:child_main",
    "run_rpc_probe_child": "engine.rpc.probe:child_main",
    "run_rpc_model_child": "engine.model_process.child:child_main",
    "parse_worker_address": "engine.rpc:parse_address",
    "ping_worker": "engine.rpc:ping",
    "describe_hardware": "engine.machine:describe",
    "native_load_error": "engine.native.backend:load_error",
    "llama_cpp_version": "engine.native.backend:llama_cpp_version",
    "run_worker": "engine.rpc.server:run_worker",
    "WorkerConfig": "engine.rpc.server:WorkerConfig",
}

_owners: dict[str, str] = {}


def _owner(name: str, packages: tuple[str, ...] = _PACKAGES) -> str | None:
    """``"module:attr"`` for a public name, importing packages in order until one lists it."""
    if name in _ALIASES:
        return _ALIASES[name]
    if name not in _owners:
        for package in packages:
            if name in importlib.import_module(package).__all__:
                _owners[name] = f"{package}:{name}"
                break
        else:
            return None
    return _owners[name]


def exports() -> dict[str, str]:
    """``{name: "module:attr"}`` for every public name (imports every package)."""
    names = {n for package in _PACKAGES for n in importlib.import_module(package).__all__} | set(_ALIASES)
    return {name: target for name in sorted(names) if (target := _owner(name)) is not None}


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return sorted(exports())
    if name.startswith("__") and name.endswith("__"):
        # Python's and PySide6's probes (``__wrapped__``, ``__path__``...) are never public
        # names: answering them by importing every package put numpy into the window's start-up.
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    target = _owner(name)
    if target is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def __dir__() -> list[str]:
    return sorted(exports())
