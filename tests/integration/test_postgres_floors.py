"""PostgreSQL receives start past the index entries of acked messages (drivers.postgres.floors).

Behind the dead rows of acked messages (before VACUUM), a receive that walks the ready index
from its start reads every page of their entries; one from the queue's floor does not. A
message that lands below the floor is still received: at once when a receive comes back
short, and within ``FULL_SCAN_PERIOD`` while receives keep coming back full.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from fakes import MonotonicClock

import txqueue
from txqueue.drivers.postgres.floors import FULL_SCAN_PERIOD, ReceiveFloors
from txqueue.drivers.postgres.statements import queue_statements
from txqueue.errors import Unavailable

pytestmark = pytest.mark.postgres

ACKED = 40_000
LEASE = timedelta(seconds=10)


def _send_backlog(db: txqueue.Database, count: int, now: datetime) -> None:
    """Messages 0 … count-1, one minute apart, the last a minute before ``now``."""
    with db.batch() as batch:
        for number in range(count):
            batch.send(
                "jobs", (number,), b"x", deliver_time=now - timedelta(minutes=count - number)
            )


def _send_late(url: str, now: datetime) -> None:
    """Message 99, due an hour before ``now``, sent by another process (plain SQL, as any
    application INSERT is a send): below any floor the backlog gives."""
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(
            "INSERT INTO jobs (jobid, payload, deliver_time) VALUES (99, 'late', %s)",
            [now - timedelta(hours=1)],
        )


def _receive_keys(db: txqueue.Database) -> list[tuple[Any, ...]]:
    return [m.key for m in db.receive_now("jobs", max_batch_size=2)]


def _from_the_floor(db: txqueue.Database) -> tuple[Any, dict[str, Any]]:
    """The queue's statements, and the arguments of a receive of 100 from its floor now."""
    driver: Any = db._driver  # type: ignore[attr-defined]
    statements = queue_statements(db.queue("jobs"), driver.deliver_column)
    floor = driver.floors.floor("jobs")
    assert floor is not None
    return statements, {"now": None, "lease": LEASE, "limit": 100, "floor": floor}


def _index_pages_read(connection: psycopg.Connection, sql: str, arguments: dict[str, Any]) -> int:
    """Buffers the receive's scan of the ready index touched (the statement is rolled back)."""
    with connection.transaction(force_rollback=True):
        [[document]] = connection.execute(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, arguments
        ).fetchall()
    plans = document if isinstance(document, list) else json.loads(document)
    stack, pages = [plans[0]["Plan"]], 0
    while stack:
        node = stack.pop()
        stack.extend(node.get("Plans", []))
        if node.get("Index Name") == "jobs_txq_ready":
            pages += node["Shared Hit Blocks"] + node["Shared Read Blocks"]
    return pages


def test_a_receive_behind_acked_messages_starts_at_the_floor(
    db: txqueue.Database, pg_database_url: str
) -> None:
    with psycopg.connect(pg_database_url, autocommit=True) as connection:
        connection.execute("ALTER TABLE jobs SET (autovacuum_enabled = off)")
        # ACKED messages, leased and acked in plain SQL: two dead index entries each.
        connection.execute(
            "INSERT INTO jobs (jobid, payload, deliver_time) SELECT -i, 'x',"
            " now() - interval '1 hour' + i * interval '1 ms' FROM generate_series(1, %s) i",
            [ACKED],
        )
        connection.execute("UPDATE jobs SET _txq_ready_at = now() - interval '1 minute'")
        connection.execute("DELETE FROM jobs")
    with db.batch() as batch:
        for number in range(300):
            batch.send("jobs", (number,), b"x")
    first = db.receive_now("jobs", max_batch_size=100)
    assert [m.key for m in first] == [(n,) for n in range(100)]

    statements, arguments = _from_the_floor(db)
    assert arguments["floor"] == first[0].deliver_time
    with psycopg.connect(pg_database_url) as connection:
        connection.execute("SET TIME ZONE 'UTC'")
        from_floor = _index_pages_read(connection, statements.receive_from, arguments)
        from_start = _index_pages_read(connection, statements.receive, arguments)
    assert from_floor <= 10
    assert from_start >= 100  # ~400 entries a page: the acked rows' ~80k entries

    driver: Any = db._driver  # type: ignore[attr-defined]
    fetch, run = driver._fetch, []
    driver._fetch = lambda sql, arguments: run.append(sql) or fetch(sql, arguments)
    second = db.receive_now("jobs", max_batch_size=100)
    assert [m.key for m in second] == [(n,) for n in range(100, 200)]
    assert run == [statements.receive_from]


