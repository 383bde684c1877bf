"""A COMMIT in flight when PostgreSQL crashes must be resolved truthfully after the restart.

A resolver that asked ``pg_xact_status(xid)`` would be misled here: a transaction whose WAL
never reached disk is forgotten by crash recovery, and the restarted server hands the same
xid to a new transaction, whose status it then reports — "committed" for a transaction that
was lost. txqueue's resolver reads the commit marker the transaction would have written (as
durable as the commit) once the old backend is gone, so the lost transaction is reported
rolled back (``Aborted``, and ``run_in_transaction`` re-runs it); ``CommitOutcomeUnknown``
is tolerated, "committed" is a failure.

The scenario is made deterministic: the server's WAL writer sleeps 10 s (so the lost
transaction's records stay in memory), the proxy stalls its COMMIT (never forwarded, socket
kept open) and holds the resolver's new connections while the test crashes and restarts the
server and — in the second test — commits new transactions until one gets the lost xid.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest
from pgserver import PostgresServer

import txqueue

from .harness import wait_for
from .proxy import CommitDropProxy, fault_marker

RESOLVE_BOUND = 75.0  # the resolver gives up after 60 s


@dataclass
class Outcome:
    attempts: list[str] = field(default_factory=list)
    result: str = ""
    xid: str = ""


def _lost_commit(
    private_postgres: Callable[..., PostgresServer], reuse_xid: bool
) -> tuple[Outcome, set[str]]:
    """Run the scenario; return what txqueue reported and the attempts that committed."""
    server = private_postgres({"wal_writer_delay": "10000ms"})
    url = server.create_database("lost")
    with txqueue.connect(url) as db:
        db.update_ddl(
            "CREATE TABLE effects (attempt varchar(64) NOT NULL, fault varchar(80),"
            " PRIMARY KEY (attempt))"
        )
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("CREATE TABLE scratch (n int)")
    outcome = Outcome()
    with CommitDropProxy.for_url(url) as proxy:
        db = txqueue.connect(proxy.url(url) + "&pool_size=2")
        try:
            with psycopg.connect(url, autocommit=True) as connection:
                connection.execute("CHECKPOINT")  # nothing before the lost xid is in doubt

            def work(txn: txqueue.Transaction) -> None:
                attempt = uuid.uuid4().hex
                marker = fault_marker("stall", attempt) if not outcome.attempts else None
                outcome.attempts.append(attempt)
                txn.insert("effects", ("attempt", "fault"), [(attempt, marker)])
                if marker:
                    proxy.hold_new_connections()  # the resolver must wait for the crash

            def run() -> None:
                try:
                    db.run_in_transaction(work)
                    outcome.result = "ok"
                except txqueue.errors.TxqueueError as error:
                    outcome.result = type(error).__name__
                except Exception as error:  # a driver error leaking out: a bug
                    outcome.result = f"untyped {type(error).__module__}.{type(error).__name__}"

            client = threading.Thread(target=run)
            client.start()
            wait_for(lambda: proxy.drops, 30, "the COMMIT to be stalled")
            outcome.xid = _stalled_xid(url)
            server.restart(mode="immediate")
            if reuse_xid:
                _commit_until_xid(url, int(outcome.xid))
            proxy.hold_new_connections(False)
            client.join(RESOLVE_BOUND)
            assert not client.is_alive(), "resolving the lost COMMIT hung"
        finally:
            db.close()
    with psycopg.connect(url, autocommit=True) as connection:
        committed = {row[0] for row in connection.execute("SELECT attempt FROM effects")}
    return outcome, committed


def _stalled_xid(url: str) -> str:
    """The xid of the transaction whose COMMIT is stalled (idle in transaction, server side)."""
    with psycopg.connect(url, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT backend_xid::text FROM pg_stat_activity"
            " WHERE datname = current_database() AND backend_xid IS NOT NULL"
            " AND pid <> pg_backend_pid()"
        ).fetchall()
    assert len(rows) == 1, rows
    return str(rows[0][0])  # a fresh cluster: epoch 0, so the xid8 is the xid


def _commit_until_xid(url: str, target: int) -> None:
    """Commit small transactions until one is given xid ``target`` (reused after the crash)."""
    with psycopg.connect(url, autocommit=True) as connection:
        for _ in range(100):
            connection.execute("BEGIN")
            connection.execute("INSERT INTO scratch VALUES (1)")
            xid = int(connection.execute("SELECT pg_current_xact_id()::text").fetchone()[0])
            connection.execute("COMMIT")
            if xid >= target:
                assert xid == target, f"xid {target} was not reused (got {xid}): no repro"
                return
    raise AssertionError(f"xid {target} never came up again")


def _assert_reported_truthfully(outcome: Outcome, committed: set[str]) -> None:
    first = outcome.attempts[0]
    assert first not in committed, "the transaction lost in the crash committed after all?"
    assert not outcome.result.startswith("untyped"), outcome  # a raw psycopg error escaped
    assert outcome.result in ("ok", "CommitOutcomeUnknown"), outcome
    if outcome.result == "ok":
        # Only a re-run may have committed: the lost attempt must have been reported Aborted.
        assert len(outcome.attempts) >= 2, f"lost commit reported as committed: {outcome}"
        assert outcome.attempts[-1] in committed


@pytest.mark.timeout(180)
def test_commit_lost_in_a_crash_is_reported_aborted(
    private_postgres: Callable[..., PostgresServer], fault_figures: dict[str, Any]
) -> None:
    outcome, committed = _lost_commit(private_postgres, reuse_xid=False)
    fault_figures.update(result=outcome.result, attempts=len(outcome.attempts), xid=outcome.xid)
    _assert_reported_truthfully(outcome, committed)


@pytest.mark.timeout(180)
def test_commit_lost_in_a_crash_is_not_reported_from_a_reused_xid(
    private_postgres: Callable[..., PostgresServer], fault_figures: dict[str, Any]
) -> None:
    outcome, committed = _lost_commit(private_postgres, reuse_xid=True)
    fault_figures.update(result=outcome.result, attempts=len(outcome.attempts), xid=outcome.xid)
    _assert_reported_truthfully(outcome, committed)
