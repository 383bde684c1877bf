"""The lease rules of ``txqueue.core.leases`` are the ones each engine's SQL applies.

The redelivery backoff and the lease token are decided once, in ``core.leases``; the drivers
apply them inside their SQL. These tests hold each driver to that one rule on a pinned clock:
after the n-th lease expires the message is receivable again exactly
``redelivery_backoff(n)`` later (n = 1..13, past the one-hour cap), both after a receive and
after a renewal, and every token a driver hands out is parsed by ``core.leases`` back to its
lease's expiration.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

import txqueue
from txqueue.core.leases import is_token, redelivery_backoff, token_expiration_micros
from txqueue.testing import FakeClock

LEASE = timedelta(seconds=5)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime(2030, 1, 1, 12, 0, 0, 123456, tzinfo=UTC))


@pytest.fixture
def db(database_url: str, clock: FakeClock) -> Iterator[txqueue.Database]:
    with txqueue.connect(database_url, clock=clock, dialect="googlesql") as database:
        database.update_ddl(
            ["CREATE QUEUE jobs (id INT64 NOT NULL, payload BYTES(MAX)) PRIMARY KEY (id)"]
        )
        database.run_in_transaction(lambda txn: txn.send("jobs", (1,), b"x"))
        yield database


def _expiration_of(token: str) -> datetime:
    micros = token_expiration_micros(token)
    assert micros is not None, f"{token!r} is not a lease token"
    return EPOCH + timedelta(microseconds=micros)


def test_each_driver_applies_the_one_backoff_rule(db: txqueue.Database, clock: FakeClock) -> None:
    for count in range(1, 14):
        [message] = db.receive_now("jobs", lease_duration=LEASE)
        assert message.delivery_count == count
        assert is_token(message.lease_token)
        assert _expiration_of(message.lease_token) == message.lease_expiration
        again = message.lease_expiration + redelivery_backoff(count)
        clock.set(again - MICROSECOND)
        assert db.receive_now("jobs", lease_duration=LEASE) == [], f"early after lease {count}"
        clock.set(again)


def test_a_renewed_lease_keeps_the_backoff_of_its_count(
    db: txqueue.Database, clock: FakeClock
) -> None:
    for count in range(1, 14):
        [message] = db.receive_now("jobs", lease_duration=LEASE)
        clock.advance(timedelta(seconds=1))
        [renewal] = db.renew_lease("jobs", [message.lease_token], LEASE)
        assert renewal.new_token is not None and is_token(renewal.new_token)
        assert renewal.lease_expiration == clock() + LEASE
        assert _expiration_of(renewal.new_token) == renewal.lease_expiration
        again = renewal.lease_expiration + redelivery_backoff(count)
        clock.set(again - MICROSECOND)
        assert db.receive_now("jobs", lease_duration=LEASE) == [], f"early after lease {count}"
        clock.set(again)
