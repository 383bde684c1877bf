"""PostgreSQL: taking and renewing a lease updates the row in place (a heap-only update).

A lease changes no indexed column (the ready index holds the deliver time, or the time a
release put the message back; the lease gates the row instead), and queue tables leave half
of each page free for the new row versions. So a receive adds no index entries: fewer
writes, less WAL, and no dead entries for later receives to walk. Without free room on the
page an update still works, just as an ordinary one.
"""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from postgres_support import JOBS_QUEUE

import txqueue
from txqueue.drivers.postgres.codec import messages_from_rows, stored_token, token_location
from txqueue.drivers.postgres.statements import QUEUE_FILLFACTOR, queue_statements

pytestmark = pytest.mark.postgres

MESSAGES = 170  # ~10 pages of ~17 messages (payloads of 200 bytes, pages half full)
LEASE = timedelta(seconds=30)


@pytest.fixture
def db(db: txqueue.Database) -> txqueue.Database:
    """The ``jobs`` queue of conftest.py, with MESSAGES waiting."""
    with db.batch() as batch:
        for number in range(MESSAGES):
            batch.send("jobs", (number,), bytes(200))
    return db


def _updates(connection: psycopg.Connection) -> tuple[int, int]:
    """Rows this backend updated in ``jobs`` and not yet reported to the statistics (take
    differences), and how many of them heap-only."""
    row = connection.execute(
        "SELECT pg_stat_get_xact_tuples_updated('jobs'::regclass),"
        " pg_stat_get_xact_tuples_hot_updated('jobs'::regclass)"
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_queue_tables_leave_room_on_their_pages(pg_database_url: str) -> None:
    with psycopg.connect(pg_database_url) as connection:
        txqueue.connect(pg_database_url).update_ddl([JOBS_QUEUE])
        [[options]] = connection.execute(
            "SELECT reloptions FROM pg_class WHERE relname = 'jobs'"
        ).fetchall()
    assert options == [f"fillfactor={QUEUE_FILLFACTOR}"]


def test_receive_and_renew_update_rows_in_place(db: txqueue.Database, pg_database_url: str) -> None:
    driver = db._driver  # type: ignore[attr-defined]
    table = db.queue("jobs")
    statements = queue_statements(table, driver.deliver_column)
    with psycopg.connect(pg_database_url) as connection:
        connection.execute("SET TIME ZONE 'UTC'")
        rows = (
            connection.cursor(binary=True)
            .execute(statements.receive, {"now": None, "lease": LEASE, "limit": MESSAGES})
            .fetchall()
        )
        assert len(rows) == MESSAGES
        updated, in_place = _updates(connection)
        connection.commit()
        assert updated == MESSAGES, "the first updates of this backend"
        assert in_place >= 0.8 * MESSAGES, (updated, in_place)  # all of them but ~1 a page

        tokens = [message.lease_token for message in messages_from_rows(table, rows)]
        renewed = connection.execute(
            statements.renew,
            {
                "now": None,
                "tokens": tokens,
                "stored": [stored_token(token) for token in tokens],
                "locations": [token_location(token) for token in tokens],
                "extension": LEASE,
            },
        ).fetchall()
        assert all(row[1] is not None for row in renewed)
        total, total_in_place = _updates(connection)
        connection.commit()
        assert total - updated == MESSAGES
        # the pages are pruned of the versions the receive left dead, and have room again
        assert total_in_place - in_place >= 0.8 * MESSAGES, (total, total_in_place)


@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
def test_next_ready_reads_the_index_past_leased_messages(
    db: txqueue.Database, pg_database_url: str, plan_cache_mode: str
) -> None:
    """How long an idle receiver sleeps: found from the head of the ready index (the leased
    messages there, then the first unleased one), never by reading the whole queue."""
    with psycopg.connect(pg_database_url, autocommit=True) as connection:
        connection.execute(
            "INSERT INTO jobs (jobid, payload, deliver_time) SELECT i, 'x',"
            " now() + i * interval '1 ms' FROM generate_series(1000, 20000) i"
        )
        connection.execute("ANALYZE jobs")
    leased = db.receive_now("jobs", max_batch_size=50, lease_duration=LEASE)
    statements = queue_statements(db.queue("jobs"), db._driver.deliver_column)  # type: ignore[attr-defined]
    with psycopg.connect(pg_database_url, autocommit=True) as connection:
        connection.execute(f"SET plan_cache_mode = {plan_cache_mode}")
        connection.execute(
            "PREPARE next_ready AS " + statements.next_ready.replace("%(now)s", "$1")
        )
        plan = "\n".join(
            row[0] for row in connection.execute("EXPLAIN EXECUTE next_ready(NULL)").fetchall()
        )
        [[seconds]] = connection.execute("EXECUTE next_ready(NULL)").fetchall()
    assert len(leased) == 50
    assert "Seq Scan" not in plan, plan
    assert seconds <= 0  # the 51st message is ready now
