"""Dropped replies at the commit of a send-only or ack-only transaction (PostgreSQL).

A transaction holding only buffered sends or acks is sent without BEGIN and COMMIT: its
statement commits at the pipeline's Sync (an implicit transaction). The proxy drops the connection at
that Sync — before forwarding it (the server rolls back) or right after (the server commits,
the client hears nothing, or hears only the FATAL of a server shutting down) — and the
commit marker must tell which: ``run_in_transaction``
returns after one attempt when the transaction committed, re-runs it when it did not, and
every message ends sent (or acked) exactly once.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import txqueue

from .proxy import CommitDropProxy, fault_marker

pytestmark = pytest.mark.postgres

QUEUE = (
    "CREATE QUEUE jobs (jobid varchar(64) NOT NULL, payload bytea NOT NULL, PRIMARY KEY (jobid))"
)
MESSAGES = 12


@pytest.mark.parametrize("mode", ["before", "after", "fatal"])
def test_a_dropped_reply_at_an_ack_only_commit_is_resolved(pg_database_url: str, mode: str) -> None:
    with txqueue.connect(pg_database_url) as db:
        db.update_ddl([QUEUE])
        with db.batch() as batch:  # the key carries the marker: the ack binds it
            for number in range(MESSAGES):
                batch.send("jobs", (fault_marker(mode, f"job{number}"),), b"x")
    attempts: Counter[str] = Counter()
    with CommitDropProxy.for_url(pg_database_url) as proxy:
        with txqueue.connect(proxy.url(pg_database_url) + "&pool_size=2") as db:
            # Leases outlast the run: a "fatal" drop holds each connection open a while.
            messages = db.receive_now(
                "jobs", max_batch_size=MESSAGES, lease_duration=timedelta(seconds=120)
            )
            assert len(messages) == MESSAGES
            for message in messages:

                def work(txn: txqueue.Transaction, m: txqueue.Message = message) -> None:
                    attempts[m.key[0]] += 1
                    txn.ack("jobs", m.key, lease_token=m.lease_token)

                db.run_in_transaction(work)
        drops = proxy.drops_by_tag()

    _check_resolved(pg_database_url, mode, drops, attempts, left_in_queue=0)


@pytest.mark.parametrize(
    ("mode", "read_first"),
    [("before", False), ("after", False), ("fatal", False), ("fatal", True)],
)
def test_a_dropped_reply_at_a_send_only_commit_is_resolved(
    pg_database_url: str, mode: str, read_first: bool
) -> None:
    """``read_first``: the transaction reads before it sends, so it runs as BEGIN … COMMIT
    (not implicit); a FATAL in place of COMMIT's reply is resolved from the marker too."""
    with txqueue.connect(pg_database_url) as db:
        db.update_ddl([QUEUE])
    attempts: Counter[str] = Counter()
    with CommitDropProxy.for_url(pg_database_url) as proxy:
        with txqueue.connect(proxy.url(pg_database_url) + "&pool_size=2") as db:
            for number in range(MESSAGES):
                key = fault_marker(mode, f"job{number}")  # the key carries the marker

                def work(txn: txqueue.Transaction, key: str = key) -> None:
                    attempts[key] += 1
                    if read_first:
                        txn.execute_sql("SELECT count(*) FROM jobs")
                    txn.send("jobs", (key,), b"x")

                db.run_in_transaction(work)
        drops = proxy.drops_by_tag()

    implicit = not read_first
    _check_resolved(pg_database_url, mode, drops, attempts, MESSAGES, implicit)


def _check_resolved(
    url: str,
    mode: str,
    drops: dict[str, Any],
    attempts: Counter[str],
    left_in_queue: int,
    implicit: bool = True,
) -> None:
    """Every commit dropped (at its Sync, or its COMMIT); each ran once if it committed, twice
    if not."""
    assert sorted(drops) == sorted(f"job{n}" for n in range(MESSAGES))
    protocols = {drop.protocol for drop in drops.values()}
    assert (protocols == {"implicit"}) == implicit, protocols
    # committed ("after", "fatal"): no re-run; rolled back ("before"): one re-run
    expected = 2 if mode == "before" else 1
    assert set(attempts.values()) == {expected}, attempts
    with psycopg.connect(url) as connection:
        assert connection.execute("SELECT count(*) FROM jobs").fetchone() == (left_in_queue,)
