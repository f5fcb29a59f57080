"""Sampling parameters and the grammars that constrain generation (checked before llama.cpp).
"""

from engine.base.lazy import lazy_exports

_EXPORTS = {
    "GrammarSyntaxError": "gbnf",
    "MAX_ELEMENTS": "gbnf",
    "check_gbnf": "gbnf",
    "Grammar": "grammar",
    "JSON_OBJECT_GRAMMAR": "grammar",
    "convert_json_schema": "grammar",
    "grammar_from_json_schema": "grammar",
    "precheck_json_schema": "grammar",
    "MAX_SEED": "fields",
    "RANDOM_SEED": "fields",
    "SAMPLING_FIELDS": "fields",
    "SamplingField": "fields",
    "is_valid_seed": "fields",
    "sampling_field": "fields",
    "seed_value": "fields",
    "GREEDY": "params",
    "MAX_LOGPROBS": "params",
    "SamplingParams": "params",
    "build_chain": "params",
    "free_chain": "params",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
