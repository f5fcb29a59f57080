"""The chat history's database: the connection, its transactions, the migrations run at open.

``Database`` is the base every part of the ``Store`` builds on (``app/store/history.py`` puts
them together): it opens the SQLite file (refusing a newer or unreadable one), sets WAL and
the sync rules, runs the migrations (after a backup), keeps the search index in step, and
gives the parts ``_transaction``. The image files beside the database are collected here too,
since only the whole database knows which ones are still referred to.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Self

from app.store.files import remove_unreferenced
from app.store.migrations import MIGRATIONS, Migration, migrate, sync_search_index
from app.store.records import DatabaseTooNew, DatabaseUnreadable


def fold(text: str | None) -> str | None:
    """Case-folded text, as SQL's ``hearth_fold`` (search compares folded text)."""
    return None if text is None else text.casefold()


def loads_object(text: str | None) -> dict[str, Any]:
    """A JSON object column: {} when empty or not an object."""
    value = json.loads(text) if text else {}
    return value if isinstance(value, dict) else {}


class Database:
    """The connection and its transactions. Not thread-safe: use it from one thread (the GUI
    thread); sqlite3's same-thread check is left on to catch mistakes."""

    BUSY_TIMEOUT_MS = 5000

    def __init__(
        self,
        path: Path | str,
        *,
        migrations: Sequence[Migration] = MIGRATIONS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.images_dir = self.path.parent / "images"
        self.backup_path: Path | None = None  # the copy taken before migrating, if any
        self._clock = clock
        self.path.parent.mkdir(parents=True, exist_ok=True)

        # Autocommit (isolation_level=None): a lone statement commits by itself (update_reply),
        # and every multi-statement write is an explicit BEGIN IMMEDIATE ... COMMIT.
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=self.BUSY_TIMEOUT_MS / 1000)
        try:
            # Read the version before changing anything (journal mode included): a newer
            # database and a non-database file must be left byte for byte as they are.
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as error:
            conn.close()
            raise DatabaseUnreadable(self.path, str(error)) from error
        if version > len(migrations):
            conn.close()
            raise DatabaseTooNew(self.path, version, len(migrations))
        self._conn = conn
        try:
            conn.execute(f"PRAGMA busy_timeout = {self.BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            # WAL + NORMAL: a commit appends to the WAL with write() and does not fsync, so a
            # killed or crashed *process* loses nothing (the OS still has the pages and writes
            # them), and the database is always consistent. A *power loss* can lose the last
            # commits since the previous fsync (still consistent: WAL frames are checksummed).
            # update_reply, the hot path, runs like that: streaming text is rewritten every
            # half second anyway. Every other write is a user action or a finished reply and
            # commits with FULL (see _transaction), whose WAL fsync also makes the earlier
            # NORMAL commits durable; about a millisecond on an SSD, a few times a minute.
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            # WAL files keep their largest size after a checkpoint; cap what stays on disk.
            conn.execute("PRAGMA journal_size_limit = 4194304")
            conn.create_function("hearth_fold", 1, fold, deterministic=True)
            self.backup_path = migrate(conn, self.path, version, migrations, self._transaction)
            self._fts = sync_search_index(conn, self._transaction)
        except BaseException:
            conn.close()
            raise

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        with suppress(sqlite3.Error):  # statistics only; closing matters more
            self._conn.execute("PRAGMA optimize")
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        return self._conn.execute("PRAGMA user_version").fetchone()[0]

    @property
    def journal_mode(self) -> str:
        return self._conn.execute("PRAGMA journal_mode").fetchone()[0]

    @property
    def search_uses_fts(self) -> bool:
        return self._fts

    @contextmanager
    def _transaction(self, durable: bool = True) -> Iterator[sqlite3.Connection]:
        # IMMEDIATE takes the write lock up front, so a busy database waits (busy_timeout)
        # at BEGIN instead of failing halfway through the transaction.
        if durable:
            self._conn.execute("PRAGMA synchronous = FULL")
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
        finally:
            if durable:
                self._conn.execute("PRAGMA synchronous = NORMAL")

    # ------------------------------------------------------------------ files beside it

    def collect_garbage(self) -> int:
        """Remove image files no message refers to (soft-deleted conversations and messages
        still count as referring: they can be undone) and temporary files left by a crash.
        Returns how many files went."""
        referenced = {row[0] for row in self._conn.execute("SELECT DISTINCT file FROM message_images")}
        return remove_unreferenced(self.images_dir, referenced)

