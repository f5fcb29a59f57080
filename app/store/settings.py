"""Settings kept in the chat history's database: any JSON-able value under a key.
"""

from __future__ import annotations

import json
from typing import Any

from app.store.database import Database


class StoredSettings(Database):
    """The ``Store``'s settings table (per-model load settings, composer preferences...)."""

    def get_setting(self, key: str, default: Any = None) -> Any:
        row = self._conn.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def set_setting(self, key: str, value: Any) -> None:
        """Any JSON-able value (per-model load settings, composer preferences...)."""
        encoded = json.dumps(value)
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO settings (key, value) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, encoded),
            )

    def delete_setting(self, key: str) -> None:
        with self._transaction() as conn:
            conn.execute("DELETE FROM settings WHERE key = ?", (key,))
