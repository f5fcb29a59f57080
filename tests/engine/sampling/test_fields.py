"""The one table of sampling fields: SamplingParams' defaults and checks come from it, and
the seed rule (which seeds are fixed, which mean random) is written once."""

from __future__ import annotations

import pytest

from engine import InvalidChatRequest, SamplingParams
from engine.sampling.fields import (
    MAX_SEED,
    RANDOM_SEED,
    SAMPLING_FIELDS,
    is_valid_seed,
    sampling_field,
    seed_value,
)


def test_the_params_defaults_are_the_table_s() -> None:
    params = SamplingParams()
    for spec in SAMPLING_FIELDS:
        assert getattr(params, spec.name) == spec.default, spec.name


@pytest.mark.parametrize("spec", SAMPLING_FIELDS, ids=lambda s: s.name)
def test_validate_accepts_the_table_s_bounds_and_refuses_past_them(spec) -> None:
    inside = [v for v in (spec.low, spec.high) if spec.in_range(v)]
    for value in inside:
        SamplingParams(**{spec.name: spec.kind(value)}).validate()
    step = 1 if spec.kind is int else 1e-6
    for value in (spec.low - step, spec.high + step):
        with pytest.raises(InvalidChatRequest) as caught:
            SamplingParams(**{spec.name: spec.kind(value)}).validate()
        assert caught.value.field == spec.name
        assert spec.bounds() in caught.value.message


def test_min_p_of_one_is_refused_by_the_table_and_named() -> None:
    assert not sampling_field("min_p").in_range(1.0)
    with pytest.raises(InvalidChatRequest, match="Min-p must be at least 0 and below 1") as caught:
        SamplingParams(min_p=1.0).validate()
    assert caught.value.field == "min_p"


def test_the_window_s_ranges_lie_inside_the_valid_ones() -> None:
    for spec in SAMPLING_FIELDS:
        if spec.window is not None:
            low, high = spec.window
            assert spec.in_range(low) and spec.in_range(high), spec.name


def test_one_seed_rule() -> None:
    assert MAX_SEED == 2**32 - 2  # 2**32 - 1 is llama.cpp's "random"
    assert seed_value(None) is None and seed_value(RANDOM_SEED) is None
    assert seed_value(0) == 0 and seed_value(MAX_SEED) == MAX_SEED
    assert is_valid_seed(None) and is_valid_seed(0) and is_valid_seed(MAX_SEED)
    for bad in (MAX_SEED + 1, -1, 2**40, True, "7"):
        assert not is_valid_seed(bad), bad
    SamplingParams(seed=MAX_SEED).validate()
    with pytest.raises(InvalidChatRequest, match="seed must be between 0 and 4294967294") as caught:
        SamplingParams(seed=2**32 - 1).validate()
    assert caught.value.field == "seed"


def test_the_field_survives_pickling() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(InvalidChatRequest("Min-p must be...", field="min_p")))
    assert (error.message, error.field) == ("Min-p must be...", "min_p")
