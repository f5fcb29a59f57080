"""Sampling: the per-request parameters (a value), and the llama.cpp sampler chains built
from them (executor thread only). Importing this loads neither Qt nor llama.cpp.

Grammars (``Grammar``, ``JSON_OBJECT_GRAMMAR``, ``grammar_from_json_schema``) live in
``engine.sampling.grammar`` and are re-exported here; the sampler that applies one to a request,
with its log-probabilities, is ``engine.runtime.token_sampler.TokenSampler``.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from typing import Any

from engine.base.errors import InvalidChatRequest
from engine.sampling.grammar import JSON_OBJECT_GRAMMAR, Grammar, grammar_from_json_schema

MAX_LOGPROBS = 20  # OpenAI's top_logprobs range is 0..20
MAX_REPEAT_WINDOW = 1 << 20
MAX_INT32 = (1 << 31) - 1

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


@dataclass(frozen=True)
class SamplingParams:
    """Per-request sampling. Temperature 0 is greedy (penalties still apply).

    The defaults are llama.cpp's own (llama-server, llama-cli), so a model answers in
    Hearth as it does there; the window's "Balanced" preset and the CLI take them from here.

    ``frequency_penalty``/``presence_penalty`` are OpenAI's (-2..2), applied by llama.cpp's
    penalties sampler over the last ``repeat_last_n`` tokens, as llama-server does.
    ``grammar`` constrains the output (see ``engine.sampling.grammar.Grammar``). ``logprobs``: None
    for none; 0..20 for the sampled token's log-probability plus that many alternatives
    (``TokenLogprob`` on every ``TextDelta`` and the ``Completion``).
    """

    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.1
    repeat_last_n: int = 64
    seed: int | None = None  # None: a fresh seed per request
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    grammar: Grammar | None = None
    logprobs: int | None = None

    @property
    def penalizes(self) -> bool:
        """Whether the chain needs llama.cpp's penalties sampler."""
        return self.repeat_last_n > 0 and (
            self.repeat_penalty != 1.0 or self.frequency_penalty != 0.0 or self.presence_penalty != 0.0
        )

    def validate(self) -> None:
        for name in (
            "temperature",
            "top_p",
            "min_p",
            "repeat_penalty",
            "frequency_penalty",
            "presence_penalty",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InvalidChatRequest(
                    f"{name.replace('_', ' ').capitalize()} must be a number, not {value!r}."
                )
        for name in ("top_k", "repeat_last_n"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidChatRequest(
                    f"{name.replace('_', ' ').capitalize()} must be an integer, not {value!r}."
                )
        if not 0.0 <= self.temperature <= 5.0:
            raise InvalidChatRequest(f"Temperature must be between 0 and 5, not {self.temperature}.")
        if not 0 <= self.top_k <= MAX_INT32:
            raise InvalidChatRequest(f"Top-k must be 0 (off) or more, not {self.top_k}.")
        if not 0.0 < self.top_p <= 1.0:
            raise InvalidChatRequest(f"Top-p must be above 0 and at most 1, not {self.top_p}.")
        if not 0.0 <= self.min_p < 1.0:
            raise InvalidChatRequest(f"Min-p must be at least 0 and below 1, not {self.min_p}.")
        if not 0.0 < self.repeat_penalty <= 10.0:
            raise InvalidChatRequest(
                f"Repeat penalty must be above 0 and at most 10, not {self.repeat_penalty}."
            )
        if self.repeat_last_n < 0:
            raise InvalidChatRequest("Repeat window must not be negative.")
        if self.repeat_last_n > MAX_REPEAT_WINDOW:
            # llama.cpp allocates the whole window up front: a huge one would abort the process.
            raise InvalidChatRequest(f"Repeat window must be at most {MAX_REPEAT_WINDOW:,} tokens.")
        if not -2.0 <= self.frequency_penalty <= 2.0:
            raise InvalidChatRequest(
                f"Frequency penalty must be between -2 and 2, not {self.frequency_penalty}."
            )
        if not -2.0 <= self.presence_penalty <= 2.0:
            raise InvalidChatRequest(
                f"Presence penalty must be between -2 and 2, not {self.presence_penalty}."
            )
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise InvalidChatRequest(f"The seed must be an integer, not {self.seed!r}.")
        if self.logprobs is not None and (
            isinstance(self.logprobs, bool)
            or not isinstance(self.logprobs, int)
            or not 0 <= self.logprobs <= MAX_LOGPROBS
        ):
            raise InvalidChatRequest(
                f"Top logprobs must be between 0 and {MAX_LOGPROBS}, not {self.logprobs!r}."
            )
        if self.grammar is not None:
            if not isinstance(self.grammar, Grammar):
                raise InvalidChatRequest("A grammar must be an engine Grammar.")
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
    seed = params.seed if params.seed is not None else secrets.randbits(32)
    ll.llama_sampler_chain_add(chain, ll.llama_sampler_init_dist(seed & 0xFFFFFFFF))
    return chain


def free_chain(chain: Any) -> None:
    import llama_cpp as ll

    if chain:
        ll.llama_sampler_free(chain)
