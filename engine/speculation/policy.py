"""Speculative decoding: draft sources (prompt lookup, a draft model) and verification.

A draft source guesses the next few tokens of a decoding sequence; the target model then
checks all of them in one decode (``[pending, d1..dk]`` at consecutive positions, logits on
every row, in the same batch as every other sequence's work). Output is unchanged: every
emitted token is still the one the request's own sampler chain picks, so speculation only
changes how many tokens one decode yields.

Two sources:

- ``LookupIndex`` (prompt lookup, pure Python, free): proposes what followed the latest
  earlier occurrence of the sequence's last n-gram. Strong when the reply repeats its
  input (editing, quoting, code). One index per decoding sequence, extended as tokens are
  emitted, so a proposal costs O(max_draft) however long the conversation is.
- ``DraftModel`` (``engine/speculation/draft_model.py``, native, executor thread only): a second,
  smaller GGUF with the same vocabulary and its own context holding the same sequence ids
  as the target's. ``check_draft_compatible`` there compares the two vocabularies from the
  GGUF headers (``catalog.read_token_table``) before anything native is loaded.

This module is the policy only: pure Python, no llama.cpp, no Qt, no numpy (a test checks).

How the executor drives it, for one decoding sequence ``seq`` per tick::

    k = draft_limit(config.max_draft, progress.n_past, n_ctx_seq, max_tokens - len(emitted))
    drafts = index.propose(k, config.min_draft)              # or draft_model.propose({...})[seq]
    progress.push(token, drafts)                             # the planner may cut the drafts
    ... decode: rows [pending, d1..dk'] with logits on each (BatchCommit logit_rows) ...
    run = verify_rows(drafts[:k'], lambda i: llama_sampler_sample(chain, ctx, rows[i]))
    for token in run.tokens: emit, stopping at EOG / stop string / max tokens
    pos = progress.discard_rejected(k' - run.accepted)       # target: seq_rm(seq, pos, -1)
    draft_model.rollback(seq, pos); index.extend(run.tokens)
    progress.push(run.tokens[-1], next drafts)               # the correction or bonus token

``verify_rows`` samples row by row and stops at the first mismatch, so a stateful chain
(penalties, a seeded ``dist``) sees exactly the tokens a non-speculative run would.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from engine.base.defaults import DEFAULT_MAX_DRAFT
from engine.base.errors import EngineError

MAX_DRAFT_LIMIT = 32  # verification rows are logit rows: more than this costs more than it wins
MAX_NGRAM = 16


# --------------------------------------------------------------------------- configuration


class SpeculationMode(enum.Enum):
    OFF = "off"
    PROMPT_LOOKUP = "lookup"
    DRAFT_MODEL = "draft"


class InvalidSpeculation(EngineError, ValueError):
    """Speculation settings that cannot be used; ``message`` says which and why."""


@dataclass(frozen=True)
class SpeculationConfig:
    """Speculation for one load. Each request may still switch it off for itself.

    ``max_draft``: drafts per sequence per tick (each is a verification row in the batch).
    ``min_draft``: shorter proposals are dropped — a one-token guess rarely pays for its
    row. ``ngram_min``/``ngram_max``: n-gram sizes prompt lookup tries, longest first.
    ``p_min``: the draft model stops drafting a sequence when its greedy token's
    probability falls below this (0 = always draft ``max_draft`` tokens).
    """

    mode: SpeculationMode = SpeculationMode.OFF
    draft_path: Path | None = None
    max_draft: int = DEFAULT_MAX_DRAFT  # an upper bound: the adaptive policy drafts what pays
    min_draft: int = 2
    ngram_min: int = 2  # a single repeated token is weak evidence of copying
    ngram_max: int = 4
    p_min: float = 0.0
    # Draft only as much as pays on this machine (DraftCostModel); False: always draft up
    # to max_draft (tests, and measuring a draft model's acceptance).
    adaptive: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.draft_path, str):
            object.__setattr__(self, "draft_path", Path(self.draft_path))
        if not isinstance(self.mode, SpeculationMode):
            raise InvalidSpeculation(f"Unknown speculation mode {self.mode!r}.")
        if self.mode is SpeculationMode.DRAFT_MODEL and self.draft_path is None:
            raise InvalidSpeculation("Speculation with a draft model needs the draft model's file.")
        if self.mode is not SpeculationMode.DRAFT_MODEL and self.draft_path is not None:
            raise InvalidSpeculation(f"A draft model file was given, but speculation is {self.mode.value}.")
        if not 1 <= self.max_draft <= MAX_DRAFT_LIMIT:
            raise InvalidSpeculation(
                f"Draft length must be between 1 and {MAX_DRAFT_LIMIT} tokens, not {self.max_draft}."
            )
        if not 1 <= self.min_draft <= self.max_draft:
            raise InvalidSpeculation(
                f"Minimum draft length must be between 1 and the maximum ({self.max_draft}), "
                f"not {self.min_draft}."
            )
        if not 1 <= self.ngram_min <= self.ngram_max <= MAX_NGRAM:
            raise InvalidSpeculation(
                f"Lookup n-grams must satisfy 1 <= min <= max <= {MAX_NGRAM}, "
                f"not {self.ngram_min}..{self.ngram_max}."
            )
        if not 0.0 <= self.p_min < 1.0:
            raise InvalidSpeculation(f"Draft probability cut-off must be in [0, 1), not {self.p_min}.")

    @property
    def enabled(self) -> bool:
        return self.mode is not SpeculationMode.OFF

    @classmethod
    def parse(
        cls, spec: str, *, max_draft: int | None = None, min_draft: int | None = None
    ) -> SpeculationConfig:
        """The command line's ``--speculate`` value: ``off``, ``lookup`` or ``draft:PATH``.

        Without an explicit ``min_draft`` it is lowered to ``max_draft`` when that is
        smaller, so ``--draft-max 1`` alone is valid.
        """
        text = spec.strip()
        options: dict[str, Any] = {}
        if max_draft is not None:
            options["max_draft"] = max_draft
            if min_draft is None:
                options["min_draft"] = min(cls.min_draft, max_draft)
        if min_draft is not None:
            options["min_draft"] = min_draft
        lowered = text.lower()
        if lowered in ("", "off", "none"):
            return cls(SpeculationMode.OFF, **options)
        if lowered in ("lookup", "prompt-lookup", "ngram"):
            return cls(SpeculationMode.PROMPT_LOOKUP, **options)
        if lowered.startswith("draft:"):
            path = text[len("draft:") :].strip()
            if not path:
                raise InvalidSpeculation("--speculate draft:PATH needs the draft model's path.")
            return cls(SpeculationMode.DRAFT_MODEL, Path(path).expanduser(), **options)
        raise InvalidSpeculation(f"Unknown speculation {spec!r}: use off, lookup or draft:PATH.")

    def prompt_lookup(self) -> PromptLookup:
        return PromptLookup(self.ngram_min, self.ngram_max)


def draft_limit(max_draft: int, n_past: int, n_ctx_seq: int, tokens_left: int) -> int:
    """How many drafts one sequence may have this tick (0: do not speculate).

    ``n_past`` is the pending token's position: the drafts go at ``n_past + 1 ..``, and
    decode fails once a sequence reaches ``n_ctx_seq``. ``tokens_left`` is what the
    request may still emit; an accepted run emits up to one token more than it drafted.
    """
    return max(0, min(max_draft, n_ctx_seq - n_past - 1, tokens_left - 1))


# --------------------------------------------------------------------------- prompt lookup


@dataclass(frozen=True, slots=True)
class PromptLookup:
    """N-gram lookup settings; ``propose`` is the O(history) reference, ``index`` the fast form."""

    ngram_min: int = 1
    ngram_max: int = 4

    def __post_init__(self) -> None:
        if not 1 <= self.ngram_min <= self.ngram_max <= MAX_NGRAM:
            raise ValueError(f"n-gram sizes must satisfy 1 <= min <= max <= {MAX_NGRAM}")

    def index(self, tokens: Iterable[int] = ()) -> LookupIndex:
        return LookupIndex(self.ngram_min, self.ngram_max, tokens)

    def propose(self, history: Sequence[int], max_draft: int, min_draft: int = 1) -> tuple[int, ...]:
        """The continuation of the latest earlier match of the history's last n-gram.

        Tries n from ``ngram_max`` down to ``ngram_min``; the first n whose last n tokens
        occur earlier (followed by at least one token) decides. Its most recent earlier
        occurrence gives up to ``max_draft`` following tokens; fewer than ``min_draft``
        gives ``()``. A shorter n would not help then: its latest match is at least as
        recent, so its continuation is no longer.
        """
        tokens = list(history)
        length = len(tokens)
        for n in range(self.ngram_max, self.ngram_min - 1, -1):
            if length < n + 1:
                continue
            suffix = tokens[length - n :]
            # Latest start first; the match must leave a token after it inside the history.
            for start in range(length - n - 1, -1, -1):
                if tokens[start : start + n] == suffix:
                    continuation = tokens[start + n : start + n + max_draft]
                    return tuple(continuation) if len(continuation) >= min_draft else ()
        return ()


class LookupIndex:
    """Prompt lookup for one sequence, kept incrementally.

    For each n it maps an n-gram to where the token after its latest occurrence is, but
    only for occurrences already followed by a token. The history's own suffix is
    therefore never its own match, and a lookup is one dict probe per n plus a slice:
    O(max_draft) per tick instead of a scan of the whole conversation.

    Append-only: extend it with the prompt, then with each emitted token (the pending
    token included — proposals continue after it). Drafts are never added, so rejected
    drafts need no rollback.
    """

    __slots__ = ("_tables", "_tokens", "ngram_max", "ngram_min")

    def __init__(self, ngram_min: int = 1, ngram_max: int = 4, tokens: Iterable[int] = ()) -> None:
        if not 1 <= ngram_min <= ngram_max <= MAX_NGRAM:
            raise ValueError(f"n-gram sizes must satisfy 1 <= min <= max <= {MAX_NGRAM}")
        self.ngram_min = ngram_min
        self.ngram_max = ngram_max
        self._tokens: list[int] = []
        # _tables[n - ngram_min]: n-gram -> index of the token that followed its latest occurrence
        self._tables: tuple[dict[tuple[int, ...], int], ...] = tuple(
            {} for _ in range(ngram_min, ngram_max + 1)
        )
        self.extend(tokens)

    def __len__(self) -> int:
        return len(self._tokens)

    @property
    def tokens(self) -> tuple[int, ...]:
        """A copy of the indexed history (O(n): for tests and diagnostics)."""
        return tuple(self._tokens)

    def extend(self, tokens: Iterable[int]) -> None:
        history = self._tokens
        pairs = tuple(zip(range(self.ngram_min, self.ngram_max + 1), self._tables, strict=True))
        for token in tokens:
            # The n-grams ending just before ``token`` now have a continuation: ``token``.
            follow = len(history)
            history.append(int(token))
            for n, table in pairs:
                if follow < n:
                    break
                table[tuple(history[follow - n : follow])] = follow

    def propose(self, max_draft: int, min_draft: int = 1) -> tuple[int, ...]:
        """Same answer as ``PromptLookup.propose`` over the indexed history."""
        history = self._tokens
        length = len(history)
        for n in range(self.ngram_max, self.ngram_min - 1, -1):
            if length < n + 1:
                continue
            start = self._tables[n - self.ngram_min].get(tuple(history[length - n :]))
            if start is None:
                continue
            continuation = history[start : start + max_draft]
            return tuple(continuation) if len(continuation) >= min_draft else ()
        return ()


# --------------------------------------------------------------------------- verification


class AcceptedRun(NamedTuple):
    """The outcome of verifying one sequence's drafts.

    ``accepted`` drafts matched; ``tokens`` are what to emit, in order: the accepted
    drafts then the target's own token after them (the correction at the first mismatch,
    or the bonus token when every draft matched). ``tokens[-1]`` is the next pending token.
    """

    accepted: int
    tokens: tuple[int, ...]

    def rejected(self, n_drafts: int) -> int:
        """Decoded rows to remove from KV (target and draft): ``discard_rejected``'s count."""
        return n_drafts - self.accepted


