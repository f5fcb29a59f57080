"""Conversations: the store, the loaded model and the chat widgets, wired together.

The controller keeps which conversation is shown and what the user does to it (new, select,
rename, delete, search; send, regenerate, continue), and hands the rest to its parts: the
replies generating to ``ReplyRunner`` (reply_runner.py), the context count to ``ContextMeter``
(context_meter.py), the request built from the message tree to ``HistoryBuilder``
(history_builder.py) with its ``ImageCache``, editing, versions and deleting a message to
``MessageActions`` (message_actions.py), messages waiting for a model to ``LoadWaits``
(after_load.py), what is refused and why to refusals.py, what the widgets show to
presentation.py.

Nothing the user does loses a reply: Regenerate adds a version of it and Edit a branch
(the switcher under a message steps through them), each reply records the model and the
sampling that wrote it when it begins, and Delete hides a message, with Undo, until purged
at the next start a week later. Delete on a user message takes its turn (the reply to it)
along and leaves what followed; on a reply, only the reply. Switching versions, editing,
regenerating and deleting wait until the conversation is not generating.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from PySide6.QtCore import QObject, Signal

from app.chat import (
    Attachment,
    Composer,
    ConversationList,
    DocumentsButton,
    MessageData,
    MessageView,
    SamplingPanel,
    SamplingSettings,
)
from app.chat.composer_pictures import IMAGES_NOT_SENT, NO_MODEL_FOR_PICTURES, TEXT_ONLY_MODEL
from app.conversation.after_load import AfterLoad, LoadWaits
from app.conversation.context_meter import ContextMeter
from app.conversation.document_chat import DocumentChat
from app.conversation.history_builder import HistoryBuilder
from app.conversation.image_cache import ImageCache
from app.conversation.message_actions import MessageActions
from app.conversation.presentation import (
    NEW_TITLE,
    conversation_summary,
    placeholder_text,
    title_from,
    unchanged_rows,
    view_message,
)
from app.conversation.refusals import (
    NO_MODEL,
    WAIT_FOR_REPLY,
    WAIT_TO_REGENERATE,
    WAITING_FOR_LOAD,
    decoded_attachments,
    give_back,
    too_long_message,
)
from app.conversation.reply_runner import ReplyRunner
from app.services.model_session import ModelSession
from app.settings.preferences import Preferences
from app.state.session import SessionState
from app.store.history import Message, ReplyModel, Store
from engine import DecodedImage, ImageRejected, PromptSize, Role

DELETED_KEPT_S = 7 * 24 * 3600  # deleted conversations and messages, until the next start purges them


class ChatController(QObject):
    """Owns the conversation shown and wires the widgets to the replies, the meter and the store."""

    status = Signal(str)  # one-line messages for the status bar
    streaming_changed = Signal(int)  # how many replies are generating
    title_changed = Signal(str)  # the shown conversation's title ("" when none is shown)
    # The context the shown conversation plus the draft takes (PromptSize), None when unknown.
    context_checked = Signal(object)
    images_left_out = Signal(bool)  # the shown conversation has images this model cannot see
    # A reply waiting for a slot asked for more: the loaded model's settings with this many
    # parallel conversations, for the user to reload with.
    parallel_wanted = Signal(int)

    def __init__(
        self,
        store: Store,
        session: ModelSession,
        view: MessageView,
        composer: Composer,
        conversations: ConversationList,
        sampling: SamplingPanel,
        parent: QObject | None = None,
        documents_button: DocumentsButton | None = None,
    ) -> None:
        super().__init__(parent)
        self.store = store
        self.session = session
        self.view = view
        self.composer = composer
        self.conversations = conversations
        self.sampling = sampling
        self.current_id: int | None = None
        self.images = ImageCache()
        history = HistoryBuilder(self.images)
        self.replies = ReplyRunner(store, session, view, composer, conversations, history, self, self)
        self.meter = ContextMeter(store, session, composer, history, lambda: self.current_id, self)
        self.messages = MessageActions(store, view, composer, self.replies, self, self.status.emit)
        # Each chat's collections and searches; the window gives it the service (set_source).
        self.documents = DocumentChat(store, session, self.replies, view, conversations, self)
        if documents_button is not None:
            self.documents.attach(documents_button)
        self._closing = False
        # Set by the window: start loading the model a conversation needs (the one that
        # wrote it, else the last one) and say its name; None when there is none to load.
        self.load_for: Callable[[int | None], str | None] | None = None
        self._waits = LoadWaits(
            store, session, composer, conversations, self, self._load_for, self.status.emit
        )

        self.replies.status.connect(self.status)
        self.replies.streaming_changed.connect(self.streaming_changed)
        self.replies.parallel_wanted.connect(self.parallel_wanted)
        self.meter.checked.connect(self.context_checked)
        composer.submitted.connect(self.submit)
        composer.stop_requested.connect(self.stop)
        composer.edit_cancelled.connect(self.messages.cancel_edit)
        view.edit_requested.connect(self.messages.edit)
        view.regenerate_requested.connect(self.regenerate)
        view.continue_requested.connect(self.continue_reply)
        view.delete_requested.connect(self.messages.delete_message)
        view.version_requested.connect(self.messages.switch_version)
        view.more_parallel_requested.connect(self.replies.more_parallel)
        view.undo_bar.undo_requested.connect(self.messages.undo_delete_message)
        conversations.new_requested.connect(self.new_conversation)
        conversations.selected.connect(self.select)
        conversations.rename_requested.connect(self.rename)
        conversations.delete_requested.connect(self.delete)
        conversations.undo_delete_requested.connect(self.undo_delete)
        conversations.search_changed.connect(self.search)
        sampling.changed.connect(self._sampling_changed)
        session.model_ready.connect(self._model_changed)
        session.model_unloaded.connect(self._model_changed)
        session.remote_ready.connect(self._model_changed)
        session.state_changed.connect(self._show_placeholder)
        session.load_failed.connect(self._waits.give_back)

    def _load_for(self, chat: int | None) -> str | None:
        return self.load_for(chat) if self.load_for is not None else None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """After a crash, replies left streaming reopen as interrupted."""
        interrupted = self.store.mark_interrupted_replies()
        self.store.collect_garbage()
        self.store.purge_deleted(older_than=DELETED_KEPT_S)
        self.store.purge_deleted_messages(older_than=DELETED_KEPT_S)
        self.refresh_list()
        existing = self.store.list_conversations()
        if existing:
            self.select(existing[0].id)
        else:
            self.sampling.set_settings(Preferences(self.store).new_conversation_settings())
        self._show_placeholder()
        if interrupted:
            self.status.emit(
                f"{interrupted} reply(s) were interrupted last time: continue or regenerate them."
            )
        self._model_changed()

    def shutdown(self) -> None:
        """The window is closing: every streaming reply is saved as interrupted (continued or
        regenerated next time), and what its request says after this is not listened to, as
        the store closes next."""
        self._closing = True
        self.meter.close()
        self.documents.shutdown()
        self.replies.shutdown()

    @property
    def streaming(self) -> int:
        return len(self.replies.streams)

    def save_streaming(self) -> None:
        """Write each streaming reply's text if it changed (every half second)."""
        self.replies.save_streaming()

    # -- the context count ------------------------------------------------------------------

    def measure_draft(self) -> None:
        """Ask the loaded model how much context the shown conversation plus the draft
        takes; the answer comes back as ``context_checked`` (and the composer's count)."""
        self.meter.measure()

    def measured_size(self, draft: str | None = None) -> PromptSize | None:
        """The last measurement of the shown conversation with ``draft`` (the composer's text
        when None), if it is current."""
        return self.meter.measured_size(draft)

    # -- conversations --------------------------------------------------------------------

    def refresh_list(self) -> None:
        listed = self.store.list_conversations()
        self.conversations.set_conversations([conversation_summary(c) for c in listed])
        for conversation_id, stream in self.replies.streams.items():
            self.conversations.set_busy(conversation_id, True, stream.stage_text)
        for conversation_id, after in self._waits.items():
            self.conversations.set_busy(conversation_id, True, after.stage)
        self.documents.mark_busy()
        self.title_changed.emit(next((c.title for c in listed if c.id == self.current_id), ""))

    def new_conversation(self) -> int:
        # With none shown, the panel holds the defaults and any change the user made to them there.
        if self.current_id is None:
            settings = self.sampling.settings()
        else:
            settings = Preferences(self.store).new_conversation_settings()
        conversation = self.store.create_conversation(
            NEW_TITLE, settings.system_prompt or None, settings.to_dict(), preset=None
        )
        if self.current_id is None:
            self.documents.adopt(conversation.id)
        self.refresh_list()
        self.select(conversation.id)
        self.composer.focus_input()
        return conversation.id

    def select(self, conversation_id: int) -> None:
        self.messages.cancel_edit()
        if conversation_id != self.current_id:
            self.view.undo_bar.dismiss()  # undo is for a message of the conversation shown
        self.current_id = conversation_id
        self.conversations.set_current(conversation_id)
        conversation = self.store.get_conversation(conversation_id)
        self.title_changed.emit(conversation.title)
        self.view.set_messages(self._view_message(m) for m in self.store.messages(conversation_id))
        self.documents.shown(conversation_id)
        self.view.scroll_to_bottom()
        settings = SamplingSettings.from_dict(conversation.sampling or {})
        if conversation.system_prompt is not None:
            settings = replace(settings, system_prompt=conversation.system_prompt)
        self.sampling.set_settings(settings)
        self.composer.set_generating(conversation_id in self.replies)
        self.composer.clear_error()
        self.images_left_out.emit(self._images_unseen(conversation_id))
        self.measure_draft()

    def rename(self, conversation_id: int, title: str) -> None:
        self.store.rename(conversation_id, title.strip() or NEW_TITLE)
        self.refresh_list()

    def delete(self, conversation_id: int) -> None:
        self.replies.cancel(conversation_id)
        self.documents.cancel(conversation_id)
        self.store.delete_conversation(conversation_id)
        if self.current_id == conversation_id:
            self.current_id = None
            self.view.undo_bar.dismiss()
            self.view.clear()
            self.sampling.set_settings(Preferences(self.store).new_conversation_settings())
        self.refresh_list()

    def undo_delete(self, conversation_id: int) -> None:
        self.store.undo_delete(conversation_id)
        self.refresh_list()
        self.select(conversation_id)

    def search(self, query: str) -> None:
        found = self.store.search(query) if query.strip() else self.store.list_conversations()
        self.conversations.set_conversations([conversation_summary(c) for c in found])

    def _sampling_changed(self, settings: SamplingSettings) -> None:
        if self.current_id is None:
            return
        self.store.set_sampling(self.current_id, settings.to_dict())
        self.store.set_system_prompt(self.current_id, settings.system_prompt or None)

    # -- sending --------------------------------------------------------------------------

    def submit(self, text: str, attachments: list[Attachment]) -> None:
        model = self.session.chat_model
        if model is None:
            self._submit_after_load(text, attachments)
            return
        if attachments and not model.has_vision:
            self._refuse(text, attachments, IMAGES_NOT_SENT)
            return
        images = self._checked_images(text, attachments)
        if images is None:
            return
        if self.messages.editing is not None:
            self.messages.resend_edit(text)
            return
        if self.current_id is None:
            self.new_conversation()
        assert self.current_id is not None
        if self.current_id in self.replies or self.current_id in self.documents:
            self._refuse(text, attachments, WAIT_FOR_REPLY)
            return
        size = self.measured_size(text)
        if size is not None and not size.fits:
            self._refuse(text, attachments, too_long_message(size))
            return
        conversation_id = self.current_id
        self._add_user_message(conversation_id, text, attachments, images)
        self.documents.answer(
            conversation_id,
            text,
            lambda writer, sampling: self.store.begin_reply(conversation_id, writer, sampling),
        )

    def _add_user_message(
        self, conversation_id: int, text: str, attachments: list[Attachment], images: list[DecodedImage]
    ) -> Message:
        for attachment, image in zip(attachments, images, strict=True):
            self.images.remember(attachment.data, image)
        message = self.store.add_message(
            conversation_id,
            Role.USER,
            text,
            [
                (a.data, a.mime_type or "image/png", image.identity)
                for a, image in zip(attachments, images, strict=True)
            ],
        )
        if self.store.get_conversation(conversation_id).title == NEW_TITLE:
            self.store.rename(conversation_id, title_from(text))
        self.view.append_message(self._view_message(message))
        self.refresh_list()
        return message

    # -- sending before a model is ready ---------------------------------------------------

    def writer_of(self, conversation_id: int | None) -> ReplyModel | None:
        """The model that wrote the conversation's latest reply (None: no reply recorded one)."""
        if conversation_id is None:
            return None
        replies = (m for m in reversed(self.store.messages(conversation_id)) if m.role is Role.ASSISTANT)
        return next((m.model for m in replies if m.model is not None), None)

    def waiting_for_load(self, conversation_id: int | None) -> bool:
        return conversation_id in self._waits

    def _submit_after_load(self, text: str, attachments: list[Attachment]) -> None:
        """Send with no model ready: the message is stored and shown now, and answered as
        soon as the model it needs (loading, or loaded for it now) is ready."""
        if self.messages.editing is not None:
            self._refuse(text, attachments, NO_MODEL)
            return
        if self.current_id in self._waits:
            self._refuse(text, attachments, WAIT_FOR_REPLY)
            return
        name = self._waits.loading_for(self.current_id)
        if name is None:
            self._refuse(text, attachments, NO_MODEL)
            return
        if self.session.chat_model is not None:  # ready at once: a remote model
            self.submit(text, attachments)
            return
        images = self._checked_images(text, attachments)
        if images is None:
            return
        if self.current_id is None:
            self.new_conversation()
        conversation_id = self.current_id
        assert conversation_id is not None
        message = self._add_user_message(conversation_id, text, attachments, images)
        self._waits.wait(
            conversation_id,
            AfterLoad(
                lambda: self.documents.answer(
                    conversation_id,
                    text,
                    lambda writer, sampling: self.store.begin_reply(conversation_id, writer, sampling),
                ),
                message.id,
                text,
                tuple(attachments),
                f"waiting for {name}…",
            ),
        )
        self.status.emit(WAITING_FOR_LOAD.format(name=name))

    def _show_placeholder(self, *_: object) -> None:
        """What an empty conversation says: who answers, what is loading, or how to choose."""
        model, plan = self.session.chat_model, self.session.plan
        loading = plan.model.display_name if self.session.state is SessionState.LOADING and plan else None
        self.view.set_placeholder(placeholder_text(model.label.name if model else None, loading))

    def _checked_images(self, text: str, attachments: list[Attachment]) -> list[DecodedImage] | None:
        """The attachments decoded and checked before anything is stored; None (and the
        message given back with the reason) when one is refused."""
        try:
            return decoded_attachments(attachments)
        except ImageRejected as exc:
            self._refuse(text, attachments, exc.message)
            return None

    def _refuse(self, text: str, attachments: list[Attachment], reason: str) -> None:
        """Give the user their message back, with the reason."""
        give_back(self.composer, text, attachments, reason)
        self.status.emit(reason)

    def stop(self) -> None:
        if self.current_id is not None:
            self.replies.cancel(self.current_id)

    def regenerate(self, message_id: int) -> None:
        """Write the reply again, as a new version of it: the earlier one stays a ‹ away."""
        conversation_id = (reply := self.store.get_message(message_id)).conversation_id
        if self._busy(conversation_id):
            self.status.emit(WAIT_TO_REGENERATE)
            return
        if self.session.chat_model is None and self._waits.write_after_load(
            conversation_id, lambda: self.regenerate(message_id)
        ):
            return
        self.documents.answer(
            conversation_id,
            self.documents.question_of(reply),
            lambda writer, sampling: self.store.regenerate_reply(message_id, writer, sampling),
        )

    def continue_reply(self, message_id: int) -> None:
        """Go on writing a reply that was cut off; it keeps the model that began it (loaded
        for it first, when no model is)."""
        conversation_id = (reply := self.store.get_message(message_id)).conversation_id
        if self._busy(conversation_id):
            return
        if self.session.chat_model is None and self._waits.write_after_load(
            conversation_id, lambda: self.continue_reply(message_id)
        ):
            return
        self.documents.go_on(reply)  # with the excerpts it was given, if any

    def _busy(self, conversation_id: int) -> bool:
        """Replying, searching its documents, or waiting for a model."""
        return any(conversation_id in part for part in (self.replies, self._waits, self.documents))

    # -- a message already sent (message_actions.py) --------------------------------------

    def edit(self, message_id: int) -> None:
        self.messages.edit(message_id)

    def switch_version(self, message_id: int, step: int) -> None:
        """Show the version ``step`` away (-1: the one before) of a message."""
        self.messages.switch_version(message_id, step)

    def delete_message(self, message_id: int) -> None:
        """Hide a message (a user message with the reply to it), offering Undo."""
        self.messages.delete_message(message_id)

    def undo_delete_message(self, message_id: int) -> None:
        self.messages.undo_delete_message(message_id)

    # -- the answering model ----------------------------------------------------------------

    def _images_unseen(self, conversation_id: int) -> bool:
        model = self.session.chat_model
        if model is None or model.has_vision:
            return False
        return any(m.images for m in self.store.messages(conversation_id))

    def _model_changed(self, *_: object) -> None:
        if self._closing:
            return
        self.composer.clear_error()
        if self.session.chat_model is not None:
            self._waits.run()
        if self.current_id is not None:
            self.images_left_out.emit(self._images_unseen(self.current_id))
            shown = self.store.messages(self.current_id)
            if any(m.id in self.replies.too_long_at for m in shown) and self.current_id not in self.replies:
                self.select(self.current_id)  # a larger context may make Regenerate worth offering
        self.measure_draft()
        model = self.session.chat_model
        if model is None:
            self.composer.set_attachments_enabled(False, NO_MODEL_FOR_PICTURES)
        elif model.has_vision:
            self.composer.set_attachments_enabled(True, "Attach images (drop, paste, or choose files)")
        else:
            self.composer.set_attachments_enabled(False, TEXT_ONLY_MODEL)

    # -- presentation ----------------------------------------------------------------------

    def show_path(self, conversation_id: int, path: list[Message] | None = None) -> None:
        """Bring the view in line with the conversation's path (``path``, if just read):
        only the rows from the first that differs are replaced."""
        if conversation_id != self.current_id:
            return
        path = self.store.messages(conversation_id) if path is None else path
        shown = self.view.messages()
        same = unchanged_rows(shown, path)
        if same < len(shown) or same < len(path):
            self.view.replace_from(same, (self._view_message(m) for m in path[same:]))

    def _view_message(self, message: Message) -> MessageData:
        return view_message(
            message, self.replies.stream_of(message), not self.replies.would_fail_again(message)
        )
