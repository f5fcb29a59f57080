"""Speculation for live requests: who drafts, how many tokens, and checking the drafts.

``engine.speculation.policy`` holds the policy (pure functions); this module applies it to the
requests one executor serves. Each request that may draft carries a ``RequestSpeculation``
(``engine.speculation.request_state``: its acceptance estimate, slow-start cap and the drafts
decoded last batch); the executor's ``Speculator`` proposes drafts for a tick's sequences
(prompt lookup, or one batched call to the draft model) and verifies them against the sampled
rows. Executor thread only: the draft model is native.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from engine.requests.request import ChatRequest
from engine.runtime.active_request import ActiveRequest
from engine.scheduler import PromptLayout, TextSegment
from engine.speculation.draft_model import DraftModel, DraftRequest
from engine.speculation.policy import (
    DraftCostModel,
    LookupIndex,
    SpeculationConfig,
    SpeculationMode,
    draft_limit,
    next_draft_cap,
    relax_acceptance,
    update_acceptance,
    verify_rows,
)
from engine.speculation.request_state import RequestSpeculation


class Speculator:
    """One executor's speculation: its configuration, draft model and measured row costs."""

    def __init__(
        self, config: SpeculationConfig, draft: DraftModel | None, costs: DraftCostModel | None
    ) -> None:
        self.config = config
        self.draft = draft
        self.costs = costs  # None: draft as much as the limit allows
        self.drafted = 0
        self.accepted = 0

    def admit(self, request: ChatRequest, layout: PromptLayout) -> RequestSpeculation | None:
        """The drafting state for a newly admitted request, or None when it won't draft."""
        config = self.config
        if not config.enabled or request.speculate is False:
            return None
        if config.mode is SpeculationMode.PROMPT_LOOKUP:
            prompt = [t for s in layout.segments if isinstance(s, TextSegment) for t in s.tokens]
            return RequestSpeculation(lookup=LookupIndex(config.ngram_min, config.ngram_max, prompt))
        if self.draft is None or layout.media_count:
            return None  # a draft model cannot follow image prompts
        first = layout.segments[0] if layout.segments else None
        return RequestSpeculation(prompt_ids=tuple(first.tokens) if isinstance(first, TextSegment) else ())

    def verify(
        self, state: RequestSpeculation, sample_row: Callable[[int], int]
    ) -> tuple[tuple[int, ...], int]:
        """Sample the rows of the drafts decoded last batch, stopping at the first mismatch:
        the tokens to emit and how many drafts were rejected."""
        drafts, state.in_flight = state.in_flight, ()
        run = verify_rows(drafts, sample_row)
        state.drafted += len(drafts)
        state.accepted += run.accepted
        state.accept_p = update_acceptance(state.accept_p, len(drafts), run.accepted)
        state.draft_cap = next_draft_cap(state.draft_cap, len(drafts), run.accepted, self.config.max_draft)
        self.drafted += len(drafts)
        self.accepted += run.accepted
        return run.tokens, run.rejected(len(drafts))

    def propose(
        self, pending: Mapping[int, tuple[ActiveRequest, tuple[int, ...]]], n_ctx_seq: int
    ) -> dict[int, tuple[int, ...]]:
        """Drafts to decode after each sequence's newest token, by sequence id."""
        config = self.config
        wanted: dict[int, DraftRequest] = {}
        drafts: dict[int, tuple[int, ...]] = {}
        for seq, (active, emitted) in pending.items():
            state = active.speculation
            if state is None:
                continue
            if state.lookup is not None:
                state.lookup.extend(emitted)
            tokens_left = active.request.max_tokens - len(active.tokens)
            limit = draft_limit(config.max_draft, active.progress.n_past, n_ctx_seq, tokens_left)
            if limit > 0 and self.costs is not None:
                limit = self.costs.choose(state.accept_p, min(limit, state.draft_cap), config.min_draft)
                if limit == 0:
                    state.accept_p = relax_acceptance(state.accept_p)
            if limit <= 0:
                continue
            if state.lookup is not None:
                drafts[seq] = state.lookup.propose(limit, config.min_draft)
            elif self.draft is not None and state.prompt_ids is not None:
                history = [*state.prompt_ids, *active.progress.generated]
                wanted[seq] = DraftRequest(history, emitted[-1], limit)
        if wanted:
            assert self.draft is not None
            drafts.update(self.draft.propose(wanted, config.min_draft))
        return drafts

    def forget_failed_batch(self) -> None:
        """After a failed decode the draft model's cache may hold what the target lost."""
        if self.draft is not None:
            self.draft.clear()
