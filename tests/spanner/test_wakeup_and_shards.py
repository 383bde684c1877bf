"""The Cloud Spanner engine's change-stream wake-up and sharded ready index, on the emulator.

A send committed by another handle (another driver: another process, as far as wake-ups go)
reaches a waiting receiver through the queue's insert-only change stream; a queue without a
stream falls back to polling; the stream is created and dropped with its queue. The ready
index leads with a shard column; a receive reads every shard's oldest first, and a re-run
(after an abort) reads its own start shard first.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from blocking import unwrap
from conformance.support import Face

import txqueue
from txqueue.drivers.base import ReceiveParams
from txqueue.drivers.spanner import leasing
from txqueue.drivers.spanner.engine import query
from txqueue.drivers.spanner.statements import SHARD, SHARDS, wake_stream

#: Generous: the emulator's change stream reports a commit in ~0.1 s; polling alone (what a
#: queue without a stream gets) is far quicker than this too, so the tests below check where
#: a wake-up came from, not only how soon.
BOUND_SECONDS = 10.0


def _driver(db: Any) -> Any:
    return unwrap(db)._driver


def _send(db: Any, *keys: tuple[int, str]) -> None:
    with db.batch() as batch:
        batch.insert_or_update(
            "Users", columns=("UserId", "UserName"), values=[(k[0], "u") for k in keys]
        )
        for key in keys:
            batch.send(queue="UserTasks", key=key, payload=b"x")


def _until(condition: Any, seconds: float = BOUND_SECONDS) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _streams(driver: Any) -> list[str]:
    _, rows = driver.database.read(
        query, "SELECT change_stream_name FROM INFORMATION_SCHEMA.CHANGE_STREAMS"
    )
    return sorted(row[0] for row in rows)


def _receive_first(db: Any, other: Any, key: tuple[int, str]) -> tuple[Any, float, float]:
    """Open a stream on ``db``; once its receiver waits on the change stream (or has given it
    up), send ``key`` from ``other``: the message and the times it was sent and arrived."""
    driver = _driver(db)
    sent: list[float] = []

    def send_when_waiting() -> None:
        def watching() -> bool:
            found = driver._watchers.get("usertasks")
            return found is not None and found[0].ready.is_set()

        if _until(watching):
            sent.append(time.monotonic())
            _send(other, key)

    sender = threading.Thread(target=send_when_waiting)
    stream = db.receive("UserTasks", max_duration=timedelta(seconds=BOUND_SECONDS))
    sender.start()
    try:
        message = next(iter(stream))
        arrived = time.monotonic()
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
        sender.join()
    assert sent, "the receiver never started watching the change stream"
    return message, sent[0], arrived


def test_a_send_by_another_handle_wakes_the_receiver_through_the_change_stream(
    db: Any, spanner_url: str
) -> None:
    other = txqueue.connect(spanner_url)
    try:
        driver = _driver(db)
        before = driver.sends("UserTasks")
        message, sent, arrived = _receive_first(db, other, (1, "woken"))
        assert message.key == (1, "woken")
        assert arrived - sent < BOUND_SECONDS
        [(watcher, _)] = driver._watchers.values()
        assert watcher.live
        # nothing in this process sent: only the change stream can have counted that send
        assert driver.sends("UserTasks") > before
    finally:
        other.close()
    db.close()
    assert not [t for t in threading.enumerate() if t.name == "txqueue-spanner-wakeup"]


def test_a_queue_without_its_change_stream_is_polled(db: Any, spanner_url: str) -> None:
    driver = _driver(db)
    driver.database.update_ddl(["DROP CHANGE STREAM txqueue_wake_UserTasks"])
    other = txqueue.connect(spanner_url)
    try:
        message, sent, arrived = _receive_first(db, other, (1, "polled"))
        assert message.key == (1, "polled")
        assert arrived - sent < BOUND_SECONDS
        [(watcher, _)] = driver._watchers.values()
        assert watcher.failed and not watcher.live
    finally:
        other.close()


def test_the_change_stream_comes_and_goes_with_its_queue(db: Any) -> None:
    driver = _driver(db)
    assert _streams(driver) == ["txqueue_wake_UserTasks"]
    db.update_ddl(
        "CREATE QUEUE Mail (Id STRING(36) NOT NULL, Payload STRING(MAX) NOT NULL) PRIMARY KEY (Id)"
    )
    assert _streams(driver) == ["txqueue_wake_Mail", "txqueue_wake_UserTasks"]
    db.update_ddl("DROP QUEUE Mail")
    assert _streams(driver) == ["txqueue_wake_UserTasks"]
    with pytest.raises(txqueue.errors.TxqueueError):
        db.update_ddl(
            [
                "CREATE QUEUE Jobs (Id STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL)"
                " PRIMARY KEY (Id)",
                # Spanner refuses an index on an ARRAY column, after making the queue
                "CREATE TABLE Tags (Id INT64 NOT NULL, Names ARRAY<STRING(MAX)>) PRIMARY KEY (Id)",
                "CREATE INDEX TagsByNames ON Tags (Names)",
            ]
        )
    assert _streams(driver) == ["txqueue_wake_UserTasks"]
    db.update_ddl(  # every name is free again
        "CREATE QUEUE Jobs (Id STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"
    )
    assert _streams(driver) == ["txqueue_wake_Jobs", "txqueue_wake_UserTasks"]


def test_the_watcher_reports_inserts_and_stops(face: Face, db: Any) -> None:
    driver = _driver(db)
    inserted = threading.Event()
    watcher = leasing_watcher(driver, inserted)
    try:
        assert watcher.ready.wait(BOUND_SECONDS) and not watcher.failed
        _send(db, (1, "seen"))
        assert inserted.wait(BOUND_SECONDS)
    finally:
        started = time.monotonic()
        watcher.stop()
        assert time.monotonic() - started < 5
    assert not [t for t in threading.enumerate() if t.name == "txqueue-spanner-wakeup"]


def leasing_watcher(driver: Any, inserted: threading.Event) -> Any:
    from txqueue.drivers.spanner.wakeup import ChangeStreamWatcher

    watcher = ChangeStreamWatcher(driver.database, wake_stream(driver_table(driver)), inserted.set)
    watcher.start()
    return watcher


def driver_table(driver: Any) -> Any:
    tables, _ = driver.database.read(_catalog)
    return tables["usertasks"]


def _catalog(snapshot: Any) -> Any:
    from txqueue.drivers.spanner.catalog import load_catalog

    return load_catalog(snapshot)


def _shards(driver: Any) -> dict[tuple[int, str], int]:
    _, rows = driver.database.read(query, f"SELECT UserId, MessageId, {SHARD} FROM UserTasks")
    return {(row[0], row[1]): row[2] for row in rows}


def test_messages_spread_over_the_shards_of_the_ready_index(db: Any) -> None:
    _send(db, *((n % 3, f"m{n}") for n in range(40)))
    shards = _shards(_driver(db))
    assert len(shards) == 40
    assert set(shards.values()) <= set(range(SHARDS))
    assert len(set(shards.values())) >= SHARDS // 2


def test_a_rerun_receive_walks_the_shards_from_its_own_start(db: Any) -> None:
    keys = [(1, f"m{n}") for n in range(12)]
    for key in keys:  # one commit each: ascending DeliverTime
        _send(db, key)
    driver = _driver(db)
    shards = _shards(driver)
    newest = keys[-1]
    table = driver_table(driver)
    params = ReceiveParams(table, 1, timedelta(seconds=30), None)

    def receive(walk: leasing.ShardWalk) -> list[Any]:
        return driver.database.read_write(leasing.receive, params, driver.deliver_column, walk)

    # a first attempt takes the oldest of all shards' heads
    [first] = receive(leasing.ShardWalk(start=shards[newest]))
    assert first.key == keys[0]
    # a re-run (after an abort) starts at its own shard: there, the newest is the only one
    # left unless an older message shares its shard, in which case that one comes first
    same_shard = [k for k in keys[1:] if shards[k] == shards[newest]]
    for expected in same_shard:
        [rerun] = receive(leasing.ShardWalk(start=shards[newest], attempts=1))
        assert rerun.key == expected
    # its shard drained, a re-run goes on with the oldest of the other shards' heads
    others = [k for k in keys[1:] if shards[k] != shards[newest]]
    [rerun] = receive(leasing.ShardWalk(start=shards[newest], attempts=1))
    assert rerun.key == others[0]


def test_a_stream_dropped_while_watched_fails_the_watcher_over_to_polling(db: Any) -> None:
    driver = _driver(db)
    watcher = driver.watch(driver_table(driver))
    assert watcher.ready.wait(BOUND_SECONDS) and watcher.live
    driver.database.update_ddl(["DROP CHANGE STREAM txqueue_wake_UserTasks"])
    assert _until(lambda: watcher.failed, 30), "the watcher kept reading a dropped stream"
    assert not watcher.live
    db.close()
    assert not [t for t in threading.enumerate() if t.name == "txqueue-spanner-wakeup"]
