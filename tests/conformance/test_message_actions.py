"""Acting on chosen messages: ``delete_messages`` (cancel) and ``make_ready`` (ready now, or
at another deliver time), all or nothing, refusing messages under a live lease unless forced.

On a pinned clock, so leases and backoffs need no sleeping; once per engine and face.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

import txqueue
from txqueue.errors import FailedPrecondition, InvalidArgument, NotFound
from txqueue.testing import FakeClock

from .support import BackgroundReceiver, Env, Face, dialect_name, seconds

LEASE = timedelta(seconds=10)
DDL = {
    "googlesql": "CREATE QUEUE Jobs (Id INT64 NOT NULL, Name STRING(20) NOT NULL,"
    " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id, Name)",
    "postgresql": "CREATE QUEUE jobs (id bigint NOT NULL, name varchar(20) NOT NULL,"
    " payload bytea NOT NULL, PRIMARY KEY (id, name))",
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


def _send(
    db: txqueue.Database, *keys: tuple[int, str], deliver_time: datetime | None = None
) -> None:
    with db.batch() as batch:
        for key in keys:
            batch.send("jobs", key, b"x", deliver_time=deliver_time)


def _keys(db: txqueue.Database) -> list[tuple[object, ...]]:
    return [m.key for m in db.list_messages("jobs")]


def _states(db: txqueue.Database) -> dict[tuple[object, ...], str]:
    return {m.key: m.state for m in db.list_messages("jobs")}


def _ack(db: txqueue.Database, key: tuple[object, ...], token: str) -> None:
    with db.batch() as batch:
        batch.ack("jobs", key, lease_token=token)


# ---- delete_messages ------------------------------------------------------------------


def test_deleting_waiting_messages_removes_them(db: txqueue.Database, clock: FakeClock) -> None:
    _send(db, (1, "a"), (2, "b"))
    _send(db, (3, "c"), deliver_time=clock() + timedelta(hours=1))
    assert db.delete_messages("jobs", [(1, "a"), [3, "c"], (1, "a")]) == 2
    assert _keys(db) == [(2, "b")]


def test_a_leased_message_is_refused_and_keeps_its_lease(db: txqueue.Database) -> None:
    _send(db, (1, "a"))
    [message] = db.receive_now("jobs", lease_duration=LEASE)
    with pytest.raises(FailedPrecondition, match=r"\(1, 'a'\)"):
        db.delete_messages("jobs", [(1, "a")])
    assert _states(db) == {(1, "a"): "leased"}
    [renewal] = db.renew_lease("jobs", [message.lease_token], LEASE)
    assert renewal.new_token is not None  # the lease is intact
    _ack(db, (1, "a"), renewal.new_token)
    assert _keys(db) == []


def test_force_deletes_a_leased_message_and_its_ack_is_not_found(db: txqueue.Database) -> None:
    _send(db, (1, "a"))
    [message] = db.receive_now("jobs", lease_duration=LEASE)
    assert db.delete_messages("jobs", [(1, "a")], force=True) == 1
    assert _keys(db) == []
    with pytest.raises(NotFound):
        _ack(db, (1, "a"), message.lease_token)


def test_an_expired_lease_does_not_hold_a_message(db: txqueue.Database, clock: FakeClock) -> None:
    _send(db, (1, "a"))
    db.receive_now("jobs", lease_duration=LEASE)
    clock.advance(LEASE + seconds(0.5))  # expired, backing off: not leased any more
    assert db.delete_messages("jobs", [(1, "a")]) == 1


def test_unknown_keys_are_named_and_nothing_is_deleted(db: txqueue.Database) -> None:
    _send(db, (1, "a"), (2, "b"))
    with pytest.raises(NotFound, match=r"\(7, 'x'\).*nothing was changed"):
        db.delete_messages("jobs", [(1, "a"), (7, "x"), (2, "b")])
    assert _keys(db) == [(1, "a"), (2, "b")]


def test_one_leased_message_in_a_selection_refuses_it_all(db: txqueue.Database) -> None:
    _send(db, (1, "a"))
    db.receive_now("jobs", lease_duration=LEASE)
    _send(db, (2, "b"), (3, "c"))
    with pytest.raises(FailedPrecondition, match=r"\(1, 'a'\)"):
        db.delete_messages("jobs", [(2, "b"), (1, "a"), (3, "c")])
    assert _keys(db) == [(1, "a"), (2, "b"), (3, "c")]
    assert db.delete_messages("jobs", [(2, "b"), (1, "a"), (3, "c")], force=True) == 3
    assert _keys(db) == []


# ---- make_ready -----------------------------------------------------------------------


def test_a_scheduled_message_made_ready_is_receivable_now(
    db: txqueue.Database, clock: FakeClock
) -> None:
    _send(db, (1, "a"), deliver_time=clock() + timedelta(days=2))
    assert db.receive_now("jobs") == []
    assert db.make_ready("jobs", [(1, "a")]) == 1
    [message] = db.receive_now("jobs")
    assert message.key == (1, "a")
    assert message.deliver_time == clock()


def test_a_backed_off_message_made_ready_is_receivable_now(
    db: txqueue.Database, clock: FakeClock
) -> None:
    _send(db, (1, "a"))
    for _ in range(6):  # six lost leases: the next backoff is 32 s
        db.receive_now("jobs", lease_duration=LEASE)
        clock.advance(LEASE + timedelta(minutes=2))
    db.receive_now("jobs", lease_duration=LEASE)
    clock.advance(LEASE + seconds(1))
    assert _states(db) == {(1, "a"): "scheduled"}
    assert db.make_ready("jobs", [(1, "a")]) == 1
    [message] = db.receive_now("jobs")
    assert (message.key, message.delivery_count) == ((1, "a"), 8)


def test_a_later_deliver_time_puts_a_message_off(db: txqueue.Database, clock: FakeClock) -> None:
    _send(db, (1, "a"), (2, "b"))
    later = clock() + timedelta(hours=3)
    assert db.make_ready("jobs", [(1, "a")], deliver_time=later) == 1
    [ready] = db.receive_now("jobs", max_batch_size=10)
    assert ready.key == (2, "b")
    _ack(db, ready.key, ready.lease_token)
    [stored] = db.list_messages("jobs", state="scheduled")
    assert (stored.key, stored.deliver_time) == ((1, "a"), later)
    clock.set(later - seconds(1))
    assert db.receive_now("jobs") == []
    clock.set(later)
    assert [m.key for m in db.receive_now("jobs")] == [(1, "a")]


def test_a_naive_deliver_time_is_refused_before_any_write(
    db: txqueue.Database, clock: FakeClock
) -> None:
    _send(db, (1, "a"), deliver_time=clock() + timedelta(hours=1))
    naive = clock().replace(tzinfo=None)
    with pytest.raises(InvalidArgument, match="deliver_time must be timezone-aware"):
        db.make_ready("jobs", [(1, "a")], deliver_time=naive)
    assert _states(db) == {(1, "a"): "scheduled"}


def test_a_leased_message_is_not_made_ready_without_force(db: txqueue.Database) -> None:
    _send(db, (1, "a"), (2, "b"))
    [message] = db.receive_now("jobs", lease_duration=LEASE)
    with pytest.raises(FailedPrecondition, match=r"\(1, 'a'\)"):
        db.make_ready("jobs", [(2, "b"), (1, "a")])
    assert _states(db) == {(1, "a"): "leased", (2, "b"): "ready"}
    with pytest.raises(NotFound, match=r"\(9, 'z'\)"):
        db.make_ready("jobs", [(2, "b"), (9, "z")])
    assert db.make_ready("jobs", [(1, "a")], force=True) == 1
    assert _states(db) == {(1, "a"): "ready", (2, "b"): "ready"}
    with pytest.raises(FailedPrecondition):  # its old holder lost the lease
        _ack(db, (1, "a"), message.lease_token)
    assert sorted(m.key for m in db.receive_now("jobs", max_batch_size=10)) == [(1, "a"), (2, "b")]


@pytest.mark.parametrize(
    ("keys", "options", "rule"),
    [
        ([], {}, "keys must be a non-empty list"),
        ("a", {}, "keys must be a non-empty list"),
        ([(1,)], {}, "keys\\[0\\]"),
        ([(1, "a")], {"force": "yes"}, "force must be a bool"),
        ([(1, "a")], {"deliver_time": "now"}, "deliver_time must be a datetime"),
    ],
)
def test_bad_arguments_are_refused(
    db: txqueue.Database, keys: object, options: dict[str, object], rule: str
) -> None:
    _send(db, (1, "a"))
    with pytest.raises(InvalidArgument, match=rule):
        db.make_ready("jobs", keys, **options)  # type: ignore[arg-type]
    if "deliver_time" not in options:
        with pytest.raises(InvalidArgument, match=rule):
            db.delete_messages("jobs", keys, **options)  # type: ignore[arg-type]
    assert _keys(db) == [(1, "a")]


def test_making_a_message_ready_wakes_a_waiting_receiver(env: Env) -> None:
    """A receive stream waiting for a message scheduled a day ahead gets it within a second
    of ``make_ready`` (a wake-up, not the stream's next look)."""
    env.add_users(1)
    env.send(1, "a", deliver_time=txqueue_now() + timedelta(days=1))
    receiver = BackgroundReceiver(
        env.url, env.tasks, face=env.face, max_duration=seconds(30), limit=1
    ).start()
    assert not receiver.arrived.wait(1.0)
    started = time.monotonic()
    assert env.db.make_ready(env.tasks, [(1, "a")]) == 1
    assert receiver.arrived.wait(10)
    assert time.monotonic() - started < 1.0
    receiver.join()
    assert [m.key for m, _ in receiver.received] == [(1, "a")]


def txqueue_now() -> datetime:
    from .support import utcnow

    return utcnow()
