"""What every engine package shares: typed errors, defaults (one source each), units and JSON.
"""

from engine.base.lazy import lazy_exports

_EXPORTS = {
    "to_jsonable": "jsonable",
    "lazy_exports": "lazy",
    "DEFAULT_API_HOST": "defaults",
    "DEFAULT_API_PORT": "defaults",
    "DEFAULT_CONTEXT_PER_CONVERSATION": "defaults",
    "DEFAULT_KV_CACHE_TYPE": "defaults",
    "DEFAULT_N_UBATCH": "defaults",
    "DEFAULT_WORKER_PORT": "defaults",
    "DEFAULT_MAX_DRAFT": "defaults",
    "DEFAULT_MAX_TOKENS": "defaults",
    "DEFAULT_N_BATCH": "defaults",
    "DEFAULT_QUEUE_CAPACITY": "defaults",
    "Cancelled": "errors",
    "ChecksumMismatch": "errors",
    "DoesNotFit": "errors",
    "EngineError": "errors",
    "HubAccessDenied": "errors",
    "HubError": "errors",
    "HubNotFound": "errors",
    "HubProtocolError": "errors",
    "HubRateLimited": "errors",
    "HubUnreachable": "errors",
    "ImageRejected": "errors",
    "InvalidChatRequest": "errors",
    "InvalidModelFile": "errors",
    "LoadFailed": "errors",
    "ModelProcessEnded": "errors",
    "NativeBuildUnsafe": "errors",
    "NoGgufFiles": "errors",
    "NotEnoughSpace": "errors",
    "Overloaded": "errors",
    "ReplyInterrupted": "errors",
    "UnsafeFileName": "errors",
    "WorkerUnavailable": "errors",
    "format_bytes": "units",
    "format_count": "units",
    "plural": "units",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
