"""Hearth's chat history, the ``Store``: conversations, messages, images and settings in SQLite.

Plain Python and ``sqlite3``, no Qt: the GUI thread calls it directly (every write is one
short transaction) and tests and crash helpers use it without a QApplication.

Layout beside the database file (``AppPaths.database_file``)::

    hearth.sqlite3            the database, WAL mode (plus -wal / -shm while open)
    hearth.sqlite3.v1.bak     a copy taken before migrating a version-1 database
    images/ab/abcdef....png   each image once, named by the sha256 of its bytes

What the app does with it::

    store = Store(paths.database_file)       # migrates (after a backup) or refuses a newer DB
    store.mark_interrupted_replies()         # at startup: replies cut off by a crash
    store.collect_garbage()                  # image files nothing refers to any more
    reply = store.begin_reply(conversation.id, ReplyModel(name, path, quantization), sampling)
    store.update_reply(reply.id, text)       # while streaming, at most every 0.5 s: one UPDATE
    store.finish_reply(reply.id, completion.text, MessageState.COMPLETE,
                       completion.stop_reason, ReplyStats.from_completion(completion).to_dict(),
                       completion.reply_tokens, tokens_model=completion.model_identity,
                       thinking=Thinking(thought, tokens, seconds))  # a reasoning model's, apart
    again = store.regenerate_reply(reply.id, ...)   # a second version; the first is kept
    store.select_version(reply.id)           # show the first again: store.versions(reply.id)
    store.edit_and_branch(question.id, text) # the question edited: the old branch is kept
    store.delete_message(question.id)        # hidden (the turn) until restore_message
    store.messages(conversation.id)          # the path shown, what the model is sent

Messages form a tree (``parent_id``): a message's versions are its siblings, one of them
selected (``active``), and a conversation is the path through the selected versions.

The ``Store`` is put together from one part per concern, each in its own module:
``database.py`` (the connection, transactions, migrations run at open, image garbage),
``conversations.py``, ``messages.py`` (the message tree, versions, soft delete of messages),
``replies.py`` (a reply's lifecycle), ``documents.py`` (a conversation's collections, a
reply's sources), ``search.py`` and ``settings.py``. The schema and its
migrations are in ``migrations.py``, the files beside the database in ``files.py``, the row
types and errors in ``records.py``; this module re-exports their public names.

The store expects one Hearth process per data directory: a second one starting up would
mark the first one's streaming replies as interrupted.
"""

from __future__ import annotations

from app.store.documents import ConversationDocuments
from app.store.migrations import MIGRATIONS, SCHEMA_VERSION, Migration, fts_available
from app.store.records import (
    Conversation,
    DatabaseTooNew,
    DatabaseUnreadable,
    Grounding,
    ImageInput,
    ImageRef,
    Message,
    MessageSource,
    MessageState,
    MigrationFailed,
    NotFound,
    ReplyModel,
    StoreError,
    Thinking,
    Versions,
)
from app.store.replies import Replies
from app.store.search import ConversationSearch
from app.store.settings import StoredSettings

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Conversation",
    "DatabaseTooNew",
    "DatabaseUnreadable",
    "Grounding",
    "ImageInput",
    "ImageRef",
    "Message",
    "MessageSource",
    "MessageState",
    "Migration",
    "MigrationFailed",
    "NotFound",
    "ReplyModel",
    "Store",
    "StoreError",
    "Thinking",
    "Versions",
    "fts_available",
]


class Store(ConversationSearch, Replies, ConversationDocuments, StoredSettings):
    """The chat history: one object over one database file. Each base adds one concern's
    methods; they all share ``Database``'s connection, so a method of one part may call
    another's. Not thread-safe: use it from one thread (the GUI thread)."""
