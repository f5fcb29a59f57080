"""The sampling fields and their ranges, one table: ``SamplingParams.validate``, the API's
field checks and the window's spin boxes all read it, so a value one accepts the others do.

The seed rule lives here too: llama.cpp takes a 32-bit seed and reserves 0xFFFFFFFF for
"random", so a fixed seed is 0..``MAX_SEED``; ``None`` (and ``RANDOM_SEED``, -1, as
llama-server writes it) asks for a fresh one per request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_INT32 = (1 << 31) - 1
MAX_REPEAT_WINDOW = 1 << 20  # llama.cpp allocates the whole window up front
MAX_SEED = 2**32 - 2  # 2**32 - 1 is llama.cpp's LLAMA_DEFAULT_SEED: "random"
RANDOM_SEED = -1  # what a client sends for "a fresh seed" (llama-server's convention)


@dataclass(frozen=True)
class SamplingField:
    """One sampling parameter: its name on ``SamplingParams`` and in OpenAI's API, its type
    and the values it may take; ``window`` is the narrower range the window's spin box offers."""

    name: str
    label: str  # how a sentence names it: "Temperature"
    kind: type  # int or float
    low: float
    high: float
    default: float | int | None
    openai: str  # the request field (OpenAI's, or llama-server's extension)
    above_low: bool = False  # low itself is not allowed
    below_high: bool = False  # high itself is not allowed
    window: tuple[float, float] | None = None

    def bounds(self) -> str:
        """The allowed range in words: "between 0 and 5", "above 0 and at most 10"."""
        low, high = _number(self.low), _number(self.high)
        if self.above_low and self.below_high:
            return f"above {low} and below {high}"
        if self.above_low:
            return f"above {low} and at most {high}"
        if self.below_high:
            return f"at least {low} and below {high}"
        return f"between {low} and {high}"

    def wrong_type(self, value: object) -> bool:
        """Whether ``value`` is not of this field's type (a bool is never a number here)."""
        if isinstance(value, bool):
            return True
        if self.kind is int:
            return not isinstance(value, int)
        return not isinstance(value, int | float) or not math.isfinite(value)

    def in_range(self, value: float) -> bool:
        low_ok = value > self.low if self.above_low else value >= self.low
        high_ok = value < self.high if self.below_high else value <= self.high
        return low_ok and high_ok

    def problem(self, value: object) -> str | None:
        """What is wrong with ``value`` as a sentence naming the field by its label, or None."""
        if self.wrong_type(value):
            kind = "an integer" if self.kind is int else "a number"
            return f"{self.label} must be {kind}, not {value!r}."
        if not self.in_range(value):  # type: ignore[arg-type]
            return f"{self.label} must be {self.bounds()}, not {_number(value)}."  # type: ignore[arg-type]
        return None


def _number(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return f"{value:g}"


# The defaults are llama.cpp's own (llama-server, llama-cli), so a model answers in Hearth
# as it does there.
SAMPLING_FIELDS: tuple[SamplingField, ...] = (
    SamplingField("temperature", "Temperature", float, 0.0, 5.0, 0.8, "temperature", window=(0.0, 5.0)),
    SamplingField("top_k", "Top-k", int, 0, MAX_INT32, 40, "top_k", window=(0, 1000)),
    SamplingField("top_p", "Top-p", float, 0.0, 1.0, 0.95, "top_p", above_low=True, window=(0.01, 1.0)),
    SamplingField("min_p", "Min-p", float, 0.0, 1.0, 0.05, "min_p", below_high=True, window=(0.0, 0.99)),
    SamplingField(
        "repeat_penalty",
        "Repeat penalty",
        float,
        0.0,
        10.0,
        1.1,
        "repeat_penalty",
        above_low=True,
        window=(0.5, 2.0),
    ),
    SamplingField("repeat_last_n", "Repeat window", int, 0, MAX_REPEAT_WINDOW, 64, "repeat_last_n"),
    SamplingField("seed", "The seed", int, 0, MAX_SEED, None, "seed"),
    SamplingField("frequency_penalty", "Frequency penalty", float, -2.0, 2.0, 0.0, "frequency_penalty"),
    SamplingField("presence_penalty", "Presence penalty", float, -2.0, 2.0, 0.0, "presence_penalty"),
)
FIELDS_BY_NAME: dict[str, SamplingField] = {f.name: f for f in SAMPLING_FIELDS}


def sampling_field(name: str) -> SamplingField:
    return FIELDS_BY_NAME[name]


def seed_value(seed: int | None) -> int | None:
    """A seed as a person or client writes it → ``SamplingParams.seed``: ``None`` and
    ``RANDOM_SEED`` mean random (None); any other value is kept as it is, for ``validate``
    to accept (0..MAX_SEED) or refuse."""
    return None if seed is None or seed == RANDOM_SEED else seed


def is_valid_seed(seed: object) -> bool:
    """A fixed seed llama.cpp uses as it is (not its "random" value)."""
    return seed is None or FIELDS_BY_NAME["seed"].problem(seed) is None
