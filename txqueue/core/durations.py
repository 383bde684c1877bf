"""Durations and timestamps: parsing Spanner duration strings, checking timedelta arguments.

Every duration argument, in the API and on the command line, is at most `MAX_DURATION`
(100 years): far beyond any sane lease, wait or retention, and small enough that "now"
plus or minus it is a time every engine stores and a lease token carries (see
``txqueue.core.leases``), so nothing accepted here fails later with an overflow.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone

from txqueue.errors import InvalidArgument

__all__ = [
    "EPOCH",
    "MAX_DURATION",
    "from_micros",
    "parse_duration",
    "require_aware",
    "to_duration",
    "to_micros",
]

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
#: The longest duration any argument may be (a lease, a wait, a retention, a delay).
MAX_DURATION = timedelta(days=36_500)
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*\Z", re.ASCII)


def parse_duration(text: str, field: str = "duration") -> timedelta:
    """Parse ``'20m'``, ``'90s'``, ``'1h'``, ``'500ms'`` or ``'2d'`` into a timedelta."""
    match = _DURATION.match(text) if isinstance(text, str) else None
    if match is None:
        raise InvalidArgument(
            f"{field} {_shown(text)} is not a duration: write a number and a unit, "
            "one of ms, s, m, h, d (e.g. '20m')"
        )
    seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if not math.isfinite(seconds) or seconds > MAX_DURATION.total_seconds():
        raise InvalidArgument(f"{field} {_shown(text)} is longer than {_maximum()}")
    return timedelta(seconds=seconds)


def to_duration(value: object, field: str, *, allow_zero: bool = False) -> timedelta:
    """Accept a timedelta (or a duration string) that is positive; name ``field`` otherwise."""
    if isinstance(value, str):
        value = parse_duration(value, field)
    if not isinstance(value, timedelta):
        raise InvalidArgument(f"{field} must be a datetime.timedelta, got {type(value).__name__}")
    if value < timedelta(0) or (value == timedelta(0) and not allow_zero):
        raise InvalidArgument(f"{field} must be positive, got {value}")
    if value > MAX_DURATION:
        raise InvalidArgument(f"{field} must be at most {_maximum()}, got {value}")
    return value


def require_aware(value: object, field: str) -> datetime:
    """Return ``value`` as a UTC datetime; naive datetimes are refused (their zone is a guess)."""
    if not isinstance(value, datetime):
        raise InvalidArgument(f"{field} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(f"{field} must be timezone-aware (got a naive datetime)")
    try:
        return value.astimezone(timezone.utc)
    except OverflowError as error:  # e.g. 9999-12-31 23:00 at -14:00 is after 9999 in UTC
        raise InvalidArgument(
            f"{field} {value.isoformat()} is outside the years 1 to 9999 in UTC"
        ) from error


def to_micros(value: datetime) -> int:
    """Microseconds since the Unix epoch, exactly (no float rounding)."""
    delta = value - EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(micros: int) -> datetime:
    """The UTC datetime ``micros`` microseconds after the Unix epoch."""
    return EPOCH + timedelta(microseconds=micros)


def _maximum() -> str:
    return f"{MAX_DURATION.days} days (100 years)"


def _shown(text: object) -> str:
    """``text`` for an error message: its repr, cut short when long (a message stays a line)."""
    shown = repr(text)
    return shown if len(shown) <= 60 else f"{shown[:57]}..."
