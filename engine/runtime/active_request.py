"""A request the executor is serving: everything it tracks about it, the events it is due,
and its completion."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from engine.chat import TextStream
from engine.multimodal import TokenizedPrompt
from engine.requests.completion import Completion, StopReason, Timings, TokenLogprob, Usage
from engine.requests.events import Prefill, Started, TextDelta
from engine.requests.handle import RequestHandle
from engine.requests.request import DEFAULT_TEXT_INTERVAL_S, ChatRequest
from engine.runtime.token_sampler import TokenSampler
from engine.scheduler import SequenceProgress
from engine.speculation.request_state import RequestSpeculation

# A request's text interval unless it asks for its own; the only throttle between sampling
# and the screen.
DELTA_INTERVAL = DEFAULT_TEXT_INTERVAL_S
PREFILL_EVENT_INTERVAL = 0.1


@dataclass(eq=False)
class ActiveRequest:
    """A request with a sequence: its progress, sampler, text so far, timings and drafts."""

    handle: RequestHandle
    progress: SequenceProgress
    sampler: TokenSampler | None
    stream: TextStream
    prompt_tokens: int
    cached_tokens: int
    t_submit: float
    t_admit: float
    t_prefill_done: float = 0.0
    t_first_token: float = 0.0
    t_last_prefill_event: float = 0.0
    t_last_flush: float = 0.0
    pending_text: list[str] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)  # one per token, when asked for
    pending_logprobs: list[TokenLogprob] = field(default_factory=list)  # not yet in a delta
    pending_pieces: list[str] = field(default_factory=list)  # each token's text, not yet in a delta
    cancelled: bool = False
    media: tuple[TokenizedPrompt, ...] = ()  # image chunks this request may evaluate
    speculation: RequestSpeculation | None = None  # None: this request does not draft

    @property
    def request(self) -> ChatRequest:
        return self.handle.request

    @property
    def sequence_id(self) -> int:
        return self.progress.sequence_id

    @property
    def owner(self) -> str:
        return self.request.owner or f"request {self.handle.request_id}"

    def take_tokens(
        self,
        tokens: Iterable[int],
        is_end: Callable[[int], bool],
        piece: Callable[[int], bytes],
        n_ctx_seq: int,
        logprobs: Sequence[TokenLogprob] = (),
    ) -> StopReason | None:
        """Take sampled tokens in order, stopping at the first stop condition (so an
        accepted draft run never goes past the end); the reason it stopped, or None.
        ``logprobs``: one per sampled token, when the request asked for them."""
        for index, token in enumerate(tokens):
            if not self.tokens and not self.t_first_token:
                self.t_first_token = time.perf_counter()
                self.handle._publish(Started())
            if is_end(token) and not self.request.ignore_eos:
                return StopReason.STOP_TOKEN
            self.tokens.append(token)
            if logprobs:
                self.logprobs.append(logprobs[index])
                self.pending_logprobs.append(logprobs[index])
            chunk = self.stream.push(piece(token))
            self.pending_pieces.append(chunk.text)
            if chunk.text:
                self.pending_text.append(chunk.text)
            if chunk.stopped:
                return StopReason.STOP_STRING
            if len(self.tokens) >= self.request.max_tokens:
                return StopReason.LENGTH
        if self.progress.n_past >= n_ctx_seq:
            return StopReason.CONTEXT_FULL
        return None

    def text_due(self, now: float, force: bool = False) -> TextDelta | None:
        """The text sampled since the last delta (with its tokens' log-probabilities), once
        the request's text interval (else ``DELTA_INTERVAL``) has passed (or now, with
        ``force``); None while nothing is due. A forced delta may carry only
        log-probabilities (tokens whose text was held back)."""
        interval = self.request.text_interval(DELTA_INTERVAL)
        if not force and (not self.pending_text or now - self.t_last_flush < interval):
            return None
        if not self.pending_text and not self.pending_logprobs:
            return None
        text = "".join(self.pending_text)
        self.pending_text.clear()
        self.t_last_flush = now
        self.text.append(text)
        pieces = tuple(self.pending_pieces)
        self.pending_pieces.clear()
        delta = TextDelta(text, tuple(self.pending_logprobs), pieces)
        self.pending_logprobs.clear()
        return delta

    def prefill_due(self, now: float, force: bool = False) -> Prefill | None:
        """Prompt progress, at most every ``PREFILL_EVENT_INTERVAL`` until it is done."""
        progress = self.progress
        done = progress.cursor.logical_tokens
        total = progress.prompt.logical_tokens
        if not force and done < total and now - self.t_last_prefill_event < PREFILL_EVENT_INTERVAL:
            return None
        self.t_last_prefill_event = now
        images_total = progress.prompt.media_count
        images_done = progress.prompt.truncate(progress.cursor).media_count if images_total else 0
        return Prefill(done, total, self.cached_tokens, images_done, images_total)

    def completion(self, reason: StopReason, now: float, model_identity: str) -> Completion:
        """What the request's handle reports when it ends: text, usage and timings."""
        progress = self.progress
        first = self.t_first_token or now
        prefill_done = self.t_prefill_done or now
        computed = max(0, progress.cursor.logical_tokens - self.cached_tokens)
        prefill_s = max(prefill_done - self.t_admit, 1e-9)
        decode_s = max(now - first, 0.0)
        n_out = len(self.tokens)
        timings = Timings(
            queued=self.t_admit - self.t_submit,
            ttft=(first - self.t_admit) if self.t_first_token else 0.0,  # the queue is ``queued``
            prefill_seconds=prefill_s,
            decode_seconds=decode_s,
            prefill_tokens_per_second=computed / prefill_s if computed else 0.0,
            decode_tokens_per_second=(n_out - 1) / decode_s if n_out > 1 and decode_s > 0 else 0.0,
        )
        prompt = progress.prompt
        usage = Usage(
            self.prompt_tokens,
            self.cached_tokens,
            n_out,
            images=prompt.media_count,
            cached_images=prompt.truncate(progress.cached).media_count if prompt.media_count else 0,
        )
        completion = Completion(
            "".join(self.text),
            reason,
            usage,
            timings,
            tuple(self.tokens),
            self.speculation.drafted if self.speculation else 0,
            self.speculation.accepted if self.speculation else 0,
            model_identity,
            tuple(self.logprobs),
        )
        return completion
