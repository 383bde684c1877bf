"""PostgreSQL receives re-take planner statistics taken while their queue was empty
(drivers.postgres.statistics).

ANALYZE of a queue table whose pages hold only dead rows records no rows on pages; the
planner then plans for an empty table whatever it holds. Receives that keep coming back
full prove otherwise, and the driver runs ANALYZE on the queue: once, not again while it
would be in vain, and never while the statistics are sound.
"""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from fakes import MonotonicClock
from postgres_support import scans_of_jobs

import txqueue
from txqueue.drivers.postgres.statements import queue_statements
from txqueue.drivers.postgres.statistics import (
    CHECK_PERIOD,
    MIN_STREAK,
    QUIET_PERIOD,
    StatisticsWatch,
)

pytestmark = pytest.mark.postgres

LEASE = timedelta(minutes=1)


def _load(url: str, waiting: int, analyze_empty: bool) -> None:
    """``waiting`` messages in ``jobs``, over the dead rows of as many acked ones, with
    statistics taken while only the dead rows were there (``analyze_empty``) or after the
    load."""
    with psycopg.connect(url, autocommit=True) as connection:
        insert = (
            "INSERT INTO jobs (jobid, payload) SELECT g, '\\x00'::bytea"
            " FROM generate_series(%s::bigint, %s::bigint) AS g"
        )
        connection.execute(insert, [waiting, 2 * waiting - 1])
        connection.execute("DELETE FROM jobs")
        if analyze_empty:
            connection.execute("ANALYZE jobs")
        connection.execute(insert, [0, waiting - 1])
        if not analyze_empty:
            connection.execute("ANALYZE jobs")


def _statistics(url: str) -> tuple[int, float, int]:
    """``jobs``'s pages and rows as the planner has them, and how often it was analyzed."""
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute(
            "SELECT c.relpages, c.reltuples, s.analyze_count FROM pg_class c"
            " JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.relname = 'jobs'"
        ).fetchone()
    assert row is not None
    return row[0], row[1], row[2]


def _receive_scans(url: str, db: txqueue.Database) -> list[str]:
    """The scan nodes over ``jobs`` of a receive of 100, as the planner would plan it now."""
    statements = queue_statements(db.queue("jobs"), db._driver.deliver_column)  # type: ignore[attr-defined]
    arguments = {"now": None, "lease": LEASE, "limit": 100}
    with psycopg.connect(url) as connection:
        return scans_of_jobs(connection, statements.receive, arguments)


@pytest.mark.parametrize("face", ["receive_now", "stream"])
def test_full_receives_analyze_a_queue_whose_statistics_say_empty(
    pg_database_url: str, db: txqueue.Database, face: str
) -> None:
    _load(pg_database_url, 2_000, analyze_empty=True)
    pages, rows, analyzed = _statistics(pg_database_url)
    assert pages > 0 and rows == 0  # the planner takes 2,000 waiting messages for none

    # Twice the batch size proves a backlog; the third receive looks at the estimate first.
    received = 0
    if face == "receive_now":
        for _ in range(3):
            received += len(db.receive_now("jobs", max_batch_size=100, lease_duration=LEASE))
    else:
        for _message in db.receive(
            "jobs", max_duration=timedelta(seconds=10), max_batch_size=100, lease_duration=LEASE
        ):
            received += 1
            if received == 300:
                break
    assert received == 300  # every batch came back whole, ANALYZE or not

    pages, rows, analyzed_after = _statistics(pg_database_url)
    assert analyzed_after == analyzed + 1
    assert rows == 2_000
    assert "Index Scan" in _receive_scans(pg_database_url, db)  # walks the ready index


def test_sound_statistics_are_left_alone(pg_database_url: str, db: txqueue.Database) -> None:
    _load(pg_database_url, 2_000, analyze_empty=False)
    _, rows, analyzed = _statistics(pg_database_url)
    assert rows == 2_000
    for _ in range(5):
        assert len(db.receive_now("jobs", max_batch_size=100, lease_duration=LEASE)) == 100
    assert _statistics(pg_database_url)[2] == analyzed


def test_an_analyze_in_vain_is_not_repeated(pg_database_url: str, db: txqueue.Database) -> None:
    """A queue that really holds few rows: the streak of 100 receives of one proves 50 rows,
    but all 100 were acked; the ANALYZE finds 30 and leaves the estimate below 50."""
    clock = MonotonicClock(0.0)
    db._driver.statistics = StatisticsWatch(clock)  # type: ignore[attr-defined]
    _load(pg_database_url, MIN_STREAK + 30, analyze_empty=True)
    _, _, analyzed = _statistics(pg_database_url)

    def receive_and_ack() -> None:
        [message] = db.receive_now("jobs", max_batch_size=1, lease_duration=LEASE)
        db.run_in_transaction(
            lambda transaction: transaction.ack(
                "jobs", message.key, lease_token=message.lease_token
            )
        )

    for _ in range(MIN_STREAK):
        receive_and_ack()
    assert _statistics(pg_database_url)[2] == analyzed  # due: the next receive looks first
    receive_and_ack()
    _, rows, analyzed_after = _statistics(pg_database_url)
    assert (analyzed_after, rows) == (analyzed + 1, 30)
    for _ in range(29):
        clock.now += CHECK_PERIOD  # each receive would read the estimate again
        assert len(db.receive_now("jobs", max_batch_size=1, lease_duration=LEASE)) == 1
    assert _statistics(pg_database_url)[2] == analyzed + 1


def test_a_queue_held_by_vacuum_is_left_alone_until_quiet_period(
    pg_database_url: str, db: txqueue.Database
) -> None:
    """ANALYZE (SKIP_LOCKED) does not wait for a VACUUM's lock (taken here by hand), nor do
    the receives; the queue is left alone for QUIET_PERIOD, then analyzed."""
    clock = MonotonicClock(0.0)
    db._driver.statistics = StatisticsWatch(clock)  # type: ignore[attr-defined]
    _load(pg_database_url, 2_000, analyze_empty=True)
    _, _, analyzed = _statistics(pg_database_url)

    def receive() -> None:
        assert len(db.receive_now("jobs", max_batch_size=100, lease_duration=LEASE)) == 100

    with psycopg.connect(pg_database_url) as vacuum:
        vacuum.execute("LOCK TABLE jobs IN SHARE UPDATE EXCLUSIVE MODE")  # VACUUM's own
        for _ in range(3):  # the third looks at the estimate first, and ANALYZE skips
            receive()
        assert _statistics(pg_database_url)[1:] == (0, analyzed)
    clock.now += QUIET_PERIOD - CHECK_PERIOD
    receive()
    receive()
    assert _statistics(pg_database_url)[1:] == (0, analyzed)
    clock.now += CHECK_PERIOD
    receive()  # makes a look due again
    receive()
    assert _statistics(pg_database_url)[1:] == (2_000, analyzed + 1)
