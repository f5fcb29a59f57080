"""Conversations: the store, the loaded model and the chat widgets, wired together.

Every reply streams into the view (only when its conversation is shown) and into the
store (at least every half second, marked complete at the end), so killing the app at
any moment loses at most the last half second of a reply, which reopens as interrupted.
Several conversations can generate at once: each keeps its own request handle.

Nothing the user does loses a reply: Regenerate adds a version of it and Edit a branch
(the switcher under a message steps through them), each reply records the model and the
sampling that wrote it when it begins, and Delete hides a message, with Undo, until purged
at the next start a week later. Delete on a user message takes its turn (the reply to it)
along and leaves what followed; on a reply, only the reply. Switching versions, editing,
regenerating and deleting wait until the conversation is not generating.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from app.chat import (
    Attachment,
    Composer,
    ConversationList,
    ConversationSummary,
    MessageData,
    MessageState,
    MessageView,
    ReplyStats,
    SamplingPanel,
    SamplingSettings,
)
from app.chat.composer import IMAGES_NOT_SENT, NO_MODEL_FOR_PICTURES, TEXT_ONLY_MODEL
from app.chat.lru import LruCache
from app.chat.viewport_layout import STREAM_TEXT_INTERVAL_S
from app.conversation.presentation import view_message
from app.conversation.reply_in_flight import ReplyInFlight, ReplyStage, why_waiting
from app.conversation.thinking import ReplySplit
from app.services.model_session import ModelSession, SessionState
from app.settings.preferences import Preferences
from app.store.history import Conversation, ImageRef, Message, NotFound, ReplyModel, Store
from app.store.history import MessageState as StoredState
from engine import (
    ChatMessage,
    ChatModel,
    ChatRequest,
    Completion,
    DecodedImage,
    EngineError,
    ImageRejected,
    PromptSize,
    PromptTooLong,
    ReplyInterrupted,
    RequestHandle,
    Role,
    StopReason,
    TextDelta,
    check_message_images,
    load_image,
)

NEW_TITLE = "New chat"
SAVE_INTERVAL_MS = 500
DECODED_IMAGE_CACHE = 32
PROMPT_TOO_LONG = "prompt_too_long"  # a failed reply's stop reason: the chat outgrew the context
MEASURE_DEBOUNCE_MS = 300  # the context count follows typing this long after it pauses
DELETED_KEPT_S = 7 * 24 * 3600  # deleted conversations and messages, until the next start purges them

NO_MODEL = "Load a model first: choose one at the top of the chat (Ctrl+M) or under Models."
WAIT_FOR_REPLY = "Wait for the reply, or stop it (Esc), before sending again."
WAIT_TO_SWITCH = "Wait for the reply, or stop it (Esc), before switching versions."
WAIT_TO_DELETE = "Wait for the reply, or stop it (Esc), before deleting messages."
WAIT_TO_REGENERATE = "Wait for the reply, or stop it (Esc), before regenerating."

WAITING_FOR_LOAD = "Your message is sent when {name} is loaded."


@dataclass(frozen=True)
class AfterLoad:
    """What a conversation does once the model it waits for is ready: send the message it
    stored (given back to the composer if the load fails), or continue a reply."""

    run: Callable[[], None]
    message_id: int | None = None
    text: str = ""
    attachments: tuple[Attachment, ...] = ()
    stage: str = "waiting for the model…"  # what the conversation list says meanwhile


# Makes the reply row: begin_reply, regenerate_reply or resume_reply, given who writes it.
StartReply = Callable[[ReplyModel, dict[str, Any]], Message]

def too_long_message(size: PromptSize) -> str:
    return (
        f"This conversation with your message is {size.tokens:,} tokens; the model was loaded "
        f"with {size.limit:,} per conversation."
    )


def _title_from(text: str) -> str:
    line = " ".join(text.split())
    return (line[:48] + "…") if len(line) > 48 else (line or NEW_TITLE)


class ChatController(QObject):
    """Owns the conversation shown, the replies streaming, and what is saved when."""

    status = Signal(str)  # one-line messages for the status bar
    streaming_changed = Signal(int)  # how many replies are generating
    title_changed = Signal(str)  # the shown conversation's title ("" when none is shown)
    # The context the shown conversation plus the draft takes (PromptSize), None when unknown.
    context_checked = Signal(object)
    images_left_out = Signal(bool)  # the shown conversation has images this model cannot see
    # A reply waiting for a slot asked for more: the loaded model's settings with this many
    # parallel conversations, for the user to reload with.
    parallel_wanted = Signal(int)
    _measured = Signal(int, object)  # a measurement answered, from the executor's thread

    def __init__(
        self,
        store: Store,
        session: ModelSession,
        view: MessageView,
        composer: Composer,
        conversations: ConversationList,
        sampling: SamplingPanel,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.store = store
        self.session = session
        self.view = view
        self.composer = composer
        self.conversations = conversations
        self.sampling = sampling
        self.current_id: int | None = None
        self._streams: dict[int, ReplyInFlight] = {}  # by conversation id
        self._editing: int | None = None  # the user message being edited
        self._images: LruCache[str, DecodedImage] = LruCache(DECODED_IMAGE_CACHE)
        self._save_timer = QTimer(self)
        self._save_timer.setInterval(SAVE_INTERVAL_MS)
        self._save_timer.timeout.connect(self.save_streaming)
        self._measure_timer = QTimer(self)
        self._measure_timer.setSingleShot(True)
        self._measure_timer.setInterval(MEASURE_DEBOUNCE_MS)
        self._measure_timer.timeout.connect(self.measure_draft)
        self._measure_generation = 0  # answers to older measurements are dropped
        self._size: tuple[tuple[int, str], PromptSize | None] | None = None  # (conversation, draft)
        self._measured.connect(self._on_measured)
        self._closing = False
        self._too_long_at: dict[int, int] = {}  # reply id -> the context it did not fit in
        # Set by the window: start loading the model a conversation needs (the one that
        # wrote it, else the last one) and say its name; None when there is none to load.
        self.load_for: Callable[[int | None], str | None] | None = None
        self._after_load: dict[int, AfterLoad] = {}  # by conversation id

        composer.submitted.connect(self.submit)
        composer.stop_requested.connect(self.stop)
        composer.edit_cancelled.connect(self._cancel_edit)
        composer.draft_changed.connect(self._measure_timer.start)
        view.edit_requested.connect(self.edit)
        view.regenerate_requested.connect(self.regenerate)
        view.continue_requested.connect(self.continue_reply)
        view.delete_requested.connect(self.delete_message)
        view.version_requested.connect(self.switch_version)
        view.more_parallel_requested.connect(self._more_parallel)
        view.undo_bar.undo_requested.connect(self.undo_delete_message)
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
        session.load_failed.connect(self._load_failed)

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
        self._save_timer.stop()
        self._measure_timer.stop()
        for stream in list(self._streams.values()):
            self.store.finish_reply(
                stream.message_id, stream.text, StoredState.INTERRUPTED, thinking=stream.thinking()
            )
            if stream.handle is not None:
                stream.handle.cancel()
        self._streams.clear()

    @property
    def streaming(self) -> int:
        return len(self._streams)

    # -- conversations --------------------------------------------------------------------

    def refresh_list(self) -> None:
        listed = self.store.list_conversations()
        self.conversations.set_conversations([self._summary(c) for c in listed])
        for conversation_id, stream in self._streams.items():
            self.conversations.set_busy(conversation_id, True, stream.stage_text)
        for conversation_id, after in self._after_load.items():
            self.conversations.set_busy(conversation_id, True, after.stage)
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
        self.refresh_list()
        self.select(conversation.id)
        self.composer.focus_input()
        return conversation.id

    def select(self, conversation_id: int) -> None:
        self._cancel_edit()
        if conversation_id != self.current_id:
            self.view.undo_bar.dismiss()  # undo is for a message of the conversation shown
        self.current_id = conversation_id
        self.conversations.set_current(conversation_id)
        conversation = self.store.get_conversation(conversation_id)
        self.title_changed.emit(conversation.title)
        self.view.set_messages(self._view_message(m) for m in self.store.messages(conversation_id))
        self.view.scroll_to_bottom()
        settings = SamplingSettings.from_dict(conversation.sampling or {})
        if conversation.system_prompt is not None:
            settings = replace(settings, system_prompt=conversation.system_prompt)
        self.sampling.set_settings(settings)
        self.composer.set_generating(conversation_id in self._streams)
        self.composer.clear_error()
        self.images_left_out.emit(self._images_unseen(conversation_id))
        self.measure_draft()

    def rename(self, conversation_id: int, title: str) -> None:
        self.store.rename(conversation_id, title.strip() or NEW_TITLE)
        self.refresh_list()

    def delete(self, conversation_id: int) -> None:
        self._cancel(conversation_id)
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
        self.conversations.set_conversations([self._summary(c) for c in found])

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
        if self._editing is not None:
            self._resend_edit(text)
            return
        if self.current_id is None:
            self.new_conversation()
        assert self.current_id is not None
        if self.current_id in self._streams:
            self._refuse(text, attachments, WAIT_FOR_REPLY)
            return
        size = self.measured_size(text)
        if size is not None and not size.fits:
            self._refuse(text, attachments, too_long_message(size))
            return
        conversation_id = self.current_id
        self._add_user_message(conversation_id, text, attachments, images)
        self._generate(
            conversation_id,
            lambda writer, sampling: self.store.begin_reply(conversation_id, writer, sampling),
        )

    def _add_user_message(
        self, conversation_id: int, text: str, attachments: list[Attachment], images: list[DecodedImage]
    ) -> Message:
        for attachment, image in zip(attachments, images, strict=True):
            self._remember(hashlib.sha256(attachment.data).hexdigest(), image)
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
            self.store.rename(conversation_id, _title_from(text))
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

    def _loading_for(self, conversation_id: int | None) -> str | None:
        """The name of the model being loaded, starting a load (the conversation's own
        model, else the last one) when none is; None when there is nothing to load."""
        plan = self.session.plan
        if self.session.state is SessionState.LOADING and plan is not None:
            return plan.model.display_name
        return self.load_for(conversation_id) if self.load_for is not None else None

    def waiting_for_load(self, conversation_id: int | None) -> bool:
        return conversation_id in self._after_load

    def _submit_after_load(self, text: str, attachments: list[Attachment]) -> None:
        """Send with no model ready: the message is stored and shown now, and answered as
        soon as the model it needs (loading, or loaded for it now) is ready."""
        if self._editing is not None:
            self._refuse(text, attachments, NO_MODEL)
            return
        if self.current_id in self._after_load:
            self._refuse(text, attachments, WAIT_FOR_REPLY)
            return
        name = self._loading_for(self.current_id)
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
        self._after_load[conversation_id] = AfterLoad(
            lambda: self._generate(
                conversation_id,
                lambda writer, sampling: self.store.begin_reply(conversation_id, writer, sampling),
            ),
            message.id,
            text,
            tuple(attachments),
            f"waiting for {name}…",
        )
        self.conversations.set_busy(conversation_id, True, f"waiting for {name}…")
        self.status.emit(WAITING_FOR_LOAD.format(name=name))

    def _write_after_load(self, conversation_id: int, write: Callable[[], None]) -> bool:
        """Continue or Regenerate with no model ready: load the one the conversation needs
        and ``write`` when it is ready; False when there is none to load."""
        name = self._loading_for(conversation_id)
        if name is None:
            return False
        if self.session.chat_model is not None:
            write()
            return True
        self._after_load[conversation_id] = AfterLoad(write, stage=f"waiting for {name}…")
        self.conversations.set_busy(conversation_id, True, f"waiting for {name}…")
        self.status.emit(f"The reply is written when {name} is loaded.")
        return True

    def _run_after_load(self) -> None:
        waiting, self._after_load = self._after_load, {}
        for conversation_id, after in waiting.items():
            self.conversations.set_busy(conversation_id, False)
            after.run()

    def _load_failed(self, error: EngineError) -> None:
        """The model a message waited for did not load: the message goes back to the
        composer (its conversation shown), with the reason."""
        waiting, self._after_load = self._after_load, {}
        for conversation_id, after in waiting.items():
            self.conversations.set_busy(conversation_id, False)
            if after.message_id is None:
                continue
            self.store.delete_message(after.message_id)
            self._show_path(conversation_id)
            if conversation_id == self.current_id:
                self.composer.set_text(after.text)
                if after.attachments:
                    self.composer.attach_images([(a.name, a.data) for a in after.attachments])
                self.composer.show_image_error(error.message)

    def _show_placeholder(self, *_: object) -> None:
        """What an empty conversation says: who answers, what is loading, or how to choose."""
        model = self.session.chat_model
        plan = self.session.plan
        if model is not None:
            text = f"Start a conversation with {model.label.name}: type below."
        elif self.session.state is SessionState.LOADING and plan is not None:
            text = f"Loading {plan.model.display_name}… Type below: it answers once loaded."
        else:
            text = "Start a conversation: choose a model at the top (Ctrl+M), then type below."
        self.view.set_placeholder(text)

    def _checked_images(self, text: str, attachments: list[Attachment]) -> list[DecodedImage] | None:
        """The attachments decoded and checked before anything is stored; None (and the
        message given back with the reason) when one is refused."""
        try:
            images = [load_image(a.data, name=a.name) for a in attachments]
            check_message_images(images)
        except ImageRejected as exc:
            self._refuse(text, attachments, exc.message)
            return None
        return images

    def _refuse(self, text: str, attachments: list[Attachment], reason: str) -> None:
        """Give the user their message back, with the reason."""
        self.composer.set_text(text)
        if attachments:
            self.composer.attach_images([(a.name, a.data) for a in attachments])
        self.composer.show_image_error(reason)
        self.status.emit(reason)

    def stop(self) -> None:
        if self.current_id is not None:
            self._cancel(self.current_id)

    def _cancel(self, conversation_id: int) -> None:
        stream = self._streams.get(conversation_id)
        if stream is not None and stream.handle is not None:
            stream.handle.cancel()

    def regenerate(self, message_id: int) -> None:
        """Write the reply again, as a new version of it: the earlier one stays a ‹ away."""
        conversation_id = self.store.get_message(message_id).conversation_id
        if conversation_id in self._streams or conversation_id in self._after_load:
            self.status.emit(WAIT_TO_REGENERATE)
            return
        if self.session.chat_model is None and self._write_after_load(
            conversation_id, lambda: self.regenerate(message_id)
        ):
            return
        self._generate(
            conversation_id,
            lambda writer, sampling: self.store.regenerate_reply(message_id, writer, sampling),
        )

    def edit(self, message_id: int) -> None:
        message = self.store.get_message(message_id)
        if message.conversation_id in self._streams:
            self.status.emit("Stop the reply before editing.")
            return
        self._editing = message_id
        self.composer.begin_edit(message.text)

    def _resend_edit(self, text: str) -> None:
        """The edited text as a new version of the message, answered anew: the earlier text
        and everything after it stay a ‹ away."""
        assert self._editing is not None
        conversation_id = self.store.get_message(self._editing).conversation_id
        if conversation_id in self._streams:
            self._refuse(text, [], WAIT_FOR_REPLY)
            return
        self.store.edit_and_branch(self._editing, text)
        self._editing = None
        self._generate(
            conversation_id,
            lambda writer, sampling: self.store.begin_reply(conversation_id, writer, sampling),
        )

    def _cancel_edit(self) -> None:
        if self._editing is not None:
            self._editing = None
            if self.composer.is_editing():
                self.composer.cancel_edit()

    def continue_reply(self, message_id: int) -> None:
        """Go on writing a reply that was cut off; it keeps the model that began it (loaded
        for it first, when no model is)."""
        conversation_id = self.store.get_message(message_id).conversation_id
        if conversation_id in self._streams or conversation_id in self._after_load:
            return
        if self.session.chat_model is None and self._write_after_load(
            conversation_id, lambda: self.continue_reply(message_id)
        ):
            return
        self._generate(conversation_id, lambda *_: self.store.resume_reply(message_id), resume=True)

    # -- versions and deleting ------------------------------------------------------------

    def switch_version(self, message_id: int, step: int) -> None:
        """Show the version ``step`` away (-1: the one before) of a message, and after it the
        branch that version had. Refused while the conversation is generating: the reply
        being written belongs to the path shown."""
        conversation_id = self.store.get_message(message_id).conversation_id
        if conversation_id in self._streams:
            self.status.emit(WAIT_TO_SWITCH)
            return
        target = self.store.versions(message_id).step(step)
        if target is None:
            return
        self._cancel_edit()
        self.store.select_version(target)
        self._show_path(conversation_id)

    def delete_message(self, message_id: int) -> None:
        """Hide a message (a user message with the reply to it), offering Undo."""
        message = self.store.get_message(message_id)
        if message.conversation_id in self._streams:
            self.status.emit(WAIT_TO_DELETE)
            return
        self._cancel_edit()
        version = self.store.versions(message_id).count > 1
        count = self.store.delete_message(message_id)
        self._show_path(message.conversation_id)
        if version:
            after = count - 1
            what = "this version" + (f" and the {after} message{'s' * (after > 1)} after it" if after else "")
        elif message.role is Role.USER:
            what = "your message" + {1: "", 2: " and its reply"}.get(count, " and its replies")
        else:
            what = "the reply"
        self.view.undo_bar.offer(message_id, f"Deleted {what}")

    def undo_delete_message(self, message_id: int) -> None:
        try:
            conversation_id = self.store.get_message(message_id).conversation_id
        except NotFound:
            return  # purged meanwhile
        self.store.restore_message(message_id)
        self._show_path(conversation_id)

    # -- the context count ------------------------------------------------------------------

    def measure_draft(self) -> None:
        """Ask the loaded model how much context the shown conversation plus the draft
        takes; the answer comes back as ``context_checked`` (and the composer's count)."""
        self._measure_timer.stop()
        self._measure_generation += 1
        model = self.session.chat_model
        if model is None or self.current_id is None or self._closing:
            self._show_size(None)
            return
        conversation = self.store.get_conversation(self.current_id)
        try:
            messages = self._chat_messages(conversation, self.store.messages(self.current_id))
        except EngineError:
            self._show_size(None)
            return
        draft = self.composer.text().strip()  # what Send would send
        if draft:
            messages.append(ChatMessage(Role.USER, draft))
        key = (self.current_id, draft)
        generation = self._measure_generation
        future = model.measure_prompt(ChatRequest(messages=tuple(messages), owner=str(self.current_id)))
        # Answered on the executor's thread: the signal carries it to this one.
        future.add_done_callback(lambda done: self._measured.emit(generation, (key, done)))

    def measured_size(self, draft: str | None = None) -> PromptSize | None:
        """The last measurement of the shown conversation with ``draft`` (the composer's text
        when None), if it is current."""
        key = (self.current_id, self.composer.text().strip() if draft is None else draft)
        if self._size is None or self._size[0] != key:
            return None
        return self._size[1]

    def _on_measured(self, generation: int, answer: tuple[tuple[int, str], object]) -> None:
        if generation != self._measure_generation or self._closing:
            return  # a newer draft was asked about since
        key, future = answer
        try:
            size = future.result(0)  # type: ignore[attr-defined]
        except Exception:  # a prompt that cannot be built says why when it is sent
            size = None
        self._size = (key, size)
        self._show_size(size)

    def _show_size(self, size: PromptSize | None) -> None:
        self.composer.set_context_usage(size.tokens if size else None, size.limit if size else 0)
        self.context_checked.emit(size)

    # -- generation -----------------------------------------------------------------------

    def _generate(self, conversation_id: int, start: StartReply, resume: bool = False) -> None:
        """Answer the conversation's path in a reply row made by ``start`` (which goes on
        with the row's text when ``resume``), streamed into the view and the store."""
        model = self.session.chat_model
        if model is None:
            self.status.emit(NO_MODEL)
            return
        conversation = self.store.get_conversation(conversation_id)
        settings = SamplingSettings.from_dict(conversation.sampling or {})
        settings = replace(settings, system_prompt=conversation.system_prompt or "")
        reply = start(_writer(model), settings.to_dict())
        path = self.store.messages(conversation_id)
        # A reasoning model's reply is split into its thinking and its answer as it streams;
        # a continued one goes on from where its thinking or answer was cut off.
        if resume:
            split, prefix = ReplySplit.resuming(
                model.chat_traits, reply.text, reply.thinking, time.monotonic()
            )
        else:
            split, prefix = ReplySplit(model.chat_traits), ""
        try:
            request = ChatRequest(
                messages=tuple(self._chat_messages(conversation, [m for m in path if m.id != reply.id])),
                sampling=settings.to_params(),
                max_tokens=settings.max_tokens,
                owner=str(conversation_id),
                assistant_prefix=prefix,
                text_interval_s=STREAM_TEXT_INTERVAL_S,
            )
        except EngineError as exc:
            self._fail_to_start(reply, exc)
            return
        stream = ReplyInFlight(
            conversation_id, reply.id, None, split, saved=(reply.text, reply.thinking), resumed=resume
        )

        def connect(handle: RequestHandle) -> None:
            stream.handle = handle
            handle.queued.connect(lambda position: self._on_queued(stream, position))
            handle.prefill.connect(lambda *progress: self._on_prefill(stream, *progress))
            handle.started.connect(lambda: stream.split.started(time.monotonic()))
            handle.text_delta.connect(lambda delta: self._on_delta(stream, delta))
            handle.completed.connect(lambda completion: self._on_completed(stream, completion))
            handle.failed.connect(lambda error: self._on_failed(stream, error))

        try:
            model.submit(request, connect)
        except EngineError as exc:
            self._fail_to_start(reply, exc)
            return
        self._streams[conversation_id] = stream
        if conversation_id == self.current_id:
            self.view.undo_bar.dismiss()  # the conversation moved on: the delete is final
            if resume:
                self.view.set_state(
                    reply.id, MessageState.STREAMING, text=reply.text, thought=stream.thought()
                )
            else:
                self._show_path(conversation_id, path)
            self.view.scroll_to_bottom()
            self.composer.set_generating(True)
        self._set_stage(stream, ReplyStage.WAITING)
        self._save_timer.start()
        self.streaming_changed.emit(len(self._streams))

    def _fail_to_start(self, reply: Message, error: EngineError) -> None:
        self.store.finish_reply(reply.id, reply.text, StoredState.FAILED, error=error.message)
        self._show_path(reply.conversation_id)
        if reply.conversation_id == self.current_id:
            self.view.set_state(reply.id, MessageState.FAILED, error=error.message)
        self.status.emit(error.message)

    def _chat_messages(self, conversation: Conversation, history: list[Message]) -> list[ChatMessage]:
        model = self.session.chat_model
        sees = model is not None and model.has_vision
        messages: list[ChatMessage] = []
        if conversation.system_prompt:
            messages.append(ChatMessage(Role.SYSTEM, conversation.system_prompt))
        for message in history:
            if message.state is StoredState.FAILED or (message.role is Role.ASSISTANT and not message.text):
                continue
            # A model that cannot see is given the text: the images stay in the chat.
            images = tuple(self._decoded(ref) for ref in message.images) if sees else ()
            # A stopped or interrupted reply's token ids may not spell its saved text.
            tokens = message.tokens if message.state is StoredState.COMPLETE else ()
            messages.append(ChatMessage(message.role, message.text, images, tokens, message.tokens_model))
        return messages

    def _decoded(self, ref: ImageRef) -> DecodedImage:
        key = ref.sha256
        image = self._images.get(key)
        if image is None:
            image = load_image(ref.read_bytes(), name=ref.path.name)
            self._images.put(key, image)
        return image

    def _remember(self, sha256: str, image: DecodedImage) -> None:
        """Keep a just-sent image decoded: the store names it by the sha256 of its bytes."""
        self._images.put(sha256, image)

    def _on_queued(self, stream: ReplyInFlight, _position: int) -> None:
        if self._closing:
            return
        stream.queued_at = time.monotonic()
        self._explain_waits()

    def _explain_waits(self) -> None:
        """Say why each queued reply waits (``why_waiting``): when one is queued, and when
        one is admitted or leaves the queue (not when one ends: the next is admitted in a
        moment, and until then the slots would look free)."""
        if self._closing:
            return
        parallel = self._parallel()
        for stream in self._streams.values():
            if stream.stage is not ReplyStage.WAITING or stream.queued_at is None:
                continue
            wait = why_waiting(stream, self._streams.values(), parallel)
            if wait != stream.waiting:
                stream.waiting = wait
                self._set_stage(stream, stream.stage)  # the list says "waiting for a slot"
                if stream.conversation_id == self.current_id:
                    self.view.set_queued(stream.message_id, wait)

    def _parallel(self) -> int:
        """Conversations the answering model serves at once (0: not known, a remote one)."""
        model = self.session.ready_model
        if model is None or self.session.chat_model is not model:
            return 0
        return model.plan.params.n_seq_max

    def _more_parallel(self, _message_id: object) -> None:
        if parallel := self._parallel():
            self.parallel_wanted.emit(parallel + 1)

    def _on_prefill(
        self, stream: ReplyInFlight, done: int, total: int, cached: int, images_done: int, images: int
    ) -> None:
        if self._closing:
            return
        stream.read_percent = 100 * done // max(total, 1)
        admitted = stream.stage is ReplyStage.WAITING
        self._set_stage(stream, ReplyStage.READING)
        if admitted:
            stream.waiting = None
            self._explain_waits()  # one slot fewer for those still queued
        if stream.conversation_id == self.current_id:
            self.view.set_prefill(stream.message_id, done, total, cached, images_done, images)

    def _on_delta(self, stream: ReplyInFlight, delta: TextDelta) -> None:
        if self._closing:
            return
        split = stream.split
        before = (split.thinking, split.tokens, len(split.thought))
        _thought, answer = split.feed(delta.text, delta.pieces, time.monotonic(), delta.reasoning)
        # The block's count moves with tokens that carry no text yet (a tag being held).
        self._show_delta(stream, before != (split.thinking, split.tokens, len(split.thought)), answer)

    def _show_delta(self, stream: ReplyInFlight, thought_changed: bool, answer: str) -> None:
        stage = ReplyStage.THINKING if stream.split.thinking else ReplyStage.WRITING
        if stream.stage is not stage:
            self._set_stage(stream, stage)
        if stream.conversation_id != self.current_id:
            return
        shown = stream.thought()
        if thought_changed and shown is not None:
            self.view.update_thought(stream.message_id, shown)
        if answer:
            self.view.append_delta(stream.message_id, answer)

    def _set_stage(self, stream: ReplyInFlight, stage: ReplyStage) -> None:
        stream.stage = stage
        self.conversations.set_busy(stream.conversation_id, True, stream.stage_text)

    def _on_completed(self, stream: ReplyInFlight, completion: Completion) -> None:
        if self._closing:
            return
        stream.split.finish(time.monotonic())
        stats = ReplyStats.from_completion(completion)
        cancelled = completion.stop_reason is StopReason.CANCELLED
        self.store.finish_reply(
            stream.message_id,
            stream.text,
            StoredState.CANCELLED if cancelled else StoredState.COMPLETE,
            stop_reason=completion.stop_reason.value,
            stats=stats.to_dict(),
            # Ids spell the whole output, thinking and tags included: a reply whose answer is
            # less than that is sent back as its text, so its thinking never is.
            tokens=() if stream.text != completion.text else completion.reply_tokens,
            tokens_model=completion.model_identity,
            thinking=stream.thinking(),
        )
        self._end(stream, MessageState.CANCELLED if cancelled else MessageState.DONE, stats=stats)

    def _on_failed(self, stream: ReplyInFlight, error: EngineError) -> None:
        if self._closing:
            return
        stream.split.finish(time.monotonic())
        too_long = isinstance(error, PromptTooLong)
        cut_off = isinstance(error, ReplyInterrupted) or (stream.resumed and not too_long)
        if cut_off and (stream.text or stream.split.thought):
            # Cut off, not refused (a remote server went away mid-reply), or a Continue that
            # could not go on (the server is still away): what it said stands, as after a
            # crash, and Continue stays offered.
            self.store.finish_reply(
                stream.message_id, stream.text, StoredState.INTERRUPTED, error=error.message,
                thinking=stream.thinking(),
            )  # fmt: skip
            self._end(stream, MessageState.INTERRUPTED, error=error.message)
            self.status.emit(error.message)
            return
        self.store.finish_reply(
            stream.message_id,
            stream.text,
            StoredState.FAILED,
            error=error.message,
            stop_reason=PROMPT_TOO_LONG if too_long else None,
            thinking=stream.thinking(),
        )
        self._end(stream, MessageState.FAILED, error=error.message)
        model = self.session.chat_model
        if too_long and model is not None:
            # Regenerating would fail the same way until the context grows: the notice offers
            # that instead (shown again, the conversation's actions say so).
            self._too_long_at[stream.message_id] = model.context_per_conversation
            if stream.conversation_id == self.current_id:
                self.select(stream.conversation_id)

    def _end(
        self, stream: ReplyInFlight, state: MessageState, stats: ReplyStats | None = None, error: str = ""
    ) -> None:
        self._streams.pop(stream.conversation_id, None)
        self.conversations.set_busy(stream.conversation_id, False)
        if stream.stage is ReplyStage.WAITING:
            self._explain_waits()  # one fewer waiting ahead of the others
        if stream.conversation_id == self.current_id:
            self.view.set_state(
                stream.message_id, state, stats=stats, error=error, text=stream.text, thought=stream.thought()
            )
            self.composer.set_generating(False)
        if not self._streams:
            self._save_timer.stop()
        self.refresh_list()
        self.streaming_changed.emit(len(self._streams))
        if stream.conversation_id == self.current_id:
            self.measure_draft()  # the reply is part of the context now

    def save_streaming(self) -> None:
        """Write each streaming reply's text if it changed (every half second)."""
        for stream in self._streams.values():
            now = (stream.text, stream.thinking())
            if now != stream.saved:
                self.store.update_reply(stream.message_id, now[0], now[1])
                stream.saved = now

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
            self._run_after_load()
        if self.current_id is not None:
            self.images_left_out.emit(self._images_unseen(self.current_id))
            shown = self.store.messages(self.current_id)
            if any(m.id in self._too_long_at for m in shown) and self.current_id not in self._streams:
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

    def _summary(self, conversation: Conversation) -> ConversationSummary:
        return ConversationSummary(
            conversation.id, conversation.title, datetime.fromtimestamp(conversation.updated)
        )

    def _show_path(self, conversation_id: int, path: list[Message] | None = None) -> None:
        """Bring the view in line with the conversation's path (``path``, if just read):
        only the rows from the first that differs are replaced."""
        if conversation_id != self.current_id:
            return
        path = self.store.messages(conversation_id) if path is None else path
        shown = self.view.messages()
        same = 0
        for data, message in zip(shown, path, strict=False):
            if (data.id, data.version, data.version_count) != (
                message.id,
                message.version,
                message.version_count,
            ):
                break
            same += 1
        if same < len(shown) or same < len(path):
            self.view.replace_from(same, (self._view_message(m) for m in path[same:]))

    def _view_message(self, message: Message) -> MessageData:
        stream = self._streams.get(message.conversation_id)
        streaming = stream if stream is not None and stream.message_id == message.id else None
        return view_message(message, streaming, can_regenerate=not self._would_fail_again(message))

    def _would_fail_again(self, message: Message) -> bool:
        """A reply that failed for want of context, while the model still has no more."""
        model = self.session.chat_model
        limit = self._too_long_at.get(message.id)
        return limit is not None and model is not None and model.context_per_conversation <= limit


def _writer(model: ChatModel) -> ReplyModel:
    label = model.label
    return ReplyModel(label.name, label.source, label.detail)
