"""The window's tool loop (issue 29), between two rounds of a reply: the calls the model made
admitted (capped per round, repeats refused), each checked against its tool's schema, asked
about in the approval bar unless the user trusts the tool, run in order on the server, its
result recorded and saved; then the model is asked again with the results, until it answers
without calls or the round cap (said to it) is reached. Esc at any point stops the reply,
kept as interrupted with what ran."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from app.chat import MessageState
from app.chat.tool_approval import Decision, ToolApproval
from app.conversation.reply_in_flight import ReplyInFlight, ReplyStage
from app.conversation.shown import ShownConversation
from app.conversation.tool_blocks import pretty_arguments, progress_text
from app.conversation.tool_progress import CallStage
from app.store.history import Store
from engine import (
    CallStatus,
    ChatModel,
    ChatRequest,
    RemoteModel,
    ToolCall,
    ToolCallRecord,
    ToolLoopLimits,
    ToolSpec,
    continuation,
    rounds_cap_line,
    rounds_json,
)

if TYPE_CHECKING:
    from app.chat import MessageView
    from app.services.tools import ToolsService

DENIED = "The user denied this call. Do not call it again; answer without it."
GONE = "The tool {name} is no longer available: its server stopped or was switched off."
REMOTE_NO_TOOLS = "Tools run with local models: a remote server is sent the chat without them."


def trust_key(spec: ToolSpec) -> str:
    """What "Always for this tool" remembers: the tool of that server, not any of its name."""
    return f"{spec.server}/{spec.name}"


class ToolTurns(QObject):
    """The replies whose calls are being asked about or run, and what each decision does."""

    status = Signal(str)

    def __init__(
        self, store: Store, view: MessageView, shown: ShownConversation, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.store = store
        self.view = view
        self.shown = shown
        self.service: ToolsService | None = None
        self.approval: ToolApproval | None = None
        self.chat_on: Callable[[int], bool] = lambda _conversation_id: False
        self.limits = ToolLoopLimits()
        # Set by the reply runner: ask the model again / end a reply stopped in its calls.
        self.next_round: Callable[[ReplyInFlight, ChatRequest], None] = lambda _s, _r: None
        self.stopped: Callable[[ReplyInFlight], None] = lambda _s: None
        self._asking: dict[int, tuple[ReplyInFlight, ToolCall, ToolSpec]] = {}  # by conversation
        self._running: dict[tuple[int, str], ReplyInFlight] = {}  # by (message id, call id)

    def attach(self, service: ToolsService, approval: ToolApproval, chat_on: Callable[[int], bool]) -> None:
        self.service, self.approval, self.chat_on = service, approval, chat_on
        service.call_done.connect(self._call_done)
        approval.decided.connect(self._decided)

    # -- before a reply -----------------------------------------------------------------------

    def offer(self, conversation_id: int, model: ChatModel) -> tuple[dict[str, Any], ...]:
        """The tools a reply in this conversation is offered: none when the chat has them off,
        no server is ready, or the model is a remote server's."""
        if self.service is None or not self.chat_on(conversation_id):
            return ()
        tools = self.service.openai_tools()
        if tools and isinstance(model, RemoteModel):
            self.status.emit(REMOTE_NO_TOOLS)
            return ()
        return tools

    # -- a round's calls ------------------------------------------------------------------------

    def begin_round(self, stream: ReplyInFlight, calls: tuple[ToolCall, ...]) -> None:
        """The model wrote ``calls`` (in order): admit them, then do them one by one."""
        progress = stream.tools
        assert progress is not None and self.service is not None
        admitted = self.limits.admit(calls, progress.rounds)
        progress.pending = [
            item if isinstance(item, ToolCallRecord) else _checked(self.service.check(item), item)
            for item in admitted
        ]
        self._step(stream)

    def _step(self, stream: ReplyInFlight) -> None:
        progress = stream.tools
        assert progress is not None and self.service is not None
        call = progress.next_call()
        self._save(stream)
        if call is None:
            self._round_done(stream)
            return
        spec = self.service.check(call)
        if isinstance(spec, ToolCallRecord):  # it was checked when admitted: its server went
            self._record(stream, replace(spec, result=GONE.format(name=call.name)))
            return
        if self.service.trust.is_trusted(trust_key(spec)):
            self._run(stream, call)
            return
        progress.stage = CallStage.ASKING
        self._asking[stream.conversation_id] = (stream, call, spec)
        self._show(stream)
        self.show_ask()

    def show_ask(self) -> None:
        """The approval bar asks the shown conversation's question, if it has one."""
        if self.approval is None:
            return
        asked = self._asking.get(self.shown.current_id) if self.shown.current_id is not None else None
        if asked is None:
            self.approval.clear()
            return
        stream, call, spec = asked
        key = (stream.message_id, call.id)
        self.approval.ask(key, spec.name, spec.server, pretty_arguments(call.arguments))

    def _decided(self, key: object, decision: Decision) -> None:
        asked = {(a[0].message_id, a[1].id): cid for cid, a in self._asking.items()}
        if key not in asked:
            return
        stream, call, spec = self._asking.pop(asked[key])
        if decision is Decision.DENY:
            self._record(stream, ToolCallRecord(call, CallStatus.DENIED, DENIED, server=spec.server))
            return
        if decision is Decision.ALWAYS and self.service is not None:
            self.service.trust.trust(trust_key(spec))
        self._run(stream, call)

    def _run(self, stream: ReplyInFlight, call: ToolCall) -> None:
        assert stream.tools is not None and self.service is not None
        stream.tools.stage = CallStage.RUNNING
        self._running[(stream.message_id, call.id)] = stream
        self._show(stream)
        self.service.run_call((stream.message_id, call.id), call)

    def _call_done(self, token: object, record: ToolCallRecord) -> None:
        stream = self._running.pop(token, None)  # type: ignore[arg-type]
        if stream is not None and stream.stage is ReplyStage.TOOLS:
            self._record(stream, record)

    def _record(self, stream: ReplyInFlight, record: ToolCallRecord) -> None:
        assert stream.tools is not None
        stream.tools.record(record)
        self._step(stream)

    def _round_done(self, stream: ReplyInFlight) -> None:
        progress = stream.tools
        assert progress is not None and stream.request is not None
        progress.close_round()
        rounds = tuple(progress.rounds)
        request = continuation(stream.request, rounds, progress.offered, self.limits.max_rounds)
        if progress.offered and len(rounds) == self.limits.max_rounds:
            self.status.emit(rounds_cap_line(self.limits.max_rounds))
        progress.offered = request.tools  # none past the cap: the model was told to answer
        progress.new_round()
        self._show(stream)
        self.next_round(stream, replace(request, assistant_prefix=""))

    # -- stopping ----------------------------------------------------------------------------------

    def stop(self, stream: ReplyInFlight, end: bool = True) -> None:
        """Esc while the reply is in its calls: what ran is kept, the rest marked stopped
        (``end``: the reply ends here; else the window is closing and ends it)."""
        assert stream.tools is not None
        self._asking.pop(stream.conversation_id, None)
        for token in [t for t, s in self._running.items() if s is stream]:
            del self._running[token]
            if self.service is not None:
                self.service.cancel_calls(token)
        self.show_ask()
        rounds = stream.tools.all_rounds(stopped=True)
        self.store.save_tool_rounds(stream.message_id, rounds_json(rounds))
        # The round's text now lives in its round: kept as the reply's text too, it would be
        # shown, copied and sent back twice.
        stream.tools.rounds, stream.tools.pending, stream.tools.content = list(rounds), [], ""
        if end:
            self.stopped(stream)

    def forget(self, conversation_id: int) -> None:
        """The window closes or the reply ended otherwise: no question stays on show."""
        self._asking.pop(conversation_id, None)
        self.show_ask()

    # -- showing ------------------------------------------------------------------------------------

    def _save(self, stream: ReplyInFlight) -> None:
        assert stream.tools is not None
        self.store.save_tool_rounds(stream.message_id, rounds_json(stream.tools.all_rounds()))

    def _show(self, stream: ReplyInFlight) -> None:
        if stream.conversation_id == self.shown.current_id and stream.tools is not None:
            self.view.set_state(stream.message_id, MessageState.STREAMING, text=progress_text(stream.tools))


def _checked(spec_or_record: ToolSpec | ToolCallRecord, call: ToolCall) -> ToolCall | ToolCallRecord:
    return spec_or_record if isinstance(spec_or_record, ToolCallRecord) else call

