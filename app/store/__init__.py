"""Hearth's chat history in SQLite: conversations, the message tree, replies, images and settings.

``Store`` (``history``) is the one object callers use; it is made of one part per concern:
``database`` (connection, transactions, migrations run), ``conversations``, ``messages`` (the
tree), ``replies`` (a reply's lifecycle), ``search`` and ``settings``.
"""

from engine import lazy_exports

_EXPORTS = {
    "Store": "history",
    "MIGRATIONS": "migrations",
    "SCHEMA_VERSION": "migrations",
    "Conversation": "records",
    "DatabaseTooNew": "records",
    "DatabaseUnreadable": "records",
    "Grounding": "records",
    "ImageRef": "records",
    "Message": "records",
    "MessageSource": "records",
    "MessageState": "records",
    "MigrationFailed": "records",
    "NotFound": "records",
    "ReplyModel": "records",
    "StoreError": "records",
    "Thinking": "records",
    "Versions": "records",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
