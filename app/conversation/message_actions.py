"""What the user does to a message already in the conversation: edit it (sent again as a new
version, the old one and its branch a ‹ away), step through its versions, and delete it with
Undo. Each waits until the conversation is not generating: the reply being written belongs to
the path shown."""

from __future__ import annotations

from collections.abc import Callable

from app.chat import Composer, MessageView
from app.conversation.presentation import deleted_text
from app.conversation.refusals import STOP_TO_EDIT, WAIT_FOR_REPLY, WAIT_TO_DELETE, WAIT_TO_SWITCH, give_back
from app.conversation.reply_runner import ReplyRunner
from app.conversation.shown import ShownConversation
from app.store.history import NotFound, Store


class MessageActions:
    """Editing, versions and deleting; ``say``: a line for the status bar."""

    def __init__(
        self,
        store: Store,
        view: MessageView,
        composer: Composer,
        replies: ReplyRunner,
        shown: ShownConversation,
        say: Callable[[str], None],
    ) -> None:
        self.store = store
        self.view = view
        self.composer = composer
        self.replies = replies
        self.shown = shown
        self._say = say
        self.editing: int | None = None  # the user message being edited

    # -- editing ------------------------------------------------------------------------------

    def edit(self, message_id: int) -> None:
        message = self.store.get_message(message_id)
        if message.conversation_id in self.replies:
            self._say(STOP_TO_EDIT)
            return
        self.editing = message_id
        self.composer.begin_edit(message.text)

    def resend_edit(self, text: str) -> None:
        """The edited text as a new version of the message, answered anew: the earlier text
        and everything after it stay a ‹ away."""
        assert self.editing is not None
        conversation_id = self.store.get_message(self.editing).conversation_id
        if conversation_id in self.replies:
            give_back(self.composer, text, [], WAIT_FOR_REPLY)
            self._say(WAIT_FOR_REPLY)
            return
        self.store.edit_and_branch(self.editing, text)
        self.editing = None
        self.replies.generate(
            conversation_id,
            lambda writer, sampling: self.store.begin_reply(conversation_id, writer, sampling),
        )

    def cancel_edit(self) -> None:
        if self.editing is not None:
            self.editing = None
            if self.composer.is_editing():
                self.composer.cancel_edit()

    # -- versions and deleting ------------------------------------------------------------

    def switch_version(self, message_id: int, step: int) -> None:
        """Show the version ``step`` away (-1: the one before) of a message, and after it the
        branch that version had. Refused while the conversation is generating: the reply
        being written belongs to the path shown."""
        conversation_id = self.store.get_message(message_id).conversation_id
        if conversation_id in self.replies:
            self._say(WAIT_TO_SWITCH)
            return
        target = self.store.versions(message_id).step(step)
        if target is None:
            return
        self.cancel_edit()
        self.store.select_version(target)
        self.shown.show_path(conversation_id)

    def delete_message(self, message_id: int) -> None:
        """Hide a message (a user message with the reply to it), offering Undo."""
        message = self.store.get_message(message_id)
        if message.conversation_id in self.replies:
            self._say(WAIT_TO_DELETE)
            return
        self.cancel_edit()
        version = self.store.versions(message_id).count > 1
        count = self.store.delete_message(message_id)
        self.shown.show_path(message.conversation_id)
        self.view.undo_bar.offer(message_id, deleted_text(message.role, count, version))

    def undo_delete_message(self, message_id: int) -> None:
        try:
            conversation_id = self.store.get_message(message_id).conversation_id
        except NotFound:
            return  # purged meanwhile
        self.store.restore_message(message_id)
        self.shown.show_path(conversation_id)
