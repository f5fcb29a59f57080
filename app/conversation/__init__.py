"""One conversation at a time in the window: the controller between the store, the model and the
chat widgets, and its parts (the replies being generated, the context meter, the request built
from the message tree, editing and deleting messages, waiting for a model, what is refused),
the context fix and which model answers.
"""

from engine import lazy_exports

_EXPORTS = {
    "AfterLoad": "after_load",
    "LoadWaits": "after_load",
    "context_fix": "context_fix",
    "ContextMeter": "context_meter",
    "ChatController": "controller",
    "HistoryBuilder": "history_builder",
    "ImageCache": "image_cache",
    "MessageActions": "message_actions",
    "NO_MODEL": "refusals",
    "too_long_message": "refusals",
    "ModelChooser": "model_chooser",
    "ReplyInFlight": "reply_in_flight",
    "ReplyStage": "reply_in_flight",
    "why_waiting": "reply_in_flight",
    "ReplyRunner": "reply_runner",
    "ShownConversation": "shown",
    "ReplySplit": "thinking",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
