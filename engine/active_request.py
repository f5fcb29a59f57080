"""A request the executor is serving: everything it tracks about it, and its completion."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.chat import TextStream
from engine.multimodal import TokenizedPrompt
from engine.requests import ChatRequest, Completion, RequestHandle, StopReason, Timings, Usage
from engine.scheduler import SequenceProgress
from engine.speculative import ACCEPTANCE_PRIOR, LookupIndex


@dataclass(eq=False)
class ActiveRequest:
    """A request with a sequence: its progress, sampler chain, text so far, timings and drafts."""

    handle: RequestHandle
    progress: SequenceProgress
    chain: Any
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
    cancelled: bool = False
    media: tuple[TokenizedPrompt, ...] = ()  # image chunks this request may evaluate
    prompt_ids: tuple[int, ...] | None = None  # text-only prompts: the ids (for the draft model)
    speculate: bool = False
    lookup: LookupIndex | None = None
    in_flight: tuple[int, ...] = ()  # drafts decoded in the last batch, to verify
    accept_p: float = ACCEPTANCE_PRIOR  # estimated chance that the next draft is accepted
    draft_cap: int = 2  # slow start: how many drafts the next verification may have
    drafted: int = 0
    accepted: int = 0

    @property
    def request(self) -> ChatRequest:
        return self.handle.request

    @property
    def sequence_id(self) -> int:
        return self.progress.sequence_id

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
            ttft=(first - self.t_submit) if self.t_first_token else 0.0,
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
            self.drafted,
            self.accepted,
            model_identity,
        )
        return completion
