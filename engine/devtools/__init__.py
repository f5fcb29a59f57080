"""Tools for tests and benchmarks: tiny random-weight models and the engine benchmark.
"""

from engine.base.lazy import lazy_exports

_EXPORTS = {
    "PROMPT": "benchmark",
    "hearth_streams": "benchmark",
    "make_plan": "benchmark",
    "run_engine_benchmarks": "benchmark",
    "speculation_benchmark": "benchmark",
    "DEFAULT_CHAT_TEMPLATE": "tiny_models",
    "TinyProjectorSpec": "tiny_models",
    "TinyTextSpec": "tiny_models",
    "write_tiny_projector": "tiny_models",
    "write_tiny_text_model": "tiny_models",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
