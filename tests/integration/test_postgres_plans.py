"""PostgreSQL plans: receive, ack and renew reach their rows without reading the queue.

Joined to ``unnest()`` of a batch's keys or locations, the planner's first (custom) plans
for a queue of a few thousand rows hash the whole table: a sequential scan per batch, so a
drain costs O(n) per batch until the plan cache settles on a generic plan. The statements
hand the planner an array that drives a TID scan (leased rows) or an index scan (keys).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest
from postgres_support import _nodes, scans_of_jobs

import txqueue
from txqueue.drivers.postgres.codec import (
    stored_token,
    stored_token_array,
    tid_array,
    token_location,
)
from txqueue.drivers.postgres.runs import run_statement
from txqueue.drivers.postgres.statements import queue_statements
from txqueue.mutations import prepare_ack

pytestmark = pytest.mark.postgres

WAITING = 5_000
BATCH = 100


@pytest.fixture
def leased(
    db: txqueue.Database, pg_database_url: str
) -> tuple[txqueue.Database, list[txqueue.Message]]:
    """A queue of WAITING messages (analysed), BATCH of them leased."""
    with db.batch() as batch:
        for number in range(WAITING):
            batch.send("jobs", (number,), b"x" * 100)
    with psycopg.connect(pg_database_url, autocommit=True) as connection:
        connection.execute("ANALYZE jobs")
    messages = []
    for message in db.receive("jobs", max_duration=timedelta(seconds=5), max_batch_size=BATCH):
        messages.append(message)
        if message.last_in_batch:
            break
    assert len(messages) == BATCH
    return db, messages


def test_receive_ack_and_renew_plans_do_not_scan_the_queue(
    pg_database_url: str, leased: tuple[txqueue.Database, list[txqueue.Message]]
) -> None:
    db, messages = leased
    table = db.queue("jobs")
    deliver = db._driver.deliver_column  # type: ignore[attr-defined]
    statements = queue_statements(table, deliver)
    by_token = [prepare_ack(table, m.key, False, m.lease_token, None) for m in messages]
    by_key = [prepare_ack(table, m.key, False, None, None) for m in messages]
    # Tokens of two receives: their stored parts differ, so each row's travels in an array.
    by_tokens = by_token[:50] + [
        prepare_ack(table, m.key, False, "0" * 30 + m.lease_token[30:], None) for m in messages[50:]
    ]
    tokens = [m.lease_token for m in messages]
    renew = {
        "now": None,
        "tokens": tokens,
        "stored": [stored_token(t) for t in tokens],
        "locations": [token_location(t) for t in tokens],
        "extension": timedelta(seconds=10),
    }
    receive = {"now": None, "lease": timedelta(seconds=10), "limit": BATCH}
    with psycopg.connect(pg_database_url, autocommit=True) as connection:
        scans = {
            "receive": scans_of_jobs(connection, statements.receive, receive),
            "ack by token": scans_of_jobs(connection, *run_statement(by_token, deliver, False)),
            "ack by tokens of two receives": scans_of_jobs(
                connection, *run_statement(by_tokens, deliver, False)
            ),
            "ack by key": scans_of_jobs(connection, *run_statement(by_key, deliver, False)),
            "commit's ack": scans_of_jobs(
                connection, *_with_place(run_statement(by_token, deliver, True))
            ),
            "renew": scans_of_jobs(connection, statements.renew, renew),
        }
    assert all(found for found in scans.values()), scans
    assert not any("Seq Scan" in found for found in scans.values()), scans
    assert set(scans["ack by token"]) == {"Tid Scan"}, scans
    assert set(scans["ack by tokens of two receives"]) == {"Tid Scan"}, scans
    assert set(scans["renew"]) == {"Tid Scan"}, scans


def _with_place(statement: tuple[str, list[Any]]) -> tuple[str, list[Any]]:
    """The refusing form's two trailing arguments: how many rows, the run's place."""
    sql, arguments = statement
    return sql, [*arguments, BATCH, 0]


def test_tokens_travel_as_binary_arrays_built_whole(pg_database_url: str) -> None:
    """Each token's locator is its row's 6-byte ctid in hex; one that cannot be a ctid (none,
    or longer than 6 bytes) points at item 0, which never holds a row. The stored parts go as
    a text[] (one element repeated when the run shares it)."""
    stored = "0" * 30
    tokens = [
        f"{stored}.1",
        f"{stored}.{(5 << 16) | 3:x}",
        f"{stored}.ffffffffffff",
        stored,
        "",
        f"{stored}.1234567890abcdef",
    ]
    with psycopg.connect(pg_database_url, autocommit=True) as connection:
        [[text]] = connection.execute("SELECT %s::text", [tid_array(tokens)]).fetchall()
        [[empty]] = connection.execute("SELECT cardinality(%s)", [tid_array([])]).fetchall()
        shared, mixed, none = (
            connection.execute("SELECT %s", [stored_token_array(given)]).fetchone()
            for given in ([f"{stored}.1", f"{stored}.2"], [f"{stored}.1", "", f"{'1' * 30}.2"], [])
        )
    assert text == '{"(0,1)","(5,3)","(4294967295,65535)","(0,0)","(0,0)","(0,0)"}'
    assert empty == 0
    assert shared == ([stored, stored],)
    assert mixed == ([stored, "", "1" * 30],)
    assert none == ([],)


def test_a_paused_queues_receive_reads_the_pause_once_and_skips_its_scan(
    pg_database_url: str, leased: tuple[txqueue.Database, list[txqueue.Message]]
) -> None:
    """The pause check is part of the receive statement: a one-time filter above the same
    index scan (no query of its own), under which the scan of a paused queue never runs."""
    db, _ = leased
    table = db.queue("jobs")
    statements = queue_statements(table, db._driver.deliver_column)  # type: ignore[attr-defined]
    receive = {"now": None, "lease": timedelta(seconds=10), "limit": BATCH}
    with psycopg.connect(pg_database_url, autocommit=True) as connection:
        assert scans_of_jobs(connection, statements.receive, receive) == ["Index Scan", "Tid Scan"]
        db.pause_queue("jobs")
        connection.execute("BEGIN")
        try:
            [[document]] = connection.execute(
                "EXPLAIN (ANALYZE, FORMAT JSON) " + statements.receive, receive
            ).fetchall()
        finally:
            connection.execute("ROLLBACK")
    nodes = list(_nodes(document[0]["Plan"]))
    ready = [n for n in nodes if n["Node Type"] == "Index Scan" and n["Relation Name"] == "jobs"]
    assert [node["Actual Loops"] for node in ready] == [0], nodes  # never executed
    assert any("One-Time Filter" in node for node in nodes), nodes
    paused = [node for node in nodes if node.get("Relation Name") == "txqueue_paused"]
    assert [node["Actual Loops"] for node in paused] == [1], nodes
    assert db.receive_now("jobs", max_batch_size=BATCH) == []
