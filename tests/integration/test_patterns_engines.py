"""txqueue.patterns and the idempotency ledger on real engines (SQLite and PostgreSQL).

Lease and schedule arithmetic runs on a pinned clock (``connect(url, clock=...)``), so no
test sleeps for a lease to pass; only `keep_lease_alive`, whose point is real time passing,
uses a short real lease.

(Named ``test_patterns_engines`` because ``tests/unit/test_patterns.py`` owns the basename in
pytest's default import mode.)
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import txqueue
from txqueue import patterns
from txqueue.errors import FailedPrecondition, NotFound

LEASE = timedelta(seconds=10)
SCHEMA = {
    "googlesql": (
        "CREATE QUEUE Jobs (JobId INT64 NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (JobId)",
        "CREATE TABLE Effects (Name STRING(64) NOT NULL, Detail STRING(MAX)) PRIMARY KEY (Name)",
    ),
    "postgresql": (
        "CREATE QUEUE jobs (jobid bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (jobid))",
        "CREATE TABLE effects (name varchar(64) NOT NULL, detail text, PRIMARY KEY (name))",
    ),
}


@dataclass
class Clock:
    now: datetime

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class Env:
    db: txqueue.Database
    clock: Clock
    counter: int = 0

    def send(self, key: int, payload: bytes = b"job") -> None:
        with self.db.batch() as batch:
            batch.send("Jobs", (key,), payload)

    def receive(self, lease: timedelta = LEASE) -> list[txqueue.Message]:
        stream = self.db.receive("Jobs", timedelta(milliseconds=200), 10, lease)
        return list(stream)

    def effect(self, detail: str = "") -> Any:
        """An effect that inserts one uniquely named row (so doubles are countable)."""

        def apply(txn: txqueue.Transaction) -> None:
            self.counter += 1
            txn.insert("Effects", ("Name", "Detail"), [(f"e{self.counter}", detail)])

        return apply

    def effects(self) -> list[str]:
        with self.db.snapshot() as snapshot:
            return sorted(
                row[0] or "" for row in snapshot.execute_sql("SELECT detail FROM effects")
            )

    def queued(self) -> list[int]:
        with self.db.snapshot() as snapshot:
            return sorted(row[0] for row in snapshot.execute_sql("SELECT jobid FROM jobs"))


@pytest.fixture
def env(database_url: str) -> Iterator[Env]:
    # Pinned a little ahead: sends without a deliver time are stamped with the real clock.
    clock = Clock(datetime.now(timezone.utc) + timedelta(seconds=5))
    db = txqueue.connect(database_url, clock=clock)
    try:
        db.update_ddl(list(SCHEMA[db.dialect.value]))
        yield Env(db, clock)
    finally:
        db.close()


# ---- process_then_ack ----------------------------------------------------------------------


def test_process_then_ack_commits_effect_and_ack_together_once(env: Env) -> None:
    env.send(1)
    [message] = env.receive()
    patterns.process_then_ack(env.db, message, env.effect("first"))
    assert env.effects() == ["first"] and env.queued() == []
    # The same delivery processed again (a retry after an error, a duplicate handler run):
    # the ack finds nothing and the effect rolls back with it.
    with pytest.raises(NotFound):
        patterns.process_then_ack(env.db, message, env.effect("again"))
    assert env.effects() == ["first"]


def test_a_worker_that_lost_its_lease_rolls_its_effect_back(env: Env) -> None:
    env.send(1)
    [first] = env.receive()
    env.clock.advance(LEASE.total_seconds() + 1)  # lease over, 1 s backoff over
    [second] = env.receive()
    assert second.delivery_count == 2
    with pytest.raises(FailedPrecondition):
        patterns.process_then_ack(env.db, first, env.effect("stale"))
    assert env.effects() == [] and env.queued() == [1]
    patterns.process_then_ack(env.db, second, env.effect("current"))
    assert env.effects() == ["current"] and env.queued() == []


# ---- ack_and_resend_later --------------------------------------------------------------------


def test_ack_and_resend_later_is_at_most_once_and_retries_after_a_crash(env: Env) -> None:
    env.send(1, b"work")
    [message] = env.receive()
    follow_up = patterns.ack_and_resend_later(env.db, message, key=(2,), delay=timedelta(minutes=5))
    assert follow_up.deliver_time == env.clock.now + timedelta(minutes=5)
    assert env.queued() == [2]  # the original is gone for good
    # The worker dies during the work. Nothing is delivered until the follow-up is due ...
    env.clock.advance(299)
    assert env.receive() == []
    # ... then the follow-up is, with the original payload, and its processing finishes it.
    env.clock.advance(2)
    [retry] = env.receive()
    assert (retry.key, retry.payload) == ((2,), b"work")
    patterns.process_then_ack(env.db, retry, env.effect("done"))
    assert env.effects() == ["done"] and env.queued() == []


def test_finishing_in_time_acks_the_follow_up(env: Env) -> None:
    env.send(1)
    [message] = env.receive()
    follow_up = patterns.ack_and_resend_later(env.db, message, key=(2,), delay=timedelta(minutes=5))
    patterns.process_then_ack(env.db, follow_up, env.effect("done"))
    env.clock.advance(600)
    assert env.receive() == [] and env.queued() == [] and env.effects() == ["done"]


# ---- checkpoint ------------------------------------------------------------------------------


def test_checkpoints_carry_the_state_and_a_crash_resumes_from_the_last(env: Env) -> None:
    env.send(100, json.dumps({"step": 0}).encode())
    [message] = env.receive()
    current: txqueue.Message | patterns.Scheduled = message
    for step in (1, 2):
        current = patterns.checkpoint(
            env.db,
            current,
            key=(100 + step,),
            state=json.dumps({"step": step}).encode(),
            delay=timedelta(minutes=1),
            effect=env.effect(f"step{step}"),
        )
        assert env.queued() == [100 + step]  # always exactly one record of the task
    # The worker dies after step 2; nobody else starts the task until the checkpoint is due.
    assert env.receive() == []
    env.clock.advance(61)
    [resumed] = env.receive()
    assert json.loads(resumed.payload) == {"step": 2}
    assert env.effects() == ["step1", "step2"]


def test_a_checkpoint_on_a_lost_lease_changes_nothing(env: Env) -> None:
    env.send(1)
    [first] = env.receive()
    env.clock.advance(LEASE.total_seconds() + 1)
    [_second] = env.receive()
    with pytest.raises(FailedPrecondition):
        patterns.checkpoint(
            env.db, first, key=(2,), state=b"s", delay=timedelta(minutes=1), effect=env.effect()
        )
    assert env.queued() == [1] and env.effects() == []


# ---- schedule_next_run ----------------------------------------------------------------------


def test_periodic_runs_keep_exactly_one_pending_run_on_the_grid(env: Env) -> None:
    start = env.clock.now
    with env.db.batch() as batch:
        batch.send("Jobs", (0,), b"tick", deliver_time=start)
    every = timedelta(hours=1)
    for run in range(1, 4):
        if run == 2:
            env.clock.advance(90)  # run 2 is picked up late: the schedule does not drift
        [message] = env.receive()
        env.clock.advance(0.5)
        scheduled = patterns.schedule_next_run(
            env.db, message, key=(run,), every=every, payload=b"tick", effect=env.effect()
        )
        assert scheduled.deliver_time == start + run * every
        assert env.queued() == [run]
        assert env.receive() == []  # not due yet
        env.clock.now = start + run * every
    # A late worker (an old delivery of run 3) cannot schedule a second pending run.
    [current] = env.receive()
    env.clock.advance(LEASE.total_seconds() + 1)
    [_retaken] = env.receive()
    with pytest.raises(FailedPrecondition):
        patterns.schedule_next_run(env.db, current, key=(99,), every=every)
    assert env.queued() == [3]
    assert len(env.effects()) == 3


# ---- keep_lease_alive ----------------------------------------------------------------------


def _receive_one(db: txqueue.Database, lease: timedelta) -> txqueue.Message:
    stream = db.receive("Jobs", timedelta(seconds=5), lease_duration=lease)
    try:
        return next(iter(stream))
    finally:
        stream.close()  # type: ignore[attr-defined]


def test_keep_lease_alive_holds_a_message_past_its_lease(database_url: str) -> None:
    lease = timedelta(seconds=1)
    with txqueue.connect(database_url) as db:
        db.update_ddl(list(SCHEMA[db.dialect.value]))
        with db.batch() as batch:
            batch.send("Jobs", (1,), b"long")
        message = _receive_one(db, lease)
        ends = message.lease_expiration
        with patterns.keep_lease_alive(db, message, every=timedelta(milliseconds=200)) as kept:
            deadline = time.monotonic() + 10
            while datetime.now(timezone.utc) < ends + timedelta(seconds=1.2):
                assert time.monotonic() < deadline
                # Past the original lease and its backoff, still nobody else gets it.
                assert list(db.receive("Jobs", timedelta(milliseconds=100))) == []
            kept.stop()
            assert not kept.lost and kept.renewals >= 4
            assert kept.token != message.lease_token
            patterns.process_then_ack(db, kept.message)
        with db.snapshot() as snapshot:
            assert list(snapshot.execute_sql("SELECT jobid FROM jobs")) == []


def test_keep_lease_alive_flags_a_lease_lost_to_an_ack_elsewhere(database_url: str) -> None:
    with txqueue.connect(database_url) as db:
        db.update_ddl(list(SCHEMA[db.dialect.value]))
        with db.batch() as batch:
            batch.send("Jobs", (1,), b"x")
        message = _receive_one(db, timedelta(seconds=5))
        with patterns.keep_lease_alive(db, message, every=timedelta(milliseconds=50)) as kept:
            with db.batch() as batch:  # an operator deletes the message by hand
                batch.ack("Jobs", (1,))
            assert kept.wait_lost(10)
            with pytest.raises(NotFound):
                patterns.process_then_ack(db, kept.message)


# ---- the idempotency ledger ----------------------------------------------------------------


def test_ledger_by_message_key_skips_a_redelivered_message(env: Env) -> None:
    """Effects committed apart from the ack (say, the ack failed): the redelivery is skipped."""
    env.send(1)
    [first] = env.receive()
    key = patterns.message_ledger_key(first)
    assert patterns.run_once(env.db, key, env.effect("charged")) is True
    env.clock.advance(LEASE.total_seconds() + 1)  # the worker died before acking
    [again] = env.receive()
    assert patterns.message_ledger_key(again) == key
    assert patterns.run_once(env.db, key, env.effect("charged twice")) is False
    patterns.process_then_ack(env.db, again)
    assert env.effects() == ["charged"]


def test_ledger_by_cloudevent_source_and_id(env: Env) -> None:
    """The same event published twice (two messages, two message_uids) is applied once."""
    event = {"source": "//shop/orders", "id": "order-42", "type": "order.paid"}
    for message_uid, key in (("uid-1", 1), ("uid-2", 2)):
        env.send(key, json.dumps({**event, "messageuid": message_uid}).encode())
    applied = []

    def handle(txn: txqueue.Transaction, message: txqueue.Message) -> None:
        data = json.loads(message.payload)
        if txn.once(patterns.event_ledger_key(data["source"], data["id"])):
            env.effect(data["messageuid"])(txn)
            applied.append(data["messageuid"])
        txn.ack("Jobs", message.key, lease_token=message.lease_token)

    for message in env.receive():
        env.db.run_in_transaction(handle, message)
    assert applied == ["uid-1"] and env.effects() == ["uid-1"] and env.queued() == []


def test_ledger_by_application_key(env: Env) -> None:
    charge = patterns.ledger_key("charge", "order-42")
    assert patterns.run_once(env.db, charge, env.effect("charged")) is True
    assert patterns.run_once(env.db, charge, env.effect("charged again")) is False
    assert patterns.run_once(env.db, patterns.ledger_key("charge", "order-43"), env.effect("b"))
    assert env.effects() == ["b", "charged"]


def test_ledger_retention_forgets_old_keys(env: Env) -> None:
    key = patterns.ledger_key("charge", "order-7")
    assert patterns.run_once(env.db, key, env.effect("1"))
    assert env.db.expire_ledger(timedelta(hours=1)) == 0  # recent: kept
    assert patterns.run_once(env.db, key, env.effect("2")) is False
    # Once the retention has passed the key is forgotten, and the same key applies again:
    # keep keys longer than any duplicate can arrive.
    deadline = time.monotonic() + 10
    while env.db.expire_ledger(timedelta(milliseconds=1)) == 0:
        assert time.monotonic() < deadline, "the key never aged past 1 ms"
    assert patterns.run_once(env.db, key, env.effect("3")) is True
    assert env.effects() == ["1", "3"]
