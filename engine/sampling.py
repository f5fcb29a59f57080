"""Sampling: the per-request parameters (a value), and the llama.cpp sampler chains built
from them (executor thread only). Importing this loads neither Qt nor llama.cpp."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from engine.errors import InvalidChatRequest


@dataclass(frozen=True)
class SamplingParams:
    """Per-request sampling. Temperature 0 is greedy (penalties still apply).

    The defaults are llama.cpp's own (llama-server, llama-cli), so a model answers in
    Hearth as it does there; the window's "Balanced" preset and the CLI take them from here.
    """

    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.1
    repeat_last_n: int = 64
    seed: int | None = None  # None: a fresh seed per request

    def validate(self) -> None:
        if not 0.0 <= self.temperature <= 5.0:
            raise InvalidChatRequest(f"Temperature must be between 0 and 5, not {self.temperature}.")
        if self.top_k < 0:
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


GREEDY = SamplingParams(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0)


def build_chain(vocab: Any, params: SamplingParams) -> Any:
    """A chain the request owns: penalties -> top-k -> top-p -> min-p -> temp -> dist,
    or penalties -> greedy at temperature 0. Free it with ``free_chain``."""
    import llama_cpp as ll

    chain = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
    if params.repeat_penalty != 1.0 and params.repeat_last_n > 0:
        n_vocab = ll.llama_vocab_n_tokens(vocab)
        penalties = ll.llama_sampler_init_penalties(
            n_vocab, params.repeat_last_n, params.repeat_penalty, 0.0, 0.0
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
