"""Writing the answer to one generation request: whole (one JSON body) or streamed (SSE),
for chat completions and raw completions, from the engine's events."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from app.api.bridge import EngineStream
from app.api.errors import ApiError, ErrorType, from_engine_error, server_stopping
from app.api.logprobs import chat_logprobs, completion_logprobs
from app.api.mapping import Endpoint, GenerationSpec
from app.api.output import OutputShaper, Piece
from app.api.responses import ResponseIds, finish_reason, piece_delta
from app.api.sse import EventStream
from engine import Completed, Completion, Failed, TextDelta, TokenLogprob

Finished = Callable[[Completion, OutputShaper | None], None]
"""Told the request's completion (and how its chat answer was shaped) once it ends."""


@dataclass(frozen=True)
class StreamEnd:
    """How a stream ended: the completion, or the error sent in the stream instead."""

    completion: Completion | None = None
    error: ApiError | None = None


def whole_answer(spec: GenerationSpec, ids: ResponseIds, completion: Completion, finished: Finished) -> dict:
    if spec.endpoint is Endpoint.COMPLETION:
        finished(completion, None)
        logprobs = None
        if spec.logprobs is not None:
            logprobs = completion_logprobs(completion.logprobs, with_top=spec.logprobs > 0)
        return ids.text_completion(completion, logprobs)
    shaper = OutputShaper(spec.output)
    shaper.feed(completion.text)
    shaper.finish()
    finished(completion, shaper)
    logprobs = chat_logprobs(completion.logprobs) if spec.logprobs is not None else None
    answer = ids.chat_completion(completion, shaper, logprobs)
    if spec.sources:
        answer["sources"] = list(spec.sources)
    return answer


async def next_event(stream: EngineStream) -> object:
    return await stream.next_event()


async def stream_answer(
    request: web.Request,
    spec: GenerationSpec,
    ids: ResponseIds,
    stream: EngineStream,
    first: object,
    finished: Finished,
) -> tuple[web.StreamResponse, StreamEnd]:
    """Headers now (the engine has admitted the request), then a chunk per piece of text."""
    sse = EventStream(request)
    await sse.open()
    chat = spec.endpoint is Endpoint.CHAT
    writer = _ChatWriter(spec, ids, sse.send) if chat else _TextWriter(spec, ids, sse.send)
    await writer.start()
    event = first
    while True:
        if isinstance(event, TextDelta):
            await writer.delta(event.text, event.logprobs)
        elif isinstance(event, Completed) and stream.server_stopping:
            error = server_stopping()
            finished(event.completion, None)
            await sse.send(error.body())  # no finish reason, no [DONE]: the reply is cut short
            await sse.response.write_eof()
            return sse.response, StreamEnd(event.completion, error)
        elif isinstance(event, Completed):
            await writer.end(event.completion, finished)
            if spec.include_usage:
                await sse.send(ids.usage_chunk(event.completion))
            await sse.close()
            return sse.response, StreamEnd(event.completion)
        elif isinstance(event, Failed):
            error = from_engine_error(event.error)
            await sse.send(error.body())  # the SDK raises it as an APIError
            await sse.response.write_eof()
            return sse.response, StreamEnd(error=error)
        event = await stream.next_event()


Send = Callable[[dict], Awaitable[None]]


class _ChatWriter:
    """Chat chunks: the role first, then content / reasoning / tool-call deltas, the finish
    reason in a last chunk of its own."""

    def __init__(self, spec: GenerationSpec, ids: ResponseIds, send: Send) -> None:
        self._spec, self._ids, self._send = spec, ids, send
        self._shaper = OutputShaper(spec.output)
        self._usage = spec.include_usage
        self._logprobs: list[TokenLogprob] = []  # taken, not yet sent with a chunk

    async def start(self) -> None:
        await self._send(self._ids.chat_chunk({"role": "assistant", "content": ""}, with_usage=self._usage))

    async def delta(self, text: str, logprobs: tuple[TokenLogprob, ...]) -> None:
        if self._spec.logprobs is not None:
            self._logprobs += logprobs
        await self._pieces(self._shaper.feed(text) if text else [])

    async def end(self, completion: Completion, finished: Finished) -> None:
        await self._pieces(self._shaper.finish())
        finished(completion, self._shaper)
        reason = self._shaper.finish_reason(completion.stop_reason)
        last = self._ids.chat_chunk({}, reason, logprobs=self._take(), with_usage=self._usage)
        if self._spec.sources:
            last["sources"] = list(self._spec.sources)
        await self._send(last)

    async def _pieces(self, pieces: list[Piece]) -> None:
        for piece in pieces:
            # A delta's log probabilities ride with the first chunk made from it (text the
            # parsers hold back sends them later, with the chunk that carries it).
            chunk = self._ids.chat_chunk(piece_delta(piece), logprobs=self._take(), with_usage=self._usage)
            await self._send(chunk)

    def _take(self) -> dict | None:
        if not self._logprobs:
            return None
        taken, self._logprobs = self._logprobs, []
        return chat_logprobs(taken)


class _TextWriter:
    """Raw completion chunks: each delta's text (and log probabilities) as it comes."""

    def __init__(self, spec: GenerationSpec, ids: ResponseIds, send: Send) -> None:
        self._spec, self._ids, self._send = spec, ids, send
        self._usage = spec.include_usage
        self._offset = 0

    async def start(self) -> None:
        pass

    async def delta(self, text: str, logprobs: tuple[TokenLogprob, ...]) -> None:
        n = self._spec.logprobs
        if not text and not (n is not None and logprobs):
            return
        shown = completion_logprobs(logprobs, n > 0, self._offset) if n is not None else None
        self._offset += len(text)
        await self._send(self._ids.text_chunk(text, logprobs=shown, with_usage=self._usage))

    async def end(self, completion: Completion, finished: Finished) -> None:
        finished(completion, None)
        reason = finish_reason(completion.stop_reason)
        await self._send(self._ids.text_chunk("", reason, with_usage=self._usage))


__all__ = ["ApiError", "ErrorType", "StreamEnd", "stream_answer", "whole_answer"]
