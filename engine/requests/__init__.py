"""What callers hand the engine and what comes back, one noun a module: the request
(``request``), its events (``events``), its result (``completion``), the caller's handle on it
(``handle``) and what the engine is doing (``stats``).
"""

from engine.base.lazy import lazy_exports

_EXPORTS = {
    "check_tools": "request",
    "ChatRequest": "request",
    "Completed": "events",
    "Completion": "completion",
    "DEFAULT_TEXT_INTERVAL_S": "request",
    "DecodeFailed": "events",
    "EngineStats": "stats",
    "Event": "events",
    "Failed": "events",
    "Prefill": "events",
    "PromptSize": "request",
    "PromptTooLong": "request",
    "Queued": "events",
    "RequestHandle": "handle",
    "SequenceStats": "stats",
    "SlotState": "stats",
    "Started": "events",
    "StopReason": "completion",
    "TextDelta": "events",
    "Timings": "completion",
    "TokenLogprob": "completion",
    "TopLogprob": "completion",
    "Usage": "completion",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
