"""Lease rules shared by every driver: token format, redelivery backoff, defaults.

The one definition of each: drivers build and parse tokens with the functions here, and
their SQL uses the constants here (tests/integration/test_lease_rules.py holds each driver's
SQL to ``redelivery_backoff`` and to this token format).

A lease token is ``<expiration in µs since epoch, 14 hex digits><16 random hex digits>``,
optionally followed by ``.<locator>`` in hex: the row's place (SQLite: its rowid;
PostgreSQL: its ctid), so renewing finds the row without an index on tokens.
Carrying the expiration lets ``renew_lease`` tell an *expired* token (no row, as Spanner
documents) from one whose message was acked or taken over (a row with no new token) without
keeping history. The random part makes each lease unique. Fourteen hex digits carry
expirations up to the year 4253; leases and renewals are at most
``txqueue.core.durations.MAX_DURATION`` (100 years), so every token handed out names its
lease on every engine.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from datetime import timedelta

__all__ = [
    "DEFAULT_LEASE",
    "LOCATOR_SEPARATOR",
    "LOCATOR_START",
    "MAX_BACKOFF_EXPONENT",
    "MAX_BACKOFF_SECONDS",
    "MAX_LOCATOR",
    "STORED_TOKEN_LENGTH",
    "TOKEN_EXPIRATION_DIGITS",
    "TOKEN_RANDOM_DIGITS",
    "handed_out_token",
    "is_token",
    "new_stored_token",
    "redelivery_backoff",
    "split_token",
    "token_expiration_micros",
    "token_locator",
]

DEFAULT_LEASE = timedelta(seconds=10)
MAX_BACKOFF_SECONDS = 3600
#: 2**12 s > 1 h, so exponents are clamped here before the cap (keeps SQL integer math small).
MAX_BACKOFF_EXPONENT = 12
TOKEN_EXPIRATION_DIGITS = 14
TOKEN_RANDOM_DIGITS = 16
#: The part of a token its row stores: expiration (14 hex) + random (16 hex).
STORED_TOKEN_LENGTH = TOKEN_EXPIRATION_DIGITS + TOKEN_RANDOM_DIGITS
#: Between the stored part and the locator of a handed-out token.
LOCATOR_SEPARATOR = "."
#: Where a handed-out token's locator starts.
LOCATOR_START = STORED_TOKEN_LENGTH + len(LOCATOR_SEPARATOR)
#: the stored part [+ "." + a locator the engine may add, in hex]
_TOKEN = re.compile(
    rf"[0-9a-f]{{{STORED_TOKEN_LENGTH}}}(?:{re.escape(LOCATOR_SEPARATOR)}[0-9a-f]{{1,16}})?\Z"
)


def redelivery_backoff(expired_leases: int) -> timedelta:
    """Delay after the n-th expired lease before the message is receivable again.

    ``min(2^(n-1) s, 1 h)``: 1 s, 2 s, 4 s, … capped at an hour (txqueue's choice: Spanner
    documents "backoff during the first hour, then hourly"). n = 0 means no delay.
    """
    if expired_leases <= 0:
        return timedelta(0)
    exponent = min(expired_leases - 1, MAX_BACKOFF_EXPONENT)
    return timedelta(seconds=min(2**exponent, MAX_BACKOFF_SECONDS))


#: A locator is a row's place (SQLite: its rowid, at most INT64's maximum).
MAX_LOCATOR = 2**63 - 1


def new_stored_token(expiration_micros: int) -> str:
    """A fresh stored part of a token: ``expiration_micros`` in hex and a random part."""
    random = secrets.token_hex(TOKEN_RANDOM_DIGITS // 2)
    return f"{expiration_micros:0{TOKEN_EXPIRATION_DIGITS}x}{random}"


#: The token handed to a receiver, ``handed_out_token(stored, locator)``: the stored part and
#: its row's ``locator`` in hex. A bound ``str.format``, as it runs once per received message.
handed_out_token: Callable[[str, int], str] = f"{{}}{LOCATOR_SEPARATOR}{{:x}}".format


def split_token(token: str) -> tuple[str, str | None]:
    """The stored part and the locator (hex text, None when absent) of a token."""
    stored, separator, locator = token.partition(LOCATOR_SEPARATOR)
    return stored, locator if separator else None


def is_token(token: str) -> bool:
    """True when ``token`` has the shape of one of ours (it may still hold no lease)."""
    if _TOKEN.match(token) is None:
        return False
    # The pattern matched: the locator, when there is one, is what follows LOCATOR_START.
    return len(token) <= LOCATOR_START or int(token[LOCATOR_START:], 16) <= MAX_LOCATOR


def token_expiration_micros(token: object) -> int | None:
    """The lease expiration a token carries, or None when the token is not one of ours."""
    if not isinstance(token, str) or not is_token(token):
        return None
    return int(token[:TOKEN_EXPIRATION_DIGITS], 16)


def token_locator(token: str) -> int | None:
    """The engine's locator a token carries (SQLite: the message's rowid), if any.

    None also for a token that is not one of ours: it locates no row.
    """
    if not is_token(token):
        return None
    locator = split_token(token)[1]
    return None if locator is None else int(locator, 16)
