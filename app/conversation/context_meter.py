"""The context meter: how much of the loaded model's context the shown conversation plus the
draft takes, measured by the model itself (on its executor's thread) a moment after typing
pauses, shown in the composer's count and told to the window (its notice)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from app.chat import Composer
from app.conversation.history_builder import HistoryBuilder, draft_request
from app.services.model_session import ModelSession
from app.store.history import Store
from engine import EngineError, PromptSize

MEASURE_DEBOUNCE_MS = 300  # the context count follows typing this long after it pauses


class ContextMeter(QObject):
    """Measures the conversation ``shown()`` returns with the composer's draft."""

    # The context the shown conversation plus the draft takes (PromptSize), None when unknown.
    checked = Signal(object)
    _measured = Signal(int, object)  # a measurement answered, from the executor's thread

    def __init__(
        self,
        store: Store,
        session: ModelSession,
        composer: Composer,
        history: HistoryBuilder,
        shown: Callable[[], int | None],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.store = store
        self.session = session
        self.composer = composer
        self.history = history
        self._shown = shown
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(MEASURE_DEBOUNCE_MS)
        self._timer.timeout.connect(self.measure)
        self._generation = 0  # answers to older measurements are dropped
        self._size: tuple[tuple[int, str], PromptSize | None] | None = None  # (conversation, draft)
        self._measured.connect(self._on_measured)
        self._closing = False
        composer.draft_changed.connect(self._timer.start)

    def close(self) -> None:
        """The window is closing: no more measuring, and answers still coming are dropped."""
        self._closing = True
        self._timer.stop()

    def measure(self) -> None:
        """Ask the loaded model how much context the shown conversation plus the draft
        takes; the answer comes back as ``checked`` (and the composer's count)."""
        self._timer.stop()
        self._generation += 1
        model = self.session.chat_model
        conversation_id = self._shown()
        if model is None or conversation_id is None or self._closing:
            self._show(None)
            return
        conversation = self.store.get_conversation(conversation_id)
        try:
            path = self.store.messages(conversation_id)
            messages = self.history.messages(conversation, path, model.has_vision)
        except EngineError:
            self._show(None)
            return
        draft = self.composer.text().strip()  # what Send would send
        key = (conversation_id, draft)
        generation = self._generation
        future = model.measure_prompt(draft_request(messages, draft, conversation_id))
        # Answered on the executor's thread: the signal carries it to this one.
        future.add_done_callback(lambda done: self._measured.emit(generation, (key, done)))

    def measured_size(self, draft: str | None = None) -> PromptSize | None:
        """The last measurement of the shown conversation with ``draft`` (the composer's text
        when None), if it is current."""
        key = (self._shown(), self.composer.text().strip() if draft is None else draft)
        if self._size is None or self._size[0] != key:
            return None
        return self._size[1]

    def _on_measured(self, generation: int, answer: tuple[tuple[int, str], object]) -> None:
        if generation != self._generation or self._closing:
            return  # a newer draft was asked about since
        key, future = answer
        try:
            size = future.result(0)  # type: ignore[attr-defined]
        except Exception:  # a prompt that cannot be built says why when it is sent
            size = None
        self._size = (key, size)
        self._show(size)

    def _show(self, size: PromptSize | None) -> None:
        self.composer.set_context_usage(size.tokens if size else None, size.limit if size else 0)
        self.checked.emit(size)
