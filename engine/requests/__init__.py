"""What callers hand the engine (``ChatRequest``) and what comes back (events, ``Completion``).
"""

from engine.base.lazy import lazy_exports

_EXPORTS = {
    "check_tools": "request",
    "ChatRequest": "request",
    "Completed": "request",
    "Completion": "request",
    "DEFAULT_TEXT_INTERVAL_S": "request",
    "DecodeFailed": "request",
    "EngineStats": "request",
    "Event": "request",
    "Failed": "request",
    "Prefill": "request",
    "PromptSize": "request",
    "PromptTooLong": "request",
    "Queued": "request",
    "RequestHandle": "request",
    "SequenceStats": "request",
    "SlotState": "request",
    "Started": "request",
    "StopReason": "request",
    "TextDelta": "request",
    "Timings": "request",
    "TokenLogprob": "request",
    "TopLogprob": "request",
    "Usage": "request",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
