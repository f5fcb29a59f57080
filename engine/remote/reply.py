"""One reply streamed from a remote server, on its own thread, published on a
``RequestHandle`` as the executor publishes a local one: Started, TextDelta (coalesced to
~30 a second), then Completed or Failed.

A stop (``cancel``) ends the handle at once with the text so far, from the caller's thread,
and closes the connection (servers stop generating when their client goes); the thread
then ends quietly. A stream that breaks after text arrived fails with RemoteInterrupted,
so the reply is kept as interrupted and can be continued.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from engine.remote.endpoint import READ_TIMEOUT_S, RemoteEndpoint
from engine.remote.errors import RemoteError, RemoteInterrupted, RemoteRefused, translate, transport_errors
from engine.remote.wire import chat_body, chunk_parts, stop_reason, timings
from engine.requests.completion import Completion, StopReason, Usage
from engine.requests.events import Completed, Failed, Started, TextDelta
from engine.requests.handle import RequestHandle
from engine.requests.request import ChatRequest


class RemoteReply:
    def __init__(self, endpoint: RemoteEndpoint, model_id: str, handle: RequestHandle) -> None:
        self.endpoint = endpoint
        self.model_id = model_id
        self.handle = handle
        self.request: ChatRequest = handle.request
        self._lock = threading.Lock()  # publishing: this thread and a stop from another
        self._ended = False
        self._stream: Any = None  # the SDK's Stream, closed by a stop
        self._text = ""  # the answer's text, for the Completion
        self._reasoning = ""  # the thinking, which the server sends apart (reasoning_content)
        self._pending: list[str] = []  # pieces of text not yet published
        self._pending_reasoning: list[str] = []  # and of thinking
        self._last_emit = 0.0
        self._t0 = time.monotonic()
        self._t_first: float | None = None
        self._usage: Usage | None = None
        self._timings: dict[str, Any] | None = None
        self._finish: str | None = None
        self._chunks = 0
        self._thread = threading.Thread(target=self._run, name="hearth-remote-reply", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    # -- the caller's thread -----------------------------------------------------------------

    def cancel(self) -> None:
        with self._lock:
            if self._ended:
                return
            self._flush_locked()
            self._end_locked(Completed(self._completion(StopReason.CANCELLED)))
            stream = self._stream
        if stream is not None:
            with contextlib.suppress(Exception):  # closing a connection that is going anyway
                stream.close()

    # -- the reply's thread ------------------------------------------------------------------

    def _run(self) -> None:
        client = self.endpoint.client()
        try:
            stream = client.chat.completions.create(**chat_body(self.request, self.model_id))
            with self._lock:
                if self._ended:  # stopped while connecting
                    stream.close()
                    return
                self._stream = stream
            for chunk in stream:
                self._take(chunk)
                if self._ended:
                    return
        except Exception as exc:
            self._fail(exc)
            return
        finally:
            if self._stream is not None:
                self._stream.close()
            client.close()
        if self._finish is None:
            self._fail(None)  # the body ended without a finish: the server went away
            return
        with self._lock:
            if not self._ended:
                self._flush_locked()
                self._end_locked(Completed(self._completion(stop_reason(self._finish))))

    def _take(self, chunk: Any) -> None:
        parts = chunk_parts(chunk)
        self._usage = parts.usage or self._usage
        self._timings = parts.timings or self._timings
        self._finish = parts.finish_reason or self._finish
        # A reasoning model's thinking comes apart (reasoning_content): it is passed on apart
        # (TextDelta.reasoning), never wrapped in tags for someone to split out again.
        if not parts.reasoning and not parts.content:
            return
        self._chunks += 1  # about a token each: the count when the server reports no usage
        now = time.monotonic()
        with self._lock:
            if self._ended:
                return
            if self._t_first is None:
                self._t_first = now
                self.handle._publish(Started())
            if parts.reasoning:
                self._reasoning += parts.reasoning
                self._pending_reasoning.append(parts.reasoning)
            if parts.content:
                self._text += parts.content
                self._pending.append(parts.content)
            if now - self._last_emit >= self.request.text_interval():
                self._flush_locked()

    def _fail(self, exc: BaseException | None) -> None:
        with self._lock:
            if self._ended:
                return  # stopped: the closed connection is why the stream broke
            where = self.endpoint.where
            error: RemoteError
            if self._t_first is not None:
                # Text arrived: keep it. Whatever broke, the reply can be continued.
                self._flush_locked()
                if exc is None or isinstance(exc, transport_errors()[1]):
                    why = f"the connection to {where} was lost mid-reply"
                else:  # the server said why (an error event in the stream)
                    why = translate(exc, where, READ_TIMEOUT_S).message.rstrip(".")
                error = RemoteInterrupted(f"Interrupted: {why}")
            elif exc is None:
                error = RemoteRefused(f"{where} ended the reply before it began.")
            else:
                error = translate(exc, where, READ_TIMEOUT_S)
            self._end_locked(Failed(error))

    def _flush_locked(self) -> None:
        if self._pending or self._pending_reasoning:
            pieces, self._pending = tuple(self._pending), []
            reasoning, self._pending_reasoning = tuple(self._pending_reasoning), []
            self.handle._publish(TextDelta("".join(pieces), pieces=pieces, reasoning=reasoning))
        self._last_emit = time.monotonic()

    def _end_locked(self, event: Completed | Failed) -> None:
        self._ended = True
        self.handle._publish(event)

    def _completion(self, reason: StopReason) -> Completion:
        now = time.monotonic()
        first = self._t_first if self._t_first is not None else now
        usage = self._usage or Usage(0, 0, self._chunks)
        return Completion(
            text=self._text,
            reasoning=self._reasoning,
            stop_reason=reason,
            usage=usage,
            timings=timings(self._timings, first - self._t0, now - first, usage.completion_tokens),
        )
