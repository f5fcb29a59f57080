"""One conversation at a time in the window: the controller between the store, the model and the
chat widgets, the reply being generated, the context fix and which model answers.
"""

from engine import lazy_exports

_EXPORTS = {
    "context_fix": "context_fix",
    "ChatController": "controller",
    "NO_MODEL": "controller",
    "ModelChooser": "model_chooser",
    "ReplyInFlight": "reply_in_flight",
    "ReplyStage": "reply_in_flight",
    "why_waiting": "reply_in_flight",
    "ReplySplit": "thinking",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
