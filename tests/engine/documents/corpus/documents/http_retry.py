"""Retrying flaky HTTP calls with exponential backoff and jitter.

The weather and exchange-rate services this app talks to fail in two ways: they are briefly
unavailable (connection resets, 502/503/504 during a deploy) and they rate-limit us (429). Both
go away if we wait, but waiting the same fixed time in every client makes all of them retry in
lockstep and hit the recovering server together. So the delay grows exponentially with each
attempt and is randomised ("full jitter", as described in the AWS architecture blog), and a
server's own Retry-After header wins whenever it sends one.

Typical use::

    from http_retry import RetryPolicy, call_with_retry

    policy = RetryPolicy(attempts=5, base_delay=0.5, max_delay=30.0)
    body = call_with_retry(lambda: session.get(url, timeout=10), policy)

Errors that retrying cannot fix (400, 401, 403, 404, a malformed URL) are raised at once.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

T = TypeVar("T")

# Statuses that mean "try again later". 500 is deliberately absent: in our services it means a
# bug in the request that will fail the same way every time.
RETRYABLE_STATUSES = frozenset({408, 425, 429, 502, 503, 504})

# Never sleep longer than this for one Retry-After, whatever the server asks: a misconfigured
# proxy once sent "Retry-After: 86400" and froze the sync window for a day.
MAX_RETRY_AFTER = 120.0


class Response(Protocol):
    status_code: int
    headers: dict[str, str]


class RetryError(Exception):
    """Every attempt failed; ``last`` is the final response or exception."""

    def __init__(self, attempts: int, last: object) -> None:
        super().__init__(f"gave up after {attempts} attempts: {last!r}")
        self.attempts = attempts
        self.last = last


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry.

    attempts    total tries, including the first (1 means no retry)
    base_delay  seconds before the first retry, before jitter
    max_delay   cap on any one computed delay, before jitter
    jitter      "full" (random between 0 and the delay), "equal" (half fixed, half random)
                or "none"
    """

    attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 30.0
    jitter: str = "full"
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")
        if self.base_delay < 0 or self.max_delay < self.base_delay:
            raise ValueError("need 0 <= base_delay <= max_delay")
        if self.jitter not in ("full", "equal", "none"):
            raise ValueError(f"unknown jitter {self.jitter!r}")

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first retry)."""
        ceiling = min(self.max_delay, self.base_delay * (2 ** (retry - 1)))
        if self.jitter == "full":
            return self.rng.uniform(0.0, ceiling)
        if self.jitter == "equal":
            return ceiling / 2 + self.rng.uniform(0.0, ceiling / 2)
        return ceiling


def retry_after_seconds(headers: dict[str, str], now: float | None = None) -> float | None:
    """The server's Retry-After header as seconds from now, or None when absent or unreadable.

    The header is either a number of seconds ("120") or an HTTP date
    ("Wed, 21 Oct 2015 07:28:00 GMT"). Dates in the past mean "now".
    """
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_RETRY_AFTER)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    seconds = when.timestamp() - (time.time() if now is None else now)
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def is_retryable(response: Response) -> bool:
    return response.status_code in RETRYABLE_STATUSES


def call_with_retry(
    call: Callable[[], T],
    policy: RetryPolicy | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
    retry_on: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError),
) -> T:
    """Runs ``call`` until it returns a non-retryable response or the attempts run out.

    ``call`` returns a response-like object (anything with ``status_code`` and ``headers``) or
    raises. Exceptions listed in ``retry_on`` are retried; any other exception propagates at
    once, because it is most likely a bug on our side. ``sleep`` is injectable so tests run
    without waiting. Without a policy, five attempts from half a second up to thirty.
    """
    policy = policy or RetryPolicy()
    last: object = None
    for attempt in range(1, policy.attempts + 1):
        try:
            result = call()
        except retry_on as exc:
            last = exc
            wait = policy.delay(attempt)
        else:
            if not is_retryable(result):  # type: ignore[arg-type]
                return result
            last = result
            server_wait = retry_after_seconds(result.headers)  # type: ignore[attr-defined]
            wait = server_wait if server_wait is not None else policy.delay(attempt)
        if attempt < policy.attempts:
            sleep(wait)
    raise RetryError(policy.attempts, last)
