"""The endpoints: health, models, metrics, chat completions and completions.

A generation request is read and validated (``body``, ``mapping``), submitted to the
loaded model (``bridge``) and answered whole or as a stream (``responses``, ``sse``).
Headers are not sent until the engine has admitted the request, so a prompt too long for
the context is a 400 even for a stream. Whatever ends the request — its end, a refusal,
the client going away (aiohttp cancels the handler), the server stopping — its engine
request is cancelled on the way out, which frees its sequence at the next tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from app.api import metrics
from app.api.answer import stream_answer, whole_answer
from app.api.body import LARGE_BODY, read_json
from app.api.bridge import EngineStream
from app.api.documents import DocumentsSource, read_documents
from app.api.embeddings import EmbedderProvider, embeddings_response
from app.api.errors import ApiError, ErrorType, from_engine_error, no_model, server_stopping
from app.api.mapping import Endpoint, GenerationSpec, ModelFacts, map_request
from app.api.metrics import ServerCounters
from app.api.output import OutputShaper
from app.api.reply_cache import ReplyCache
from app.api.request_log import CLIENT_CLOSED, RequestLog, RequestRecord, printable
from app.api.responses import ResponseIds
from engine import ChatTraits, Completed, Completion, EngineError, Failed, LoadedModel, Prefill, TextDelta

log = logging.getLogger("hearth.api")

ModelProvider = Callable[[], LoadedModel | None]
"""The model to serve now (None: none is loaded). The window's changes as the user loads."""

STATS_TIMEOUT = 2.0  # seconds /metrics waits for the engine's stats (answered between batches)
HEAVY_MAPPINGS = 2  # large bodies (images) decoded at once on worker threads


def model_facts(model: LoadedModel) -> ModelFacts:
    info = model.plan.model
    return ModelFacts(
        name=printable(info.path.stem),
        display_name=info.display_name,
        context_per_conversation=model.context_per_conversation,
        has_vision=model.has_vision,
        traits=model.chat_traits or ChatTraits(),
    )


def client_name(request: web.Request) -> str:
    """The peer's address, and the client program's name from its User-Agent."""
    peer = request.remote or "unknown"
    agent = request.headers.get("User-Agent", "").split(" ", 1)[0][:32]
    return printable(f"{peer} · {agent}" if agent else peer)


@dataclass
class Outcome:
    """What one generation request's log line will say (filled in as it goes)."""

    status: int = 200
    error: str = ""
    stream: bool = False
    completion: Completion | None = None


@dataclass
class ServerState:
    """What the handlers share (event-loop thread)."""

    model: ModelProvider
    max_body_bytes: int
    embedder: EmbedderProvider | None = None
    embedder_refusal: str | None = None  # why no embedder is served (it did not fit)
    documents: DocumentsSource = field(default_factory=lambda: DocumentsSource(None, None))
    log: RequestLog = field(default_factory=RequestLog)
    counters: ServerCounters = field(default_factory=ServerCounters)
    replies: ReplyCache = field(default_factory=ReplyCache)
    streams: set[EngineStream] = field(default_factory=set)
    heavy: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(HEAVY_MAPPINGS))
    # The served model's facts and a weak reference to it: an unloaded model is not kept alive.
    _facts: tuple[weakref.ref[LoadedModel], ModelFacts] | None = None

    def facts(self, model: LoadedModel) -> ModelFacts:
        """``model``'s facts, taken once per loaded model (the first time it is served) and
        reused for every request to it; another model replaces them."""
        cached = self._facts
        if cached is None or cached[0]() is not model:
            cached = (weakref.ref(model), model_facts(model))
            self._facts = cached
        return cached[1]

    def ready_model(self) -> LoadedModel:
        model = self.model()
        if model is None:
            raise no_model()
        if not model.is_ready:
            raise ApiError(503, "The model is still loading.", ErrorType.UNAVAILABLE, code="model_loading",
                           retry_after=2)  # fmt: skip
        return model


