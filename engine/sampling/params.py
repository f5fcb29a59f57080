"""Sampling: the per-request parameters (a value), and the llama.cpp sampler chains built
from them (executor thread only). Importing this loads neither Qt nor llama.cpp.

Grammars (``Grammar``, ``JSON_OBJECT_GRAMMAR``, ``grammar_from_json_schema``) live in
``engine.sampling.grammar`` and are re-exported here; the sampler that applies one to a request,
with its log-probabilities, is ``engine.runtime.token_sampler.TokenSampler``.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from engine.base.errors import InvalidChatRequest
from engine.sampling.fields import FIELDS_BY_NAME, MAX_SEED, SAMPLING_FIELDS
from engine.sampling.grammar import JSON_OBJECT_GRAMMAR, Grammar, grammar_from_json_schema

MAX_LOGPROBS = 20  # OpenAI's top_logprobs range is 0..20

__all__ = [
    "GREEDY",
    "JSON_OBJECT_GRAMMAR",
    "MAX_LOGPROBS",
    "Grammar",
    "SamplingParams",
    "build_chain",
    "free_chain",
    "grammar_from_json_schema",
]


def _default(name: str) -> Any:
    return FIELDS_BY_NAME[name].default


@dataclass(frozen=True)
class SamplingParams:
    """Per-request sampling. Temperature 0 is greedy (penalties still apply).

    The defaults and ranges are the table's (``engine.sampling.fields``): llama.cpp's own
    defaults; the window's "Balanced" preset and the CLI take them from here.

    ``frequency_penalty``/``presence_penalty`` are OpenAI's (-2..2), applied by llama.cpp's
    penalties sampler over the last ``repeat_last_n`` tokens, as llama-server does.
    ``grammar`` constrains the output (see ``engine.sampling.grammar.Grammar``). ``logprobs``: None
    for none; 0..20 for the sampled token's log-probability plus that many alternatives
    (``TokenLogprob`` on every ``TextDelta`` and the ``Completion``).
    """

    temperature: float = _default("temperature")
    top_k: int = _default("top_k")
    top_p: float = _default("top_p")
    min_p: float = _default("min_p")
    repeat_penalty: float = _default("repeat_penalty")
    repeat_last_n: int = _default("repeat_last_n")
    seed: int | None = None  # None: a fresh seed per request (0..MAX_SEED: a fixed one)
    frequency_penalty: float = _default("frequency_penalty")
    presence_penalty: float = _default("presence_penalty")
    grammar: Grammar | None = None
    logprobs: int | None = None

    @property
    def penalizes(self) -> bool:
        """Whether the chain needs llama.cpp's penalties sampler."""
        return self.repeat_last_n > 0 and (
            self.repeat_penalty != 1.0 or self.frequency_penalty != 0.0 or self.presence_penalty != 0.0
        )

    def validate(self) -> None:
        """Refuse a value outside the table (``engine.sampling.fields``); the error names
        the field (``InvalidChatRequest.field``) so the API can say which one."""
        for spec in SAMPLING_FIELDS:
            value = getattr(self, spec.name)
            if value is None and spec.default is None:  # the seed: None is "random"
                continue
            problem = spec.problem(value)
            if problem is not None:
                raise InvalidChatRequest(problem, field=spec.name)
        if self.logprobs is not None and (
            isinstance(self.logprobs, bool)
            or not isinstance(self.logprobs, int)
            or not 0 <= self.logprobs <= MAX_LOGPROBS
        ):
            raise InvalidChatRequest(
                f"Top logprobs must be between 0 and {MAX_LOGPROBS}, not {self.logprobs!r}.", field="logprobs"
            )
        if self.grammar is not None:
            if not isinstance(self.grammar, Grammar):
                raise InvalidChatRequest("A grammar must be an engine Grammar.", field="grammar")
            self.grammar.validate()


GREEDY = SamplingParams(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0)


def build_chain(vocab: Any, params: SamplingParams) -> Any:
    """A chain the request owns: penalties -> top-k -> top-p -> min-p -> temp -> dist,
    or penalties -> greedy at temperature 0. Free it with ``free_chain``. The grammar is
    not in it: ``TokenSampler`` checks the chain's token against the grammar first and
    filters the vocabulary only when the grammar rejects it (as llama.cpp's common sampler)."""
    import llama_cpp as ll

    chain = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
    if params.penalizes:
        n_vocab = ll.llama_vocab_n_tokens(vocab)
        penalties = ll.llama_sampler_init_penalties(
            n_vocab,
            params.repeat_last_n,
            params.repeat_penalty,
            params.frequency_penalty,
            params.presence_penalty,
        )
        ll.llama_sampler_chain_add(chain, penalties)
    if params.temperature <= 0.0:
        ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_greedy())
        return chain
    if params.top_k > 0:
        ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_top_k(params.top_k))
    if params.top_p < 1.0:
        ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_top_p(params.top_p, 1))
    if params.min_p > 0.0:
        ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_min_p(params.min_p, 1))
    ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_temp(params.temperature))
    # A validated seed is 0..MAX_SEED, never llama.cpp's "random" value.
    seed = params.seed if params.seed is not None else secrets.randbelow(MAX_SEED + 1)
    ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_dist(seed))
    return chain


def free_chain(chain: Any) -> None:
    import llama_cpp as ll

    if chain:
        ll.llama_sampler_free(chain)
