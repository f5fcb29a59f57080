"""The chat's notice: the one line above the composer for what the user must know before
sending, most pressing first (the conversation no longer fits the loaded context, images this
model cannot see, a base model that will ramble, a conversation written by another model),
with its one-click fix (reload with the context it needs, load the model it was written with).
"""

from __future__ import annotations

from collections.abc import Callable

from app.conversation.context_fix import context_fix
from app.conversation.controller import ChatController
from app.conversation.model_chooser import ModelChooser
from app.services.model_session import ModelSession
from app.store.history import ReplyModel
from app.window.chats_page import ChatsPage
from app.wording.presenters import BASE_MODEL_BADGE
from engine import HardwareSnapshot, LoadPlan, PromptSize, SpeculationConfig


class ChatNotices:
    """Decides the Chats page's notice from the session, the chat's context measure and
    the conversation's writer. ``hardware``: the machine a context fix is planned for;
    ``load``: the window's load; ``say``: a line for the status bar."""

    def __init__(
        self,
        session: ModelSession,
        chat: ChatController,
        chooser: ModelChooser,
        page: ChatsPage,
        hardware: Callable[[], HardwareSnapshot],
        load: Callable[[LoadPlan, SpeculationConfig | None], None],
        say: Callable[[str], None],
    ) -> None:
        self.session = session
        self.chat = chat
        self.chooser = chooser
        self.page = page
        self._hardware = hardware
        self._load = load
        self._say = say
        self._context_size: PromptSize | None = None
        self._images_left_out = False
        self._fix: LoadPlan | None = None
        self._writer: ReplyModel | None = None
        chat.context_checked.connect(self._on_context_checked)
        chat.images_left_out.connect(self._on_images_left_out)
        page.notice.action_clicked.connect(self.apply_fix)

    def _on_context_checked(self, size: PromptSize | None) -> None:
        self._context_size = size
        self.update()

    def _on_images_left_out(self, left_out: bool) -> None:
        self._images_left_out = left_out
        self.update()

    def update(self) -> None:
        """What the user must know before sending, most pressing first: the conversation no
        longer fits the loaded context (with the reload that makes it fit), images this
        model cannot see, a base model that will ramble."""
        model = self.session.ready_model
        self._fix = None
        self._writer = None
        if model is None:
            self._notice_for_writer()
            return
        info = model.plan.model
        size = self._context_size
        if size is not None and not size.fits:
            text, fix = context_fix(model.plan, size, self._hardware())
            self._fix = fix
            action = f"Reload with {fix.context_per_conversation:,} tokens" if fix else ""
            self.page.set_notice(text, action)
        elif self._images_left_out:
            self.page.set_notice(
                f"{info.display_name} has no vision projector: the images in this conversation are "
                "left out of what it reads."
            )
        elif info.is_base_model:
            self.page.set_notice(
                f"{info.display_name} — {BASE_MODEL_BADGE.lower()}: its replies will ramble on from "
                "your message. To chat, load an instruct or chat version."
            )
        else:
            self._notice_for_writer()

    def _notice_for_writer(self) -> None:
        """A conversation written by a model that is not the one answering: load it in one click."""
        writer = self.chat.writer_of(self.chat.current_id)
        notice = self.chooser.writer_notice(writer)
        self._writer = writer if notice is not None else None
        self.page.set_notice(*(notice or ("",)))

    def apply_fix(self) -> None:
        """The notice's one-click fix: reload the model with the context the chat needs, or
        load the model the conversation is with."""
        if self._fix is not None:
            self._load(self._fix, self.session.speculation)
        elif self._writer is not None and self.chooser.load_writer(self._writer) is None:
            self._say(f"{self._writer.name} is no longer in the library.")
