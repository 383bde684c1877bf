"""Delivery outcomes: which HTTP statuses are retried, and how long to wait before the retry.

The classes follow Eventarc Advanced: 408, 409, 429, 500, 502, 503 and 504 are
transient and retried; every other non-2xx status is permanent. Redirects are not followed, so
a 3xx is permanent too, as is a 1xx final status.
"""

from __future__ import annotations

import enum
import re
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime

from txqueue.core.durations import require_aware
from txqueue.core.retry import RetryPolicy
from txqueue.errors import InvalidArgument

__all__ = [
    "TRANSIENT_STATUSES",
    "AttemptKind",
    "classify_status",
    "next_delay",
    "parse_retry_after",
]

TRANSIENT_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
_DELTA_SECONDS = re.compile(r"\d+\Z")
_LONGEST = timedelta(days=365)  # caps absurd Retry-After values; next_delay caps far lower


class AttemptKind(enum.Enum):
    """How one delivery attempt ended."""

    SUCCESS = "success"
    TRANSIENT = "transient"
    PERMANENT = "permanent"


def classify_status(status: int) -> AttemptKind:
    """SUCCESS for 2xx, TRANSIENT for the retryable statuses, PERMANENT for anything else."""
    if 200 <= status <= 299:
        return AttemptKind.SUCCESS
    if status in TRANSIENT_STATUSES:
        return AttemptKind.TRANSIENT
    return AttemptKind.PERMANENT


def parse_retry_after(value: str | None, now: datetime) -> timedelta | None:
    """The wait a ``Retry-After`` header asks for (delta-seconds or HTTP-date), or None.

    A date in the past means no wait (zero); anything unparseable is ignored (None), since a
    receiver's malformed header must not fail the delivery.
    """
    if value is None:
        return None
    text = value.strip()
    if _DELTA_SECONDS.match(text):
        digits = text.lstrip("0") or "0"
        if len(digits) > 12:  # beyond any sane wait, and beyond what timedelta holds
            return _LONGEST
        return min(timedelta(seconds=int(digits)), _LONGEST)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000": UTC with no claim about local time (RFC 5322)
        when = when.replace(tzinfo=timezone.utc)
    wait = when - require_aware(now, "now")
    return min(max(wait, timedelta(0)), _LONGEST)


def next_delay(policy: RetryPolicy, attempt: int, retry_after: timedelta | None) -> timedelta:
    """The wait after failed attempt ``attempt`` (1-based): the policy's delay for retry
    ``attempt``, raised to ``retry_after`` when that is longer.

    The result always lies within ``[policy.min_retry_delay, policy.max_retry_delay]``: a
    receiver cannot stretch the wait past the configured maximum, and jitter cannot push the
    delay outside the configured range either.
    """
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise InvalidArgument(f"attempt must be an integer of at least 1, got {attempt!r}")
    delay = policy.delay(attempt)
    if retry_after is not None and retry_after > delay:
        delay = retry_after
    return min(max(delay, policy.min_retry_delay), policy.max_retry_delay)
