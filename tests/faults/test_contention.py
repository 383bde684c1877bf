"""Contention faults: a database busy past its timeout, a connection pool run dry.

- ``run_in_transaction`` retries an ``Aborted`` raised by BEGIN too (SQLite's write lock busy
  past ``busy_timeout_ms``), as it does one raised by the function or its commit.
- The PostgreSQL driver reads the catalog on the DDL transaction's own connection, so
  ``update_ddl`` works with ``pool_size=1``; and a transaction that names a table or queue
  missing from the cached catalog reloads it on its own connection too. (It took a second
  pooled connection: with every connection held by such transactions, each waited the
  pool's 30 s and failed with ``Unavailable``.)
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import txqueue
from txqueue.errors import TxqueueError

from .harness import with_query

HOLD_SECONDS = 0.6


def test_a_transaction_waits_out_a_writer_busy_past_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    url = f"sqlite:///{path}?busy_timeout_ms=50"
    with txqueue.connect(url) as db:
        db.update_ddl("CREATE TABLE Marks (Id INT64 NOT NULL, Note STRING(MAX)) PRIMARY KEY (Id)")
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the write lock ...
        releaser = threading.Timer(HOLD_SECONDS, holder.execute, ["COMMIT"])
        releaser.start()  # ... for 0.6 s, twelve busy timeouts
        try:
            started = time.monotonic()
            db.run_in_transaction(lambda txn: txn.insert("Marks", ("Id", "Note"), [(1, "x")]))
            assert time.monotonic() - started >= HOLD_SECONDS * 0.9
        finally:
            releaser.join()
            holder.close()
        with db.snapshot() as snapshot:
            assert list(snapshot.execute_sql("SELECT Id FROM Marks")) == [(1,)]


def _ddl(db: txqueue.Database) -> None:
    db.update_ddl("CREATE TABLE marks (id bigint NOT NULL, note text, PRIMARY KEY (id))")


def _unknown_table(db: txqueue.Database) -> None:
    db.run_in_transaction(lambda txn: txn.execute_update("DELETE FROM nowhere WHERE id = 1"))


def _unknown_queue(db: txqueue.Database) -> None:
    with db.batch() as batch:
        batch.send("Nowhere", key=(1,), payload="x")


def _unknown_table_after_a_statement(db: txqueue.Database) -> None:
    def work(txn: Any) -> None:
        txn.execute_sql("SELECT 1")  # the transaction has begun on its connection
        txn.insert("Nowhere", ("Id",), [(1,)])

    db.run_in_transaction(work)


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        pytest.param(_ddl, "ok", id="update_ddl"),
        pytest.param(_unknown_table, "NotFound", id="statement-on-an-unknown-table"),
        pytest.param(_unknown_queue, "NotFound", id="batch-send-to-an-unknown-queue"),
        pytest.param(
            _unknown_table_after_a_statement, "NotFound", id="insert-into-an-unknown-table"
        ),
    ],
)
def test_a_pool_of_one_connection_is_enough(
    pg_database_url: str, fault_figures: dict[str, Any], action: Any, expected: str
) -> None:
    """``update_ddl`` (apply_ddl -> load_catalog) and a transaction that names a table or
    queue missing from the cached catalog (Database.table -> load_catalog) read the catalog
    on the connection they hold."""
    db = txqueue.connect(with_query(pg_database_url, pool_size="1"))
    outcome: list[str] = []

    def run() -> None:
        try:
            action(db)
            outcome.append("ok")
        except TxqueueError as error:
            outcome.append(type(error).__name__)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        thread.join(5)
        fault_figures.update(outcome=outcome[0] if outcome else "still waiting after 5 s")
        assert outcome == [expected], "waiting for a second connection from a pool of one"
    finally:
        db.close()  # a waiting getconn fails at once when the pool closes
        thread.join(10)
