"""Per-request llama.cpp sampler chains. Executor thread only."""

from __future__ import annotations

import secrets
from typing import Any

from engine.requests import SamplingParams


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
