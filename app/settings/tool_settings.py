"""The tools the user trusts (issue 29): "Always for this tool" in the approval bar remembers
the tool of that server (``server/tool``), so its later calls run without asking. Kept in
the settings store; the settings page's Tools tab lists them and forgets them again."""

from __future__ import annotations

from app.settings.preferences import SettingsStore

KEY = "tools_trusted"


class ToolTrust:
    def __init__(self, store: SettingsStore) -> None:
        self.store = store

    def trusted(self) -> frozenset[str]:
        value = self.store.get_setting(KEY, [])
        return (
            frozenset(item for item in value if isinstance(item, str))
            if isinstance(value, list)
            else frozenset()
        )

    def is_trusted(self, key: str) -> bool:
        return key in self.trusted()

    def trust(self, key: str) -> None:
        self.store.set_setting(KEY, sorted(self.trusted() | {key}))

    def distrust(self, key: str) -> None:
        self.store.set_setting(KEY, sorted(self.trusted() - {key}))

    def forget_server(self, server: str) -> None:
        """A removed server's tools are not trusted under a new server of the same name."""
        self.store.set_setting(KEY, sorted(key for key in self.trusted() if not key.startswith(f"{server}/")))
