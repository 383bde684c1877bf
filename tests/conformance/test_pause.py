"""Pausing a queue (``pause_queue`` / ``resume_queue``): sends are taken, nothing leases from
it (``receive``, ``receive_now``, SQL's ``RECEIVE_``), leases already taken run their course,
the state is stored in the database and shown by ``queue_info``; resuming wakes receivers."""

from __future__ import annotations

import time
from typing import Any

import pytest

from txqueue.errors import InvalidArgument, NotFound

from .support import BackgroundReceiver, Env, seconds


def _receive_sql(env: Env, max_duration: str = "0.5s") -> list[Any]:
    if env.dialect == "googlesql":
        sql = f"SELECT * FROM RECEIVE_{env.tasks}(max_duration=>'{max_duration}')"
    else:
        sql = f"SELECT * FROM spanner.receive_{env.tasks}(max_duration => '{max_duration}')"
    with env.db.snapshot() as snapshot:  # not list(): its len() would drain the stream first
        return [tuple(row) for row in snapshot.execute_sql(sql)]


def test_a_paused_queue_takes_sends_and_leases_nothing_until_resumed(env: Env) -> None:
    env.add_users(1)
    assert env.db.queue_info(env.tasks).paused is False
    env.db.pause_queue(env.tasks)
    env.db.pause_queue(env.tasks)  # pausing a paused queue is fine

    env.send(1, "a")
    env.send(1, "b")

    assert env.db.receive_now(env.tasks, max_batch_size=10) == []
    assert env.receive(max_duration=seconds(0.5), max_batch_size=10) == []
    assert _receive_sql(env) == []
    info = env.db.queue_info(env.tasks)
    assert (info.paused, info.ready, info.leased) == (True, 2, 0)
    assert env.db.queue_info(env.tasks, estimate=True).paused is True

    env.db.resume_queue(env.tasks)
    env.db.resume_queue(env.tasks)  # and resuming a running one
    assert env.db.queue_info(env.tasks).paused is False
    assert sorted(row[1] for row in _receive_sql(env, "1s")) == ["a", "b"]


def test_leases_taken_before_the_pause_are_renewed_released_and_acked(env: Env) -> None:
    env.add_users(1)
    env.send(1, "a")
    env.send(1, "b")
    first, second = env.receive(max_batch_size=2, limit=2)
    env.db.pause_queue(env.tasks)

    [renewal] = env.db.renew_lease(env.tasks, [first.lease_token], seconds(30))
    assert renewal.new_token is not None
    assert env.db.release_lease(env.tasks, [second.lease_token]) == 1
    env.ack(first.key, renewal.new_token)

    assert env.task_keys() == [(1, "b")]
    assert env.db.receive_now(env.tasks) == []  # released, but the queue is paused


def test_the_pause_survives_reopening_the_database(env: Env) -> None:
    env.add_users(1)
    env.db.pause_queue(env.tasks)
    env.send(1, "a")
    with env.face.connect(env.url) as reopened:
        assert reopened.queue_info(env.tasks).paused is True
        assert reopened.receive_now(env.tasks) == []
        reopened.resume_queue(env.tasks)
    assert env.db.queue_info(env.tasks).paused is False
    assert [m.key for m in env.db.receive_now(env.tasks)] == [(1, "a")]


def test_pausing_names_what_is_not_a_queue(env: Env) -> None:
    for change in (env.db.pause_queue, env.db.resume_queue):
        with pytest.raises(NotFound, match="Nothing"):
            change("Nothing")
        with pytest.raises(InvalidArgument, match=f"{env.names.users} is a table, not a queue"):
            change(env.names.users)
        with pytest.raises(InvalidArgument):
            change(42)


def test_a_dropped_and_recreated_queue_is_not_paused(env: Env) -> None:
    env.db.pause_queue(env.tasks)
    ddl = env.names.ddl[1]
    env.db.update_ddl([f"DROP QUEUE {env.tasks}"])
    env.db.update_ddl([ddl])
    assert env.db.queue_info(env.tasks).paused is False


def test_resuming_wakes_a_waiting_receiver(env: Env) -> None:
    """A receive stream open on a paused queue leases nothing of what is sent, and gets it
    within a second of the resume (the wake-up, not the stream's next look)."""
    env.add_users(1)
    env.db.pause_queue(env.tasks)
    receiver = BackgroundReceiver(
        env.url, env.tasks, face=env.face, max_duration=seconds(30), limit=1
    ).start()
    env.send(1, "a")  # wakes the receiver, which finds the queue paused
    assert not receiver.arrived.wait(1.5)
    resumed = time.monotonic()
    env.db.resume_queue(env.tasks)
    assert receiver.arrived.wait(10)
    assert time.monotonic() - resumed < 1.0
    receiver.join()
    assert [m.key for m, _ in receiver.received] == [(1, "a")]


def test_a_resume_wakes_a_receiver_the_change_stream_does_not(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cloud Spanner: a resume from another handle deletes a row, which the queue's
    insert-only change stream does not record, so the receiver's slow fallback look (made
    slower here) must not be what notices it. Other engines wake on the resume itself."""
    from txqueue._async import database as async_database
    from txqueue._sync import database as sync_database
    from txqueue.drivers.spanner import _async, _sync

    for module in (async_database, sync_database):  # a waiting stream's own next look
        monkeypatch.setattr(module, "FALLBACK_WAIT", 30.0)
    for module in (_async, _sync):  # a watched Spanner receiver's fallback look
        monkeypatch.setattr(module, "WATCHED_POLL", 30.0)
    env.add_users(1)
    env.db.pause_queue(env.tasks)
    env.send(1, "a")
    receiver = BackgroundReceiver(
        env.url, env.tasks, face=env.face, max_duration=seconds(30), limit=1
    ).start()
    assert not receiver.arrived.wait(2.0)  # settled into its wait, the stream being read
    resumed = time.monotonic()
    env.db.resume_queue(env.tasks)
    assert receiver.arrived.wait(10)
    assert time.monotonic() - resumed < 5.0  # far below the 30 s fallback: the resume woke it
    receiver.join()
    assert [m.key for m, _ in receiver.received] == [(1, "a")]
