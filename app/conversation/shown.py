"""What the chat controller's parts (the reply runner, the waits for a model) need of the
controller around them: which conversation is shown, and bringing the view and the list in
line after a change. ``ChatController`` is the one that satisfies it."""

from __future__ import annotations

from typing import Protocol

from app.store.history import Message


class ShownConversation(Protocol):
    current_id: int | None

    def show_path(self, conversation_id: int, path: list[Message] | None = None) -> None: ...
    def select(self, conversation_id: int) -> None: ...
    def refresh_list(self) -> None: ...
    def measure_draft(self) -> None: ...