def accept_run(draft: Sequence[int], sampled: Sequence[int]) -> AcceptedRun:
    """Accept drafts up to the first mismatch, plus the corrected or bonus token.

    ``sampled[i]`` is the token the target's sampler chose at verified row ``i`` (row 0
    follows the pending token, row i follows ``draft[i - 1]``). Entries after the first
    mismatch are ignored; too few to decide raises ``ValueError``.
    """
    for i, guess in enumerate(draft):
        if i >= len(sampled):
            raise ValueError(f"{len(sampled)} sampled tokens cannot verify {len(draft)} drafts")
        if sampled[i] != guess:
            return AcceptedRun(i, tuple(sampled[: i + 1]))
    k = len(draft)
    if len(sampled) <= k:
        raise ValueError(f"every draft matched: the bonus token (row {k}) is missing")
    return AcceptedRun(k, tuple(sampled[: k + 1]))


def verify_rows(draft: Sequence[int], sample_row: Callable[[int], int]) -> AcceptedRun:
    """Sample rows 0, 1, ... in order until the first mismatch (at most ``len(draft) + 1``).

    ``sample_row(i)`` samples the target's verification row ``i`` with the request's chain
    (``llama_sampler_sample`` also accepts the token into the chain). Rows after a
    mismatch are never sampled: their logits follow a rejected token.
    """
    sampled: list[int] = []
    for i, guess in enumerate(draft):
        token = sample_row(i)
        sampled.append(token)
        if token != guess:
            return AcceptedRun(i, tuple(sampled))
    sampled.append(sample_row(len(draft)))
    return AcceptedRun(len(draft), tuple(sampled))


