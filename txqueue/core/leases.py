"""Lease rules shared by every driver: token format, redelivery backoff, defaults.

A lease token is ``<expiration in µs since epoch, 14 hex digits><16 random hex digits>``,
optionally followed by ``.<locator>``: SQLite appends the message's rowid, so renewing finds
the row without an index on tokens.
Carrying the expiration lets ``renew_lease`` tell an *expired* token (no row, as Spanner
documents) from one whose message was acked or taken over (a row with no new token) without
keeping history. The random part makes each lease unique.
"""

from __future__ import annotations

import re
from datetime import timedelta

__all__ = [
    "DEFAULT_LEASE",
    "MAX_BACKOFF_EXPONENT",
    "MAX_BACKOFF_SECONDS",
    "STORED_TOKEN_LENGTH",
    "TOKEN_EXPIRATION_DIGITS",
    "redelivery_backoff",
    "token_expiration_micros",
    "token_locator",
]

DEFAULT_LEASE = timedelta(seconds=10)
MAX_BACKOFF_SECONDS = 3600
#: 2**12 s > 1 h, so exponents are clamped here before the cap (keeps SQL integer math small).
MAX_BACKOFF_EXPONENT = 12
TOKEN_EXPIRATION_DIGITS = 14
#: The part of a token its row stores: expiration (14 hex) + random (16 hex).
STORED_TOKEN_LENGTH = TOKEN_EXPIRATION_DIGITS + 16
#: the stored part [+ "." + a locator the engine may add, in hex]
_TOKEN = re.compile(rf"[0-9a-f]{{{STORED_TOKEN_LENGTH}}}(?:\.[0-9a-f]{{1,16}})?\Z")


def redelivery_backoff(expired_leases: int) -> timedelta:
    """Delay after the n-th expired lease before the message is receivable again.

    ``min(2^(n-1) s, 1 h)``: 1 s, 2 s, 4 s, … capped at an hour (SPEC §3, a decision: Spanner
    documents "backoff during the first hour, then hourly"). n = 0 means no delay.
    """
    if expired_leases <= 0:
        return timedelta(0)
    exponent = min(expired_leases - 1, MAX_BACKOFF_EXPONENT)
    return timedelta(seconds=min(2**exponent, MAX_BACKOFF_SECONDS))


def is_token(token: str) -> bool:
    """True when ``token`` has the shape of one of ours (it may still hold no lease)."""
    return _TOKEN.match(token) is not None


def token_expiration_micros(token: object) -> int | None:
    """The lease expiration a token carries, or None when the token is not one of ours."""
    if not isinstance(token, str) or not is_token(token):
        return None
    return int(token[:TOKEN_EXPIRATION_DIGITS], 16)


def token_locator(token: str) -> int | None:
    """The engine's locator a token carries (SQLite: the message's rowid), if any."""
    _, dot, locator = token.partition(".")
    return int(locator, 16) if dot else None
