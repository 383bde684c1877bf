"""RetryPolicy: Eventarc Advanced's retry semantics, shared by the worker and the event layer.

Delay before retry k (k = 1 for the first retry) is ``min(min_retry_delay * 2^(k-1),
max_retry_delay)``; the factor 2 is fixed, so min = max gives linear (constant) backoff, and
``max_attempts = 1`` means no retry at all (as in Eventarc Advanced).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

from txqueue.errors import InvalidArgument

__all__ = ["MAX_ATTEMPTS", "RetryPolicy"]

_MIN_DELAY = timedelta(seconds=1)
_MAX_DELAY = timedelta(seconds=600)
#: The most attempts a policy may allow: INT64's largest value, as stored and as Eventarc takes.
MAX_ATTEMPTS = 2**63 - 1


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long apart a failing delivery or handler is tried.

    ``max_attempts`` counts every try, the first included (default 5). Delays are 1–600 s.
    ``jitter`` (off by default) spreads each delay uniformly over ±jitter of itself.
    """

    max_attempts: int = 5
    min_retry_delay: timedelta = timedelta(seconds=1)
    max_retry_delay: timedelta = timedelta(seconds=60)
    jitter: float = 0.0

    def __post_init__(self) -> None:
        attempts = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int):
            raise InvalidArgument(f"max_attempts must be a positive integer up to {MAX_ATTEMPTS}")
        if not 1 <= attempts <= MAX_ATTEMPTS:
            shown = attempts if attempts.bit_length() <= 256 else "a larger number"
            raise InvalidArgument(
                f"max_attempts must be a positive integer up to {MAX_ATTEMPTS} (INT64), got {shown}"
            )
        for field in ("min_retry_delay", "max_retry_delay"):
            value = getattr(self, field)
            if not isinstance(value, timedelta):
                raise InvalidArgument(f"{field} must be a datetime.timedelta")
            if not _MIN_DELAY <= value <= _MAX_DELAY:
                raise InvalidArgument(
                    f"{field} must be between 1 s and 600 s, got {value.total_seconds():g} s"
                )
        if self.min_retry_delay > self.max_retry_delay:
            raise InvalidArgument("min_retry_delay must not exceed max_retry_delay")
        if not 0.0 <= self.jitter <= 1.0:
            raise InvalidArgument(f"jitter must be between 0 and 1, got {self.jitter}")

    def delay(self, retry: int) -> timedelta:
        """The delay before retry number ``retry`` (1-based), jitter included."""
        if retry < 1:
            raise InvalidArgument(f"retry must be at least 1, got {retry}")
        exponent = min(retry - 1, 20)
        base: timedelta = min(self.min_retry_delay * (2**exponent), self.max_retry_delay)
        if self.jitter:
            base = base * (1 + random.uniform(-self.jitter, self.jitter))
        return base

    def should_retry(self, attempts_made: int) -> bool:
        """Whether another attempt is allowed after ``attempts_made`` tries."""
        return attempts_made < self.max_attempts