# --------------------------------------------------------------------------- how many drafts


ACCEPTANCE_PRIOR = 0.9  # optimistic: a request starts drafting and backs off on misses
ACCEPTANCE_WEIGHT = 0.3


def update_acceptance(p: float, drafted: int, accepted: int, weight: float = ACCEPTANCE_WEIGHT) -> float:
    """An exponential average of the chance that the next draft token is accepted.

    Verification is a run of Bernoulli trials that stops at the first failure: the first
    ``accepted`` drafts succeeded and, if ``accepted < drafted``, the next one failed.
    """
    for _ in range(accepted):
        p += weight * (1.0 - p)
    if accepted < drafted:
        p -= weight * p
    return min(max(p, 0.0), 1.0)


def relax_acceptance(p: float, weight: float = ACCEPTANCE_WEIGHT / 16) -> float:
    """A tick without drafting drifts the estimate back toward the prior, so a request
    that stopped speculating (the text stopped repeating) tries again later."""
    return p + weight * (ACCEPTANCE_PRIOR - p)


def next_draft_cap(cap: int, drafted: int, accepted: int, max_draft: int) -> int:
    """Slow start, as TCP does: a fully accepted run doubles how many drafts the next
    verification may have; a miss shrinks it to what was accepted. A request whose text
    stopped repeating then loses little on its next wrong guess."""
    if drafted and accepted == drafted:
        return min(max_draft, max(cap, drafted) * 2)
    return max(1, min(cap, accepted + 1))


