"""llama.cpp itself: the build for this CPU, the checks before a file reaches it, and its handles.

Everything that touches the native library's process-wide state lives here: the backend
(``backend``), the compile (``build``, a stdlib-only script ``make`` runs before install), the
child-process probes (``probe``, ``model_check``, their ``verdict_cache``), the log router, and
the pieces a loaded model's handles are made of (``batch``, ``context_params``, ``abort``).
"""

from engine.base.lazy import lazy_exports

_EXPORTS = {
    "DecodeAbort": "abort",
    "ensure_backend": "backend",
    "release_freed_memory": "backend",
    "require_backend": "backend",
    "simd_features": "backend",
    "system_info": "backend",
    "NativeBatch": "batch",
    "Backend": "build",
    "BuildError": "build",
    "Toolchain": "build",
    "choose_backend": "build",
    "ggml_cpu_options": "build",
    "read_stamp": "build",
    "wheelhouse": "build",
    "context_params": "context_params",
    "LlamaLogRouter": "llama_log",
    "LogLevel": "llama_log",
    "LogLine": "llama_log",
    "LogSource": "llama_log",
    "ReportedMemory": "llama_log",
    "capture_llama_logs": "llama_log",
    "get_router": "llama_log",
    "most_specific_error": "llama_log",
    "parse_buffer_sizes": "llama_log",
    "ModelVerdict": "model_check",
    "check_files": "model_check",
    "check_model_file": "model_check",
    "require_loadable": "model_check",
    "verdict_key": "model_check",
    "llama_lib_dir": "lib_dir",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
