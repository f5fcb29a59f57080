"""Conversations waiting for a model: a message sent (or a Continue or Regenerate asked for)
while the model it needs loads is kept here with what to do once the model is ready, and the
conversation list says so meanwhile. When the load fails, each waiting message goes back to
the composer with the reason."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from app.chat import Attachment, Composer, ConversationList
from app.conversation.refusals import WRITTEN_AFTER_LOAD
from app.conversation.shown import ShownConversation
from app.services.model_session import ModelSession
from app.state.session import SessionState
from app.store.history import Store
from engine import EngineError


@dataclass(frozen=True)
class AfterLoad:
    """What a conversation does once the model it waits for is ready: send the message it
    stored (given back to the composer if the load fails), or continue a reply."""

    run: Callable[[], None]
    message_id: int | None = None
    text: str = ""
    attachments: tuple[Attachment, ...] = ()
    stage: str = "waiting for the model…"  # what the conversation list says meanwhile


class LoadWaits:
    """At most one ``AfterLoad`` per conversation, by conversation id. ``load_for``: start
    loading the model a conversation needs and say its name (None: there is none to load);
    ``say``: a line for the status bar."""

    def __init__(
        self,
        store: Store,
        session: ModelSession,
        composer: Composer,
        conversations: ConversationList,
        shown: ShownConversation,
        load_for: Callable[[int | None], str | None],
        say: Callable[[str], None],
    ) -> None:
        self.store = store
        self.session = session
        self.composer = composer
        self.conversations = conversations
        self.shown = shown
        self._load_for = load_for
        self._say = say
        self._waiting: dict[int, AfterLoad] = {}

    def __contains__(self, conversation_id: object) -> bool:
        return conversation_id in self._waiting

    def items(self) -> Iterator[tuple[int, AfterLoad]]:
        return iter(list(self._waiting.items()))

    def loading_for(self, conversation_id: int | None) -> str | None:
        """The name of the model being loaded, starting a load (the conversation's own
        model, else the last one) when none is; None when there is nothing to load."""
        plan = self.session.plan
        if self.session.state is SessionState.LOADING and plan is not None:
            return plan.model.display_name
        return self._load_for(conversation_id)

    def wait(self, conversation_id: int, after: AfterLoad) -> None:
        self._waiting[conversation_id] = after
        self.conversations.set_busy(conversation_id, True, after.stage)

    def write_after_load(self, conversation_id: int, write: Callable[[], None]) -> bool:
        """Continue or Regenerate with no model ready: load the one the conversation needs
        and ``write`` when it is ready; False when there is none to load."""
        name = self.loading_for(conversation_id)
        if name is None:
            return False
        if self.session.chat_model is not None:
            write()
            return True
        self.wait(conversation_id, AfterLoad(write, stage=f"waiting for {name}…"))
        self._say(WRITTEN_AFTER_LOAD.format(name=name))
        return True

    def run(self) -> None:
        """The model is ready: each conversation does what it waited to do."""
        for _conversation_id, after in self._drain():
            after.run()

    def give_back(self, error: EngineError) -> None:
        """The model a message waited for did not load: the message goes back to the
        composer (its conversation shown), with the reason."""
        for conversation_id, after in self._drain():
            if after.message_id is None:
                continue
            self.store.delete_message(after.message_id)
            self.shown.show_path(conversation_id)
            if conversation_id == self.shown.current_id:
                self.composer.set_text(after.text)
                if after.attachments:
                    self.composer.attach_images([(a.name, a.data) for a in after.attachments])
                self.composer.show_image_error(error.message)

    def _drain(self) -> Iterator[tuple[int, AfterLoad]]:
        """Every wait, taken, each conversation's list row no longer busy just before it is
        handed over."""
        waiting, self._waiting = self._waiting, {}
        for conversation_id, after in waiting.items():
            self.conversations.set_busy(conversation_id, False)
            yield conversation_id, after
