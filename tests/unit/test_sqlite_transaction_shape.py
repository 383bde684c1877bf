"""The statements a SQLite transaction of txqueue's own sends, as SQLite sees them.

A write transaction begins with its first statement. One that holds a single buffered send
or ack at commit, and ran nothing before, is that one statement (SQLite commits it by
itself, as raw SQL's INSERT or DELETE); more than that is BEGIN IMMEDIATE, the statements
and COMMIT; a transaction that did nothing sends nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import txqueue
from txqueue.drivers.sqlite import pool as pool_module
from txqueue.errors import AlreadyExists

DDL = "CREATE QUEUE Jobs (Id INT64 NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"


@pytest.fixture
def traced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, list[str]]]:
    """A database whose pooled connections record every statement they run."""
    statements: list[str] = []
    connect = pool_module.connect

    def traced_connect(*args: Any) -> sqlite3.Connection:
        connection = connect(*args)
        connection.set_trace_callback(statements.append)
        return connection

    monkeypatch.setattr(pool_module, "connect", traced_connect)
    with txqueue.connect(f"sqlite:///{tmp_path / 'shape.db'}") as db:
        db.update_ddl(DDL)
        statements.clear()
        yield db, statements


def _verbs(statements: list[str]) -> list[str]:
    """The statements' verbs, less the PRAGMAs that set how long a write waits for the lock."""
    verbs = [s.split()[0].upper() for s in statements]
    return [verb for verb in verbs if verb != "PRAGMA"]


def test_a_lone_send_and_a_lone_ack_are_one_statement_each(traced: Any) -> None:
    db, statements = traced
    with db.batch() as batch:
        batch.send("Jobs", (1,), b"x")
    assert _verbs(statements) == ["INSERT"]

    [message] = db.receive_now("Jobs")
    statements.clear()
    with db.batch() as batch:
        batch.ack("Jobs", message.key, lease_token=message.lease_token)
    assert _verbs(statements) == ["DELETE"]
    assert db.queue_info("Jobs").ready == 0


def test_a_lone_send_to_a_taken_key_writes_nothing(traced: Any) -> None:
    db, statements = traced
    with db.batch() as batch:
        batch.send("Jobs", (1,), b"first")
    statements.clear()
    with pytest.raises(AlreadyExists), db.batch() as batch:
        batch.send("Jobs", (1,), b"second")
    assert _verbs(statements) == ["INSERT"]  # nothing to roll back
    with db.snapshot() as snapshot:
        rows = list(snapshot.execute_sql("SELECT Payload FROM Jobs"))
    assert [bytes(row[0]) for row in rows] == [b"first"]


def test_two_sends_are_one_transaction_and_an_empty_one_runs_nothing(traced: Any) -> None:
    db, statements = traced
    with db.batch() as batch:
        batch.send("Jobs", (1,), b"x")
        batch.send("Jobs", (2,), b"y")
    verbs = _verbs(statements)
    assert verbs[0] == "BEGIN" and verbs[-1] == "COMMIT", verbs
    assert set(verbs[1:-1]) == {"INSERT"}, verbs

    statements.clear()
    with db.batch():
        pass
    assert statements == []


def test_a_stream_after_a_short_batch_asks_what_is_due_instead_of_leasing_again(
    traced: Any,
) -> None:
    """Three ready of a batch of ten: the lease that takes them, the read of when the next is
    due (none: the stream waits to its end) and the lease after the wait. It used to run a
    second, empty, lease before that read."""
    db, statements = traced
    with db.batch() as batch:
        for number in range(3):
            batch.send("Jobs", (number,), b"x")
    statements.clear()
    received = [m.key for m in db.receive("Jobs", max_duration="300ms", max_batch_size=10)]
    assert sorted(received) == [(0,), (1,), (2,)]
    leases = [s for s in statements if s.lstrip().upper().startswith("UPDATE")]
    assert len(leases) == 2, leases
