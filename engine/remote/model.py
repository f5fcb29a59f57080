"""``RemoteModel``: a model on an OpenAI-compatible server, answering chats as a
``LoadedModel`` does (``engine.chat_model.ChatModel``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future

from engine.base.errors import EngineError
from engine.chat.traits import ChatTraits
from engine.chat_model import ModelLabel
from engine.remote.endpoint import RemoteModelInfo
from engine.remote.reply import RemoteReply
from engine.requests.handle import RequestHandle
from engine.requests.request import ChatRequest


class CannotMeasure(EngineError):
    """A remote prompt's size is not known before it is sent (the server tokenizes it)."""


class RemoteModel:
    """Each request streams on its own thread; nothing blocks the caller."""

    def __init__(self, info: RemoteModelInfo) -> None:
        self.info = info
        self._replies: dict[int, RemoteReply] = {}
        self._lock = threading.Lock()

    @property
    def label(self) -> ModelLabel:
        return ModelLabel(self.info.model_id, self.info.endpoint.base_url, f"via {self.info.endpoint.where}")

    @property
    def has_vision(self) -> bool:
        return False  # images stay in the chat; the server is sent their messages' text

    @property
    def chat_traits(self) -> ChatTraits | None:
        return None  # thinking arrives apart (reasoning_content): passed on as TextDelta.reasoning

    @property
    def context_per_conversation(self) -> int:
        return self.info.context_length

    def submit(
        self, request: ChatRequest, connect: Callable[[RequestHandle], None] | None = None
    ) -> RequestHandle:
        request.validate()
        handle = RequestHandle(request, canceller=self.cancel)
        reply = RemoteReply(self.info.endpoint, self.info.model_id, handle)
        if connect is not None:
            connect(handle)
        with self._lock:
            self._replies = {i: r for i, r in self._replies.items() if not r.handle.done}
            self._replies[request.request_id] = reply
        reply.start()
        return handle

    def cancel(self, request_id: int) -> None:
        with self._lock:
            reply = self._replies.pop(request_id, None)
        if reply is not None:
            reply.cancel()

    def measure_prompt(self, request: ChatRequest) -> Future:
        future: Future = Future()
        future.set_exception(CannotMeasure("The server counts this prompt's tokens when it is sent."))
        return future
