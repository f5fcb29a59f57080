"""Submitting a reply and following it: the request made from the conversation's path, its
progress (queued and why, reading the prompt, thinking, writing) shown in the view and the
conversation list, the text saved every half second, and its end stored as complete,
stopped, interrupted or failed.

Several conversations can generate at once: each keeps its own request handle. Killing the
app at any moment loses at most the last half second of a reply, which reopens as interrupted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from app.chat import Composer, ConversationList, MessageState, MessageView, ReplyStats, SamplingSettings
from app.conversation.document_context import Grounded
from app.conversation.history_builder import HistoryBuilder
from app.conversation.refusals import NO_MODEL
from app.conversation.reply_in_flight import ReplyInFlight, ReplyStage, why_waiting
from app.conversation.shown import ShownConversation
from app.conversation.thinking import ReplySplit
from app.conversation.tool_progress import ToolProgress
from app.conversation.tool_turns import ToolTurns
from app.services.model_session import ModelSession
from app.store.history import Message, ReplyModel, Store
from app.store.history import MessageState as StoredState
from engine import (
    ChatModel,
    ChatRequest,
    Completion,
    EngineError,
    PromptTooLong,
    ReplyInterrupted,
    RequestHandle,
    StopReason,
    TextDelta,
    continuation,
    rounds_from_json,
    rounds_json,
)

SAVE_INTERVAL_MS = 500
PROMPT_TOO_LONG = "prompt_too_long"  # a failed reply's stop reason: the chat outgrew the context

# Makes the reply row: begin_reply, regenerate_reply or resume_reply, given who writes it.
StartReply = Callable[[ReplyModel, dict[str, Any]], Message]


class ReplyRunner(QObject):
    """The replies generating, by conversation id, and what happens to each as it streams."""

    status = Signal(str)  # one-line messages for the status bar
    streaming_changed = Signal(int)  # how many replies are generating
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
        history: HistoryBuilder,
        shown: ShownConversation,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.store = store
        self.session = session
        self.view = view
        self.composer = composer
        self.conversations = conversations
        self.history = history
        self.shown = shown
        self.streams: dict[int, ReplyInFlight] = {}  # by conversation id
        self.too_long_at: dict[int, int] = {}  # reply id -> the context it did not fit in
        self._save_timer = QTimer(self)
        self._save_timer.setInterval(SAVE_INTERVAL_MS)
        self._save_timer.timeout.connect(self.save_streaming)
        self._closing = False
        self._submit_error = EngineError("")
        # Tools (issue 29): a reply's calls between its rounds; attached to a ToolsService
        # by the window (app/window/chat_tools.py), offering none until then.
        self.tool_turns = ToolTurns(store, view, shown, self)
        self.tool_turns.next_round = self._next_round
        self.tool_turns.stopped = self._tools_stopped
        self.tool_turns.status.connect(self.status)

    def __contains__(self, conversation_id: object) -> bool:
        """Whether the conversation is generating."""
        return conversation_id in self.streams

    def stream_of(self, message: Message) -> ReplyInFlight | None:
        """The reply in flight that writes ``message``, if one does."""
        stream = self.streams.get(message.conversation_id)
        return stream if stream is not None and stream.message_id == message.id else None

    def would_fail_again(self, message: Message) -> bool:
        """A reply that failed for want of context, while the model still has no more."""
        model = self.session.chat_model
        limit = self.too_long_at.get(message.id)
        return limit is not None and model is not None and model.context_per_conversation <= limit

    def shutdown(self) -> None:
        """The window is closing: every streaming reply is saved as interrupted (continued or
        regenerated next time), and what its request says after this is not listened to, as
        the store closes next."""
        self._closing = True
        self._save_timer.stop()
        for stream in list(self.streams.values()):
            if stream.tools is not None and stream.stage is ReplyStage.TOOLS:
                self.tool_turns.stop(stream, end=False)
            self.store.finish_reply(
                stream.message_id, stream.text, StoredState.INTERRUPTED, thinking=stream.thinking()
            )
            if stream.handle is not None:
                stream.handle.cancel()
        self.streams.clear()

    def cancel(self, conversation_id: int) -> None:
        stream = self.streams.get(conversation_id)
        if stream is not None and stream.stage is ReplyStage.TOOLS:
            self.tool_turns.stop(stream)
        elif stream is not None and stream.handle is not None:
            stream.handle.cancel()

    # -- submitting -----------------------------------------------------------------------

    def generate(
        self, conversation_id: int, start: StartReply, resume: bool = False, grounded: Grounded | None = None
    ) -> None:
        """Answer the conversation's path in a reply row made by ``start`` (which goes on
        with the row's text when ``resume``), streamed into the view and the store;
        ``grounded``: the excerpts its question is asked with (saved with a new reply)."""
        model = self.session.chat_model
        if model is None:
            self.status.emit(NO_MODEL)
            return
        conversation = self.store.get_conversation(conversation_id)
        settings = SamplingSettings.from_dict(conversation.sampling or {})
        settings = replace(settings, system_prompt=conversation.system_prompt or "")
        reply = start(_writer(model), settings.to_dict())
        if grounded is not None and not resume:
            self.store.save_grounding(reply.id, grounded.grounding, grounded.sources(), grounded.error)
        path = self.store.messages(conversation_id)
        # A reasoning model's reply is split into its thinking and its answer as it streams;
        # a continued one goes on from where its thinking or answer was cut off.
        if resume:
            split, prefix = ReplySplit.resuming(
                model.chat_traits, reply.text, reply.thinking, time.monotonic()
            )
        else:
            split, prefix = ReplySplit(model.chat_traits), ""
        offered = self.tool_turns.offer(conversation_id, model)
        earlier = rounds_from_json(reply.tool_rounds) if resume and reply.tool_rounds else ()
        try:
            sees = model.has_vision
            retrieval = grounded.retrieval if grounded is not None else None
            request = self.history.reply_request(
                conversation, path, reply, settings, prefix, sees,
                retrieval, tools=offered,
            )  # fmt: skip
        except EngineError as exc:
            self._fail_to_start(reply, exc)
            return
        stream = ReplyInFlight(
            conversation_id, reply.id, None, split, saved=(reply.text, reply.thinking), resumed=resume
        )
        if offered or earlier:
            stream.request = request
            if earlier:  # a reply continued after its calls: they go before where it goes on
                capped = continuation(request, earlier, offered, self.tool_turns.limits.max_rounds)
                request, offered = replace(capped, assistant_prefix=prefix), capped.tools
            known = tuple(spec["function"]["name"] for spec in stream.request.tools)
            stream.tools = ToolProgress(offered, model.chat_traits.tool_format, list(earlier), known=known)
            stream.tools.content = reply.text if resume else ""
        if not self._submit(stream, model, request):
            self._fail_to_start(reply, self._submit_error)
            return
        self.streams[conversation_id] = stream
        if conversation_id == self.shown.current_id:
            self.view.undo_bar.dismiss()  # the conversation moved on: the delete is final
            if resume:
                self.view.set_state(
                    reply.id, MessageState.STREAMING, text=stream.shown_text, thought=stream.thought()
                )
            else:
                self.shown.show_path(conversation_id, path)
            self.view.scroll_to_bottom()
            self.composer.set_generating(True)
        self._set_stage(stream, ReplyStage.WAITING)
        self._save_timer.start()
        self.streaming_changed.emit(len(self.streams))

    def _submit(self, stream: ReplyInFlight, model: ChatModel, request: ChatRequest) -> bool:
        """Hand ``request`` to the model, its events followed on ``stream`` (False: refused,
        ``_submit_error`` says why)."""

        def connect(handle: RequestHandle) -> None:
            handle.signals_only()  # the reply streams through the signals: no event queue
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
            self._submit_error = exc
            return False
        return True

    # -- between rounds of tool calls ---------------------------------------------------------

    def _next_round(self, stream: ReplyInFlight, request: ChatRequest) -> None:
        """The round's calls are done: the model is asked again, in the same reply."""
        model = self.session.chat_model
        if self._closing or self.streams.get(stream.conversation_id) is not stream:
            return
        error = EngineError(NO_MODEL) if model is None else None
        if model is not None:
            stream.split = ReplySplit(model.chat_traits)
            stream.stage = ReplyStage.WAITING
            if self._submit(stream, model, request):
                self._set_stage(stream, ReplyStage.WAITING)
                return
            error = self._submit_error
        assert error is not None
        self.store.finish_reply(stream.message_id, stream.text, StoredState.INTERRUPTED, error=error.message)
        self._end(stream, MessageState.INTERRUPTED, error=error.message)
        self.status.emit(error.message)

    def _tools_stopped(self, stream: ReplyInFlight) -> None:
        """Esc while the reply was in its calls: kept as interrupted, with what ran."""
        self.store.finish_reply(
            stream.message_id, stream.text, StoredState.INTERRUPTED, thinking=stream.thinking()
        )
        self._end(stream, MessageState.INTERRUPTED)

    def _fail_to_start(self, reply: Message, error: EngineError) -> None:
        self.store.finish_reply(reply.id, reply.text, StoredState.FAILED, error=error.message)
        self.shown.show_path(reply.conversation_id)
        if reply.conversation_id == self.shown.current_id:
            self.view.set_state(reply.id, MessageState.FAILED, error=error.message)
        self.status.emit(error.message)

    # -- waiting for a slot -----------------------------------------------------------------

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
        parallel = self.parallel()
        for stream in self.streams.values():
            if stream.stage is not ReplyStage.WAITING or stream.queued_at is None:
                continue
            wait = why_waiting(stream, self.streams.values(), parallel)
            if wait != stream.waiting:
                stream.waiting = wait
                self._set_stage(stream, stream.stage)  # the list says "waiting for a slot"
                if stream.conversation_id == self.shown.current_id:
                    self.view.set_queued(stream.message_id, wait)

    def parallel(self) -> int:
        """Conversations the answering model serves at once (0: not known, a remote one)."""
        model = self.session.ready_model
        if model is None or self.session.chat_model is not model:
            return 0
        return model.plan.params.n_seq_max

    def more_parallel(self, _message_id: object) -> None:
        if parallel := self.parallel():
            self.parallel_wanted.emit(parallel + 1)

    # -- streaming ----------------------------------------------------------------------------

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
        if stream.conversation_id == self.shown.current_id:
            self.view.set_prefill(stream.message_id, done, total, cached, images_done, images)

    def _on_delta(self, stream: ReplyInFlight, delta: TextDelta) -> None:
        if self._closing:
            return
        split = stream.split
        before = (split.thinking, split.tokens, len(split.thought))
        _thought, answer = split.feed(delta.text, delta.pieces, time.monotonic(), delta.reasoning)
        if stream.tools is not None:
            answer = stream.tools.feed(answer)  # its calls held back: they show as blocks
        # The block's count moves with tokens that carry no text yet (a tag being held).
        self._show_delta(stream, before != (split.thinking, split.tokens, len(split.thought)), answer)

    def _show_delta(self, stream: ReplyInFlight, thought_changed: bool, answer: str) -> None:
        stage = ReplyStage.THINKING if stream.split.thinking else ReplyStage.WRITING
        if stream.stage is not stage:
            self._set_stage(stream, stage)
        if stream.conversation_id != self.shown.current_id:
            return
        shown = stream.thought()
        if thought_changed and shown is not None:
            self.view.update_thought(stream.message_id, shown)
        if answer:
            self.view.append_delta(stream.message_id, answer)

    def _set_stage(self, stream: ReplyInFlight, stage: ReplyStage) -> None:
        stream.stage = stage
        self.conversations.set_busy(stream.conversation_id, True, stream.stage_text)

    def save_streaming(self) -> None:
        """Write each streaming reply's text if it changed (every half second)."""
        for stream in self.streams.values():
            now = (stream.text, stream.thinking())
            if now != stream.saved:
                self.store.update_reply(stream.message_id, now[0], now[1])
                stream.saved = now

    # -- the end ------------------------------------------------------------------------------

    def _on_completed(self, stream: ReplyInFlight, completion: Completion) -> None:
        if self._closing:
            return
        stream.split.finish(time.monotonic())
        cancelled = completion.stop_reason is StopReason.CANCELLED
        if stream.tools is not None:
            tail, calls = stream.tools.finish()
            self._show_delta(stream, False, tail)
            if calls and not cancelled:
                # The stage first: a round whose calls are all refused ends at once, and the
                # next round's submit (or the reply's end) must not be overwritten after it.
                self._set_stage(stream, ReplyStage.TOOLS)
                self.tool_turns.begin_round(stream, calls)
                return
            self.store.save_tool_rounds(stream.message_id, rounds_json(stream.tools.rounds))
        stats = ReplyStats.from_completion(completion)
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
            self.too_long_at[stream.message_id] = model.context_per_conversation
            if stream.conversation_id == self.shown.current_id:
                self.shown.select(stream.conversation_id)

    def _end(
        self, stream: ReplyInFlight, state: MessageState, stats: ReplyStats | None = None, error: str = ""
    ) -> None:
        self.streams.pop(stream.conversation_id, None)
        self.tool_turns.forget(stream.conversation_id)
        self.conversations.set_busy(stream.conversation_id, False)
        if stream.stage is ReplyStage.WAITING:
            self._explain_waits()  # one fewer waiting ahead of the others
        if stream.conversation_id == self.shown.current_id:
            self.view.set_state(
                stream.message_id, state, stats=stats, error=error, text=stream.shown_text,
                thought=stream.thought(),
            )  # fmt: skip
            shown = self.view.message(stream.message_id)
            if stream.tools is not None and shown is not None:
                self.view.update_message(replace(shown, copy_text=stream.copy_text))
            self.composer.set_generating(False)
        if not self.streams:
            self._save_timer.stop()
        self.shown.refresh_list()
        self.streaming_changed.emit(len(self.streams))
        if stream.conversation_id == self.shown.current_id:
            self.shown.measure_draft()  # the reply is part of the context now


def _writer(model: ChatModel) -> ReplyModel:
    label = model.label
    return ReplyModel(label.name, label.source, label.detail)
