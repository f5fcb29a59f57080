"""Hearth's chat history in SQLite: conversations, the message tree, replies, images and settings.
"""

from engine import lazy_exports

_EXPORTS = {
    "Store": "history",
    "MIGRATIONS": "migrations",
    "SCHEMA_VERSION": "migrations",
    "Conversation": "records",
    "DatabaseTooNew": "records",
    "DatabaseUnreadable": "records",
    "ImageRef": "records",
    "Message": "records",
    "MessageState": "records",
    "MigrationFailed": "records",
    "NotFound": "records",
    "ReplyModel": "records",
    "Thinking": "records",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
