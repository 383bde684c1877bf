"""A message through its lease states on a pinned clock: leased, expired but backing off,
receivable again; what ``queue_info`` counts and when an idle receiver should look again.

On PostgreSQL a lease leaves its message where it was in the ready index (a heap-only
update) and gates it by expiration plus backoff; SQLite moves it. Both must agree here.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

import txqueue
from txqueue.testing import FakeClock

from .support import Face, dialect_name

LEASE = timedelta(seconds=10)
DDL = {
    "googlesql": "CREATE QUEUE Jobs (Id INT64 NOT NULL, Payload BYTES(MAX) NOT NULL)"
    " PRIMARY KEY (Id)",
    "postgresql": "CREATE QUEUE jobs (id bigint NOT NULL, payload bytea NOT NULL,"
    " PRIMARY KEY (id))",
}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def db(face: Face, database_url: str, clock: FakeClock) -> Iterator[txqueue.Database]:
    db = face.connect(database_url, clock=clock)
    try:
        db.update_ddl([DDL[dialect_name(db.dialect)]])
        yield db
    finally:
        db.close()


def _counts(db: txqueue.Database) -> tuple[int, int, int]:
    info = db.queue_info("jobs")
    return info.ready, info.leased, info.scheduled


def _seconds_until_ready(db: txqueue.Database) -> float | None:
    """What an idle receiver computes before it sleeps (the driver's receiver)."""
    driver: Any = db._driver  # type: ignore[attr-defined]
    table = db.queue("jobs")
    receiver = driver.open_receiver(table)
    try:
        seconds: float | None = receiver.seconds_until_ready(table)
        return seconds
    finally:
        receiver.close()


def test_a_leased_message_is_counted_and_awaited_through_its_lease_and_backoff(
    db: txqueue.Database, clock: FakeClock
) -> None:
    with db.batch() as batch:
        batch.send("jobs", (1,), b"x")
    assert _counts(db) == (1, 0, 0)
    assert _seconds_until_ready(db) == pytest.approx(0, abs=0.01)

    [first] = db.receive_now("jobs", lease_duration=LEASE)
    assert _counts(db) == (0, 1, 0)
    # not "ready now" (a receiver would look again at once, and again): lease + 1 s backoff
    assert _seconds_until_ready(db) == pytest.approx(11, abs=0.01)

    clock.advance(10.5)  # the lease expired; the first backoff (1 s) runs until 11 s
    assert db.receive_now("jobs") == []
    assert _counts(db) == (0, 0, 1)
    assert _seconds_until_ready(db) == pytest.approx(0.5, abs=0.01)

    clock.advance(1)
    assert _counts(db) == (1, 0, 0)
    [second] = db.receive_now("jobs", lease_duration=LEASE)
    assert (second.key, second.delivery_count) == (first.key, 2)
    assert second.lease_token != first.lease_token


def test_a_renewed_lease_moves_the_message_s_gate(db: txqueue.Database, clock: FakeClock) -> None:
    with db.batch() as batch:
        batch.send("jobs", (1,), b"x")
    [message] = db.receive_now("jobs", lease_duration=LEASE)
    clock.advance(8)
    [renewal] = db.renew_lease("jobs", [message.lease_token], timedelta(seconds=30))
    assert renewal.new_token is not None
    assert _seconds_until_ready(db) == pytest.approx(31, abs=0.01)
    clock.advance(20)  # past the first lease's expiration and backoff: still leased
    assert db.receive_now("jobs") == []
    assert _counts(db) == (0, 1, 0)


def test_a_released_message_waits_for_its_delay_behind_a_leased_one(
    db: txqueue.Database, clock: FakeClock
) -> None:
    with db.batch() as batch:
        batch.send("jobs", (1,), b"x")
        batch.send("jobs", (2,), b"y")
    _, second = db.receive_now("jobs", lease_duration=LEASE, max_batch_size=2)
    db.release_lease("jobs", [second.lease_token], delay=timedelta(seconds=3))
    assert _counts(db) == (0, 1, 1)
    assert _seconds_until_ready(db) == pytest.approx(3, abs=0.01)
    clock.advance(3)
    [again] = db.receive_now("jobs", lease_duration=LEASE, max_batch_size=2)
    assert again.key == second.key
