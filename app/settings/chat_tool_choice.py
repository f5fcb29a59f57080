"""Which conversations offer the model their tools (issue 29): all of them unless the user
turned tools off in one (the chat header's Tools menu). Adding a server was the choice to
have tools; each call still waits for the user's allow."""

from __future__ import annotations

from app.settings.preferences import SettingsStore

KEY = "chat_tools_off"  # the ids of the conversations with tools turned off


class ChatToolChoice:
    def __init__(self, store: SettingsStore) -> None:
        self.store = store

    def _off(self) -> set[int]:
        value = self.store.get_setting(KEY, [])
        return {i for i in value if isinstance(i, int)} if isinstance(value, list) else set()

    def is_on(self, conversation_id: int) -> bool:
        return conversation_id not in self._off()

    def set_on(self, conversation_id: int, on: bool) -> None:
        off = self._off()
        off.discard(conversation_id) if on else off.add(conversation_id)
        self.store.set_setting(KEY, sorted(off))
