"""SQLite commits that change leases only skip the fsync, and nothing else does.

``leasing._lease_transaction`` runs receive, renew and release at ``synchronous=NORMAL`` (a
power loss that undoes such a commit also ends every process holding those leases, since all
of them share the machine). What must hold: the connection is back at its own setting
afterwards, also when the transaction fails, so the sends and acks that follow on a pooled
connection are synced as configured; ``OFF`` and ``NORMAL`` are left alone.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

import txqueue
from txqueue.drivers.base import ReceiveParams, ReleaseParams
from txqueue.drivers.sqlite import leasing
from txqueue.errors import TxqueueError

DDL = "CREATE QUEUE Jobs (Id INT64 NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"


@pytest.fixture
def database(tmp_path: Path) -> tuple[Path, txqueue.Database]:
    path = tmp_path / "leases.db"
    db = txqueue.connect(f"sqlite:///{path}")
    db.update_ddl(DDL)
    with db.batch() as b:
        for key in range(3):
            b.send(queue="Jobs", key=(key,), payload=b"x")
    return path, db


def _traced(path: Path, level: str) -> tuple[sqlite3.Connection, list[str]]:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute(f"PRAGMA synchronous={level}")
    statements: list[str] = []
    connection.set_trace_callback(statements.append)
    return connection, statements


@pytest.mark.parametrize(("level", "number"), [("FULL", 2), ("EXTRA", 3)])
def test_a_receive_commits_unsynced_and_restores_the_setting(
    database: tuple[Path, txqueue.Database], level: str, number: int
) -> None:
    path, db = database
    connection, statements = _traced(path, level)
    table = db.queue("Jobs")
    got = leasing.receive(connection, ReceiveParams(table, 2, timedelta(seconds=30)), "DeliverTime")
    released = leasing.release(
        connection, ReleaseParams(table, [m.lease_token for m in got], timedelta(0)), "DeliverTime"
    )

    assert len(got) == 2 and released == 2
    commits = [i for i, s in enumerate(statements) if s == "COMMIT"]
    relaxed = [i for i, s in enumerate(statements) if s == "PRAGMA synchronous=NORMAL"]
    restored = [i for i, s in enumerate(statements) if s == f"PRAGMA synchronous={number}"]
    assert len(commits) == len(relaxed) == len(restored) == 2
    assert all(r < c < b for r, c, b in zip(relaxed, commits, restored))
    assert connection.execute("PRAGMA synchronous").fetchone()[0] == number
    db.close()


@pytest.mark.parametrize("level", ["OFF", "NORMAL"])
def test_off_and_normal_are_left_alone(database: tuple[Path, txqueue.Database], level: str) -> None:
    path, db = database
    connection, statements = _traced(path, level)
    leasing.receive(
        connection, ReceiveParams(db.queue("Jobs"), 1, timedelta(seconds=30)), "DeliverTime"
    )
    assert not [s for s in statements if s.startswith("PRAGMA synchronous=")]
    db.close()


def test_the_setting_is_restored_when_the_lease_transaction_fails(
    database: tuple[Path, txqueue.Database],
) -> None:
    path, db = database
    connection, _ = _traced(path, "FULL")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer: BEGIN IMMEDIATE fails at once
    connection.execute("PRAGMA busy_timeout=0")
    try:
        with pytest.raises(TxqueueError):
            leasing.receive(
                connection, ReceiveParams(db.queue("Jobs"), 1, timedelta(seconds=30)), "DeliverTime"
            )
    finally:
        holder.execute("ROLLBACK")
    assert connection.execute("PRAGMA synchronous").fetchone()[0] == 2
    assert not connection.in_transaction
    db.close()
