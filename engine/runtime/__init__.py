"""Serving one loaded model: the executor thread, its commands, the loader and the requests it runs.

Only code in this package calls llama.cpp for a loaded model, and only on the executor thread.
"""

from engine.base.lazy import lazy_exports

_EXPORTS = {
    "NativeModel": "native_model",
    "Cancel": "commands",
    "Inbox": "commands",
    "Unload": "commands",
    "Executor": "executor",
    "ExecutorLike": "surface",
    "ExecutorState": "surface",
    "LoadOrder": "surface",
    "resolve_speculation": "surface",
    "PromptBuilder": "prompt_builder",
    "ActiveSlot": "serving_stats",
    "BatchRecord": "serving_stats",
    "RATE_WINDOW": "serving_stats",
    "ServingCounters": "serving_stats",
    "PoolOutgrown": "shared_cells",
    "SharedCells": "shared_cells",
    "GrammarStuck": "token_sampler",
    "SamplerHost": "token_sampler",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
