"""Reading one field of a client's JSON object, typed and bounded.

Each reader returns the value (or the default when the field is absent or null) and raises
a 400 ``ApiError`` naming the field for a wrong type or an out-of-range number. JSON's
``true`` is not a number here, although Python's ``bool`` is an ``int``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeVar

from app.api.errors import bad_request
from engine import SamplingField

T = TypeVar("T")

INT64 = 2**63 - 1


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _short(value: int) -> str:
    text = str(value)
    return text if len(text) <= 24 else f"{text[:8]}…({len(text)} digits)"


def wrong_type(param: str, expected: str, value: object) -> Exception:
    return bad_request(f"'{param}' must be {expected}, not {_kind(value)}.", param)


def integer(
    body: Mapping[str, Any], key: str, default: T, lo: int, hi: int = INT64, param: str = ""
) -> int | T:
    value = body.get(key)
    param = param or key
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong_type(param, "an integer", value)
    if value < lo:
        raise bad_request(f"'{param}' must be at least {lo}, not {_short(value)}.", param)
    if value > hi:
        raise bad_request(f"'{param}' must be at most {hi}, not {_short(value)}.", param)
    return value


def sampling(body: Mapping[str, Any], spec: SamplingField, default: T) -> float | int | T:
    """A sampling field, bounded by the engine's table (``engine.sampling.fields``): the
    values the API accepts are the ones ``SamplingParams.validate`` does."""
    if spec.kind is int:
        return integer(body, spec.openai, default, int(spec.low), int(spec.high))
    key = spec.openai
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise wrong_type(key, "a number", value)
    value = float(value)
    if not math.isfinite(value) or not spec.in_range(value):
        raise bad_request(f"'{key}' must be {spec.bounds()}, not {value:g}.", key)
    return value


def boolean(body: Mapping[str, Any], key: str, default: T) -> bool | T:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise wrong_type(key, "a boolean", value)
    return value


def string(body: Mapping[str, Any], key: str, default: T, param: str = "") -> str | T:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise wrong_type(param or key, "a string", value)
    return value


def obj(body: Mapping[str, Any], key: str, param: str = "") -> dict[str, Any]:
    """An object field; ``{}`` when absent or null."""
    value = body.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise wrong_type(param or key, "an object", value)
    return value


def array(body: Mapping[str, Any], key: str, param: str = "") -> list[Any] | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        raise wrong_type(param or key, "an array", value)
    return value