@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
def test_a_receive_from_the_floor_walks_the_index_in_order(
    db: txqueue.Database, pg_database_url: str, plan_cache_mode: str
) -> None:
    """A fresh queue of 10k (no statistics yet): the receive from a floor is still an index
    scan that stops at its LIMIT, not a sort of every message between the floor and now."""
    with db.batch() as batch:
        for number in range(10_000):
            batch.send("jobs", (number,), b"x")
    first = db.receive_now("jobs", max_batch_size=100)
    statements, arguments = _from_the_floor(db)
    assert arguments["floor"] == first[0].deliver_time
    sql = statements.receive_from
    with psycopg.connect(pg_database_url) as connection:
        connection.execute("SET TIME ZONE 'UTC'")
        connection.execute(f"SET plan_cache_mode = {plan_cache_mode}")
        with connection.transaction(force_rollback=True):
            cursor = connection.cursor()
            for _ in range(2):  # prepared: the second runs the cached (generic) plan
                cursor.execute("EXPLAIN (FORMAT JSON) " + sql, arguments, prepare=True)
            [[document]] = cursor.fetchall()
    plans = document if isinstance(document, list) else json.loads(document)
    stack, nodes = [plans[0]["Plan"]], []
    while stack:
        node = stack.pop()
        stack.extend(node.get("Plans", []))
        nodes.append((node["Node Type"], node.get("Index Name")))
    assert ("Index Scan", "jobs_txq_ready") in nodes
    assert not [n for n in nodes if n[0] in ("Sort", "Bitmap Heap Scan", "Seq Scan")]


def test_a_message_below_the_floor_comes_in_the_receive_that_comes_back_short(
    db: txqueue.Database, pg_database_url: str
) -> None:
    now = datetime.now(timezone.utc)
    _send_backlog(db, 5, now)
    assert _receive_keys(db) == [(0,), (1,)]
    _send_late(pg_database_url, now)
    # From the floor (the batch's oldest deliver time): the late message lies below it.
    assert _receive_keys(db) == [(2,), (3,)]
    # Short from the floor: the same receive looks again from the oldest for the rest.
    assert _receive_keys(db) == [(99,), (4,)]


def test_during_a_backlog_a_message_below_the_floor_waits_one_period_at_most(
    db: txqueue.Database, pg_database_url: str
) -> None:
    clock = MonotonicClock(0.0)
    db._driver.floors = ReceiveFloors(clock)  # type: ignore[attr-defined]
    now = datetime.now(timezone.utc)
    _send_backlog(db, 10, now)
    assert _receive_keys(db) == [(0,), (1,)]
    _send_late(pg_database_url, now)
    clock.now += FULL_SCAN_PERIOD / 2
    assert _receive_keys(db) == [(2,), (3,)]
    clock.now += FULL_SCAN_PERIOD / 2
    assert _receive_keys(db) == [(99,), (4,)]


def test_a_send_of_this_process_drops_the_floor(db: txqueue.Database) -> None:
    """Its own sends the process knows: the next receive starts from the oldest, and a
    message it sent with an older deliver time keeps its place in the order."""
    now = datetime.now(timezone.utc)
    _send_backlog(db, 5, now)
    assert _receive_keys(db) == [(0,), (1,)]
    db.run_in_transaction(
        lambda t: t.send("jobs", (99,), b"late", deliver_time=now - timedelta(hours=1))
    )
    assert _receive_keys(db) == [(99,), (2,)]


def test_the_stream_receives_a_message_sent_below_the_floor(
    db: txqueue.Database, pg_database_url: str
) -> None:
    """A stream that drained its backlog (a full batch, then a short one) takes a message sent
    elsewhere with an old deliver time at once, not a period later."""
    now = datetime.now(timezone.utc)
    _send_backlog(db, 3, now)
    received = []
    for message in db.receive("jobs", max_duration=timedelta(seconds=20), max_batch_size=2):
        received.append(message.key)
        db.run_in_transaction(lambda t, m=message: t.ack("jobs", m.key, lease_token=m.lease_token))
        if message.key == (2,):
            _send_late(pg_database_url, now)
        if message.key == (99,):
            break
    assert received == [(0,), (1,), (2,), (99,)]


def test_a_failed_look_from_the_oldest_keeps_what_the_floor_gave(
    db: txqueue.Database, pg_database_url: str
) -> None:
    """receive_now's second statement (from the oldest) fails: the batch leased from the
    floor is still handed out (nothing left leased by no one), and the error comes back on
    the next call."""
    now = datetime.now(timezone.utc)
    _send_backlog(db, 5, now)
    assert _receive_keys(db) == [(0,), (1,)]
    _send_late(pg_database_url, now)
    assert _receive_keys(db) == [(2,), (3,)]
    driver: Any = db._driver  # type: ignore[attr-defined]
    fetch, statements = driver._fetch, queue_statements(db.queue("jobs"), driver.deliver_column)

    def failing(sql: str, arguments: dict[str, Any]) -> Any:
        if sql == statements.receive:
            raise Unavailable("connection lost")
        return fetch(sql, arguments)

    driver._fetch = failing
    [message] = db.receive_now("jobs", max_batch_size=2)
    assert message.key == (4,)
    db.run_in_transaction(lambda t: t.ack("jobs", (4,), lease_token=message.lease_token))
    with pytest.raises(Unavailable):
        db.receive_now("jobs", max_batch_size=2)  # no floor now: from the oldest, which fails
    driver._fetch = fetch
    assert _receive_keys(db) == [(99,)]