# The acceptance a draft model of the target's own family reaches at best (Qwen2.5-Coder
# 0.5B drafting for the 1.5B on a greedy code reply: 84% here): where even this would not
# pay, the draft model is not kept after warm-up.
BEST_DRAFT_ACCEPTANCE = 0.9


@dataclass(frozen=True)
class DraftCostModel:
    """Chooses a draft length that maximises expected tokens per unit of decode cost.

    ``row_costs[n]`` is the cost of verifying ``n`` drafts (a decode with ``n + 1`` rows
    for the sequence), relative to a plain one-row decode (``row_costs[0] == 1``); on a
    CPU the logits of every extra row cost nearly as much as the first, so drafting only
    pays when most drafts are accepted. ``draft_cost`` is the cost of producing one draft
    token (0 for prompt lookup; a draft model's decode relative to the target's).
    """

    row_costs: tuple[float, ...]
    draft_cost: float = 0.0

    def __post_init__(self) -> None:
        if not self.row_costs or self.row_costs[0] <= 0:
            raise ValueError("row_costs[0] is the cost of a plain decode and must be positive")

    @classmethod
    def measured(
        cls, seconds: Mapping[int, float], max_draft: int, draft_cost: float = 0.0
    ) -> DraftCostModel:
        """From decode timings of a few row counts (``{rows: seconds}``), interpolated."""
        points = sorted(seconds.items())
        base = seconds.get(1) or points[0][1]
        costs = []
        for n in range(max_draft + 1):
            rows = n + 1
            below = max((p for p in points if p[0] <= rows), default=points[0])
            above = min((p for p in points if p[0] >= rows), default=points[-1])
            if above[0] == below[0]:
                value = below[1] if rows <= below[0] else below[1] * rows / below[0]
            else:
                t = (rows - below[0]) / (above[0] - below[0])
                value = below[1] + t * (above[1] - below[1])
            costs.append(max(value / base, 1.0))
        return cls(tuple(costs), draft_cost)

    def expected_tokens(self, p: float, n: int) -> float:
        """Tokens one verification emits with ``n`` drafts: 1 + p + p^2 + ... + p^n."""
        return float(n + 1) if p >= 1.0 else (1.0 - p ** (n + 1)) / (1.0 - p)

    def pays_at(self, p: float, limit: int, min_draft: int = 1) -> bool:
        """Whether any draft length pays clearly at acceptance ``p``."""
        return self.choose(p, limit, min_draft) > 0

    def choose(self, p: float, limit: int, min_draft: int = 1) -> int:
        """The number of drafts to propose (0: decode plainly this tick)."""
        plain = 1.0 / self.row_costs[0]
        best_n, best_rate = 0, plain
        for n in range(max(1, min_draft), min(limit, len(self.row_costs) - 1) + 1):
            rate = self.expected_tokens(p, n) / (self.row_costs[n] + n * self.draft_cost)
            if rate > best_rate:
                best_n, best_rate = n, rate
        # Only a clear gain: speculation must never make a reply slower.
        return best_n if best_rate > plain * 1.05 else 0


def draft_dropped_note(name: str, costs: DraftCostModel) -> str:
    """Why the draft model was let go at warm-up, in one line."""
    verify = costs.row_costs[min(2, len(costs.row_costs) - 1)]
    return (
        f"Not drafting with {name}: on this machine verifying 2 drafts costs {verify:.2f}x a plain "
        f"decode and each draft {costs.draft_cost:.2f}x, so even {BEST_DRAFT_ACCEPTANCE:.0%} accepted "
        "would not pay. It was unloaded after warm-up."
    )
