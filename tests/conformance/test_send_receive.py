"""Send and receive (SPEC §3): atomic sends, deliver times, streaming, order and batches."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from blocking import Blocking

import txqueue
from txqueue.errors import Aborted, AlreadyExists

from .support import (
    SKEW,
    BackgroundReceiver,
    Env,
    batches,
    receive_timed,
    seconds,
    sleep_until,
    utcnow,
    wait_until,
)


class Boom(Exception):
    """An application error raised inside a transaction."""


def test_sent_message_is_received_with_its_fields(env: Env) -> None:
    env.add_users(1)
    before = utcnow()
    env.send(1, "welcome-email-id", b'{"type": "welcome"}')
    after = utcnow()

    received = env.receive_timed(limit=1, lease_duration=seconds(10))

    assert len(received) == 1
    m, arrived = received[0]
    assert isinstance(m, txqueue.Message)
    assert m.queue.lower() == env.tasks.lower()
    assert m.key == (1, "welcome-email-id")
    assert isinstance(m.key, tuple)
    assert isinstance(m.payload, bytes)
    assert m.payload == b'{"type": "welcome"}'
    assert m.delivery_count == 1
    assert isinstance(m.lease_token, str)
    assert m.lease_token
    assert m.last_in_batch is True
    for stamp in (m.deliver_time, m.lease_expiration):
        assert stamp.tzinfo is not None
        assert stamp.utcoffset() == timedelta(0)
    # default deliver time: the moment of the send
    assert before - SKEW <= m.deliver_time <= after + SKEW
    # the lease runs lease_duration from the moment of receipt
    assert after + seconds(10) - SKEW <= m.lease_expiration <= arrived + seconds(10) + SKEW


def test_acked_message_is_gone(env: Env) -> None:
    env.add_users(1)
    env.send(1, "a")
    m = env.receive_one()
    assert env.task_keys() == [(1, "a")]  # a leased message is still a row of the queue

    env.ack(m.key, lease_token=m.lease_token)

    assert env.task_keys() == []
    assert env.receive(max_duration=seconds(1)) == []


def test_receive_on_empty_queue_streams_until_max_duration(env: Env) -> None:
    started = time.monotonic()
    assert env.receive(max_duration=seconds(1.5)) == []
    elapsed = time.monotonic() - started
    assert elapsed >= 1.4, f"stream ended after {elapsed:.2f} s, before max_duration"
    assert elapsed < 15


def test_exception_in_run_in_transaction_rolls_back_the_send(env: Env) -> None:
    env.add_users(1)
    calls = []

    def work(txn: object) -> None:
        calls.append(txn)
        txn.insert(env.names.users, columns=env.names.user_columns, values=[(2, "two")])
        txn.send(queue=env.tasks, key=(1, "doomed"), payload=b"x")
        raise Boom("the business step failed")

    with pytest.raises(Boom):
        env.db.run_in_transaction(work)

    assert len(calls) == 1, "only Aborted may be retried"
    assert env.state() == ([(1, "user 1")], [])
    assert env.receive(max_duration=seconds(1.5)) == []


def test_exception_inside_batch_discards_the_send(env: Env) -> None:
    env.add_users(1)

    with pytest.raises(Boom), env.db.batch() as b:
        b.insert(env.names.users, columns=env.names.user_columns, values=[(2, "two")])
        b.send(queue=env.tasks, key=(1, "doomed"), payload=b"x")
        raise Boom("raised before the batch commits")

    assert env.state() == ([(1, "user 1")], [])
    assert env.receive(max_duration=seconds(1.5)) == []


def test_run_in_transaction_commits_business_row_and_send_together(env: Env) -> None:
    def work(txn: object, user_id: int, *, name: str) -> str:
        txn.insert(env.names.users, columns=env.names.user_columns, values=[(user_id, name)])
        txn.send(queue=env.tasks, key=(user_id, "welcome"), payload=b"hi")
        return f"created {user_id}"

    assert env.db.run_in_transaction(work, 124, name="New User") == "created 124"

    assert env.state() == ([(124, "New User")], [(124, "welcome")])
    m = env.receive_one()
    assert (m.key, m.payload) == ((124, "welcome"), b"hi")


def test_run_in_transaction_retries_on_aborted_only_once_committed(env: Env) -> None:
    env.add_users(1)
    attempts = []

    def work(txn: object) -> int:
        attempts.append(txn)
        txn.send(queue=env.tasks, key=(1, "retried"), payload=b"x")
        if len(attempts) == 1:
            raise Aborted("simulated conflict")
        return len(attempts)

    assert env.db.run_in_transaction(work) == 2
    # the aborted attempt's send was rolled back, so the retry did not hit AlreadyExists
    assert env.task_keys() == [(1, "retried")]


def test_run_in_transaction_does_not_retry_other_errors(env: Env) -> None:
    env.add_users(1)
    env.send(1, "taken")
    attempts = []

    def work(txn: object) -> None:
        attempts.append(txn)
        txn.send(queue=env.tasks, key=(1, "fresh"), payload=b"x")
        txn.send(queue=env.tasks, key=(1, "taken"), payload=b"x")

    with pytest.raises(AlreadyExists) as caught:
        env.db.run_in_transaction(work)

    assert caught.value.code == "ALREADY_EXISTS"
    assert len(attempts) == 1
    assert env.task_keys() == [(1, "taken")]


def test_transaction_reads_its_own_uncommitted_send(env: Env) -> None:
    env.add_users(1)

    def work(txn: object) -> int:
        before = [tuple(r) for r in txn.execute_sql("SELECT COUNT(*) FROM usertasks")]
        txn.send(queue=env.tasks, key=(1, "mine"), payload=b"x")
        after = [tuple(r) for r in txn.execute_sql("SELECT COUNT(*) FROM usertasks")]
        return before[0][0] * 10 + after[0][0]

    assert env.db.run_in_transaction(work) == 1
    assert env.task_keys() == [(1, "mine")]


def test_execute_update_delete_is_an_ack(env: Env) -> None:
    env.add_users(1)
    env.send(1, "done")
    env.send(1, "keep")
    m = env.receive_one()

    def work(txn: object) -> int:
        return txn.execute_update(
            f"DELETE FROM usertasks WHERE userid = 1 AND messageid = '{m.key[1]}'"
        )

    assert env.db.run_in_transaction(work) == 1
    assert len(env.task_keys()) == 1
    assert m.key not in env.task_keys()


def test_future_deliver_time_is_not_received_early(env: Env) -> None:
    env.add_users(1)
    deliver_time = utcnow() + seconds(3)
    env.send(1, "later", deliver_time=deliver_time)

    early = env.receive_timed(max_duration=seconds(1))
    # Nothing may arrive before its deliver time (on a very slow machine the window may
    # already reach past it; then arriving is fine, arriving early is not).
    for _m, arrived in early:
        assert arrived >= deliver_time - SKEW, "received before its deliver time"
    if utcnow() < deliver_time - SKEW:
        assert early == []
        received = env.receive_timed(max_duration=seconds(10), limit=1)
        assert len(received) == 1, "a scheduled message must be received once due"
        m, arrived = received[0]
        assert m.key == (1, "later")
        assert arrived >= deliver_time - SKEW
        assert abs(m.deliver_time - deliver_time) < timedelta(milliseconds=1)
        assert m.delivery_count == 1


def test_scheduled_message_arrives_on_a_running_stream(env: Env) -> None:
    env.add_users(1)
    deliver_time = utcnow() + seconds(2)
    env.send(1, "due-soon", deliver_time=deliver_time)

    received = env.receive_timed(max_duration=seconds(10), limit=1)

    assert [m.key for m, _ in received] == [(1, "due-soon")]
    assert received[0][1] >= deliver_time - SKEW


def test_receive_started_on_empty_queue_gets_a_later_send(env: Env) -> None:
    env.add_users(1)
    receiver = BackgroundReceiver(
        env.url, env.tasks, face=env.face, max_duration=seconds(8)
    ).start()
    time.sleep(1.0)  # pacing: let the stream reach its wait before the send
    assert not receiver.arrived.is_set()

    env.send(1, "streamed", b"ping")
    sent_at = utcnow()

    assert receiver.arrived.wait(8), "the running stream never yielded the new message"
    receiver.join(timeout=30)

    assert receiver.keys() == [(1, "streamed")]
    [(m, arrived)] = receiver.received
    assert m.payload == b"ping"
    assert receiver.started_at is not None
    assert receiver.ended_at is not None
    assert arrived - sent_at < seconds(4), "the stream should wake promptly on a send"
    # it arrived on the stream that was already open, which then kept running
    assert receiver.ended_at - arrived >= seconds(1)
    assert receiver.ended_at - receiver.started_at >= seconds(8) - SKEW


def test_oldest_deliver_time_first(env: Env) -> None:
    env.add_users(1)
    now = utcnow()
    # key order, send order and deliver order all differ
    schedule = {"a": now + seconds(0.9), "b": now + seconds(0.5), "c": now + seconds(0.7)}
    with env.db.batch() as b:
        for message_id, deliver_time in schedule.items():
            b.send(queue=env.tasks, key=(1, message_id), payload=b"x", deliver_time=deliver_time)
    sleep_until(max(schedule.values()) + seconds(0.2))

    received = env.receive(max_duration=seconds(5), limit=3)

    assert [m.key[1] for m in received] == ["b", "c", "a"]
    assert [m.deliver_time for m in received] == sorted(schedule.values())


def test_a_batch_mixing_scheduled_and_immediate_sends_keeps_each_time(env: Env) -> None:
    env.add_users(1)
    later = utcnow() + seconds(3600)
    with env.db.batch() as b:
        b.send(queue=env.tasks, key=(1, "now"), payload=b"x")
        b.send(queue=env.tasks, key=(1, "later"), payload=b"x", deliver_time=later)
        b.send(queue=env.tasks, key=(1, "now too"), payload=b"x")

    received = env.receive(max_duration=seconds(1), max_batch_size=3, limit=3)

    assert sorted(m.key[1] for m in received) == ["now", "now too"]
    assert env.task_keys() == [(1, "later"), (1, "now"), (1, "now too")]


def test_max_batch_size_and_last_in_batch(env: Env) -> None:
    env.add_users(1)
    with env.db.batch() as b:
        for i in range(7):
            b.send(queue=env.tasks, key=(1, f"m{i}"), payload=b"x")

    received = env.receive(max_duration=seconds(5), max_batch_size=3, limit=7)

    assert sorted(m.key[1] for m in received) == [f"m{i}" for i in range(7)]
    assert [len(batch) for batch in batches(received)] == [3, 3, 1]
    for batch in batches(received):
        assert [m.last_in_batch for m in batch] == [False] * (len(batch) - 1) + [True]
    assert len({m.lease_token for m in received}) == 7


def test_default_batch_size_is_one(env: Env) -> None:
    env.add_users(1)
    env.send(1, "a")
    env.send(1, "b")

    received = env.receive(max_duration=seconds(5), limit=2)

    assert sorted(m.key for m in received) == [(1, "a"), (1, "b")]
    assert all(m.last_in_batch for m in received)


def test_leased_message_is_not_received_by_another_receiver(env: Env) -> None:
    env.add_users(1)
    env.send(1, "a")
    env.send(1, "b")
    first = env.receive_one(lease_duration=seconds(30))

    others = env.receive(max_duration=seconds(1.5), max_batch_size=10)

    assert [m.key for m in others] == [k for k in [(1, "a"), (1, "b")] if k != first.key]


def test_deleting_the_parent_row_deletes_its_messages(env: Env) -> None:
    env.add_users(1, 2)
    env.send(1, "a")
    env.send(1, "b")
    env.send(2, "c")

    with env.db.batch() as b:
        b.delete(env.names.users, keys=[(1,)])

    assert env.state() == ([(2, "user 2")], [(2, "c")])
    received = env.receive(max_duration=seconds(1.5), max_batch_size=10)
    assert [m.key for m in received] == [(2, "c")]


def test_deleting_the_parent_in_a_transaction_deletes_its_leased_message(env: Env) -> None:
    env.add_users(1, 2)
    env.send(1, "a")
    m = env.receive_one()

    env.db.run_in_transaction(lambda txn: txn.delete(env.names.users, keys=[(1,)]))

    assert env.state() == ([(2, "user 2")], [])
    renewals = env.db.renew_lease(env.tasks, [m.lease_token])
    assert all(r.new_token is None for r in renewals)


def test_string_payload_queue_returns_text(env: Env) -> None:
    if env.dialect == "postgresql":
        queue = "notes"
        ddl = f"CREATE QUEUE {queue} (noteid bigint NOT NULL, payload text NOT NULL, "
        ddl += "PRIMARY KEY (noteid))"
    else:
        queue = "Notes"
        ddl = f"CREATE QUEUE {queue} (NoteId INT64 NOT NULL, Payload STRING(MAX) NOT NULL) "
        ddl += "PRIMARY KEY (NoteId)"
    env.db.update_ddl([ddl])
    with env.db.batch() as b:
        b.send(queue=queue, key=(7,), payload="grüße")

    [m] = [m for m, _ in receive_timed(env.db, queue, max_duration=seconds(5), limit=1)]

    assert m.key == (7,)
    assert m.payload == "grüße"
    assert isinstance(m.payload, str)


def test_wait_until_helper_fails_when_condition_never_holds() -> None:
    with pytest.raises(AssertionError):
        wait_until(lambda: False, timeout=0.2, what="never")


def test_each_face_is_the_one_its_id_names(env: Env) -> None:
    """The [async-...] cases drive the AsyncDatabase (through the Blocking view), never the
    blocking Database: a view that fell back to the blocking face would pass unnoticed."""
    if env.face.is_async:
        assert isinstance(env.db, Blocking)
        assert isinstance(env.db.target, txqueue.AsyncDatabase)
        assert isinstance(env.db.batch(), Blocking)
    else:
        assert isinstance(env.db, txqueue.Database)