class Routes:
    def __init__(self, state: ServerState) -> None:
        self.state = state

    def install(self, app: web.Application) -> None:
        r = app.router
        r.add_get("/health", self.health)
        r.add_get("/v1/health", self.health)
        r.add_get("/v1/models", self.models)
        r.add_get("/models", self.models)
        r.add_get("/metrics", self.metrics)
        r.add_post("/v1/chat/completions", self.chat_completions)
        r.add_post("/chat/completions", self.chat_completions)
        r.add_post("/v1/completions", self.completions)
        r.add_post("/completions", self.completions)
        r.add_post("/v1/embeddings", self.embeddings)
        r.add_post("/embeddings", self.embeddings)

    # -- small endpoints -------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        self.state.ready_model()
        return web.json_response({"status": "ok"})

    async def models(self, request: web.Request) -> web.Response:
        model = self.state.model()
        data = []
        if model is not None and model.is_ready:
            facts, info = self.state.facts(model), model.plan.model
            data.append({
                "id": facts.name,
                "object": "model",
                "created": int(info.path.stat().st_mtime) if info.path.exists() else 0,
                "owned_by": "hearth",
                "context_length": facts.context_per_conversation,
                "meta": {
                    "name": facts.display_name,
                    "architecture": info.architecture,
                    "n_ctx": facts.context_per_conversation,
                    "n_ctx_train": info.context_length,
                    "n_params": info.parameter_count,
                    "size": info.file_size,
                    "vision": facts.has_vision,
                    "parallel": model.plan.params.n_seq_max,
                },
            })  # fmt: skip
        return web.json_response({"object": "list", "data": data})

    async def metrics(self, request: web.Request) -> web.Response:
        model = self.state.model()
        stats = None
        if model is not None and model.is_ready:
            with contextlib.suppress(asyncio.TimeoutError, EngineError):
                stats = await asyncio.wait_for(asyncio.wrap_future(model.request_stats()), STATS_TIMEOUT)
        text = metrics.render(self.state.counters, stats)
        return web.Response(text=text, content_type="text/plain", charset="utf-8",
                            headers={"X-Content-Type-Options": "nosniff"})  # fmt: skip

    async def embeddings(self, request: web.Request) -> web.Response:
        arrived, t0 = time.time(), time.perf_counter()
        outcome = Outcome()
        try:
            embedder = self.state.embedder() if self.state.embedder is not None else None
            body, _ = await read_json(request, self.state.max_body_bytes)
            answer = await embeddings_response(body, embedder, self.state.embedder_refusal)
            return web.json_response(answer, dumps=_dumps)
        except ApiError as exc:
            outcome.status, outcome.error = exc.status, exc.message
            raise
        finally:
            self._record(request, arrived, time.perf_counter() - t0, outcome)

    # -- generation ------------------------------------------------------------------

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, Endpoint.CHAT)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, Endpoint.COMPLETION)

    async def _generate(self, request: web.Request, endpoint: Endpoint) -> web.StreamResponse:
        arrived, t0 = time.time(), time.perf_counter()
        outcome = Outcome()
        state = self.state
        state.counters.in_flight += 1
        try:
            return await self._serve(request, endpoint, outcome)
        except ApiError as exc:
            outcome.status, outcome.error = exc.status, exc.message
            raise
        except (asyncio.CancelledError, ConnectionResetError):
            outcome.status = CLIENT_CLOSED
            raise
        except Exception:
            outcome.status, outcome.error = 500, "internal error"
            raise
        finally:
            state.counters.in_flight -= 1
            self._record(request, arrived, time.perf_counter() - t0, outcome)

    async def _serve(self, request: web.Request, endpoint: Endpoint, outcome: Outcome) -> web.StreamResponse:
        state = self.state
        model = state.ready_model()
        body, size = await read_json(request, state.max_body_bytes)
        facts = state.facts(model)
        client = client_name(request)
        lookup = state.replies.lookup
        if size > LARGE_BODY:
            async with state.heavy:
                spec = await asyncio.to_thread(map_request, body, endpoint, facts, client, lookup)
        else:
            spec = map_request(body, endpoint, facts, client, lookup)
        outcome.stream = spec.stream
        if endpoint is Endpoint.CHAT and (ask := read_documents(body)) is not None:
            spec = await state.documents.ground(spec, ask, facts.context_per_conversation)
        if model is not state.model():  # replaced while the body was read
            model = state.ready_model()
        try:
            stream = EngineStream.submit(model, spec.request)
        except EngineError as exc:
            raise from_engine_error(exc) from None
        state.streams.add(stream)
        try:
            first = await _admitted(stream)
            ids = ResponseIds(endpoint, facts.name)

            def finished(completion: Completion, shaper: OutputShaper | None) -> None:
                self._finished(spec, completion, shaper, outcome)

            if spec.stream:
                response, end = await stream_answer(request, spec, ids, stream, first, finished)
                if end.error is not None:
                    outcome.status, outcome.error = end.error.status, end.error.message
                return response
            completion = first.completion if isinstance(first, Completed) else await _completion(stream)
            return web.json_response(whole_answer(spec, ids, completion, finished), dumps=_dumps)
        finally:
            stream.cancel()
            state.streams.discard(stream)

    def _finished(
        self, spec: GenerationSpec, completion: Completion, shaper: OutputShaper | None, outcome: Outcome
    ) -> None:
        outcome.completion = completion
        # Only a reply sent back as the model wrote it can be matched by its text next turn.
        plain = shaper is None or shaper.plain
        if spec.endpoint is Endpoint.CHAT and not spec.request.assistant_prefix and plain:
            self.state.replies.remember(completion)

    def _record(self, request: web.Request, arrived: float, seconds: float, outcome: Outcome) -> None:
        c = outcome.completion
        u = c.usage if c is not None else None
        record = RequestRecord(
            time=arrived,
            client=client_name(request),
            method=request.method,
            path=request.path,
            status=outcome.status,
            seconds=seconds,
            prompt_tokens=u.prompt_tokens if u else 0,
            cached_tokens=u.cached_tokens if u else 0,
            completion_tokens=u.completion_tokens if u else 0,
            tokens_per_second=c.timings.decode_tokens_per_second if c is not None else 0.0,
            stream=outcome.stream,
            error=printable(outcome.error),
        )
        self.state.counters.count(record)
        self.state.log.add(record)


async def _admitted(stream: EngineStream) -> object:
    """The first event after the request left the queue (a prompt the engine refused is
    raised here as its ApiError, before any header is sent)."""
    while True:
        event = await stream.next_event()
        if isinstance(event, Failed):
            raise from_engine_error(event.error)
        if isinstance(event, Prefill | TextDelta | Completed):  # not Queued: it has a sequence
            return event


async def _completion(stream: EngineStream) -> Completion:
    async for event in stream:
        if isinstance(event, Completed):
            if stream.server_stopping:
                raise server_stopping()
            return event.completion
        if isinstance(event, Failed):
            raise from_engine_error(event.error)
    raise ApiError(500, "The engine ended the request without an answer.", ErrorType.SERVER)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
