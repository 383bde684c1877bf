"""A driver transaction's operations: write, delete, send, ack, SQL, the ledger, commit and
rollback, each with its refusals."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import Any

import pytest
from blocking import shared_loop
from spannerfixtures import SpannerAppTransaction

from txqueue.drivers.protocol import AckParams, DeleteParams, SendParams, WriteKind, WriteParams
from txqueue.errors import AlreadyExists, FailedPrecondition, NotFound, OutOfRange

from .support import Harness, utcnow


def test_write_insert_then_update_insert_or_update_and_replace(harness: Harness) -> None:
    accounts = harness.accounts
    harness.add_accounts((1, "one"), (2, "two"))
    transaction = harness.driver.begin()
    transaction.write(WriteParams(accounts, WriteKind.UPDATE, ("Id", "Name"), [(1, "uno")]))
    transaction.write(
        WriteParams(accounts, WriteKind.INSERT_OR_UPDATE, ("Id", "Name"), [(2, "dos"), (3, "tres")])
    )
    transaction.write(WriteParams(accounts, WriteKind.REPLACE, ("Id",), [(3,)]))
    transaction.commit()

    assert harness.accounts_rows() == [(1, "uno"), (2, "dos"), (3, None)]


def test_write_insert_of_a_taken_key_is_already_exists(harness: Harness) -> None:
    harness.add_accounts((1, "one"))
    transaction = harness.driver.begin()
    try:
        with pytest.raises(AlreadyExists):
            transaction.write(
                WriteParams(harness.accounts, WriteKind.INSERT, ("Id", "Name"), [(1, "again")])
            )
    finally:
        transaction.rollback()
    assert harness.accounts_rows() == [(1, "one")]


def test_write_update_of_a_missing_key_is_not_found(harness: Harness) -> None:
    transaction = harness.driver.begin()
    try:
        with pytest.raises(NotFound):
            transaction.write(
                WriteParams(harness.accounts, WriteKind.UPDATE, ("Id", "Name"), [(9, "nine")])
            )
    finally:
        transaction.rollback()


def test_delete_by_keys_counts_and_without_keys_deletes_all(harness: Harness) -> None:
    harness.add_accounts((1, "one"), (2, "two"), (3, "three"))
    transaction = harness.driver.begin()
    assert transaction.delete(DeleteParams(harness.accounts, [(1,), (9,)])) == 1
    transaction.commit()
    assert harness.accounts_rows() == [(2, "two"), (3, "three")]

    transaction = harness.driver.begin()
    assert transaction.delete(DeleteParams(harness.accounts, None)) == 2
    transaction.commit()
    assert harness.accounts_rows() == []


def test_send_is_visible_after_commit_only(harness: Harness) -> None:
    transaction = harness.driver.begin()
    transaction.send(SendParams(harness.jobs, ("a",), b"payload", None))
    transaction.flush()
    assert harness.job_ids() == []  # another transaction does not see it yet
    transaction.commit()
    assert harness.job_ids() == ["a"]


def test_send_of_a_taken_key_is_already_exists_at_flush(harness: Harness) -> None:
    harness.send("a")
    transaction = harness.driver.begin()
    try:
        transaction.send(SendParams(harness.jobs, ("b",), b"x", None))
        transaction.send(SendParams(harness.jobs, ("a",), b"x", None))
        with pytest.raises(AlreadyExists, match="already has a message"):
            transaction.flush()
    finally:
        transaction.rollback()
    assert harness.job_ids() == ["a"]


def test_store_trace_context_keeps_it_with_the_message(harness: Harness) -> None:
    context = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    transaction = harness.driver.begin()
    params = SendParams(harness.jobs, ("a",), b"x", None)
    transaction.send(params)
    transaction.store_trace_context(params, context)
    transaction.commit()
    # the hidden column: Spanner names start with a letter
    column = "txqueue_trace_context" if harness.url.startswith("spanner") else "_txq_trace_context"
    assert harness.query(f"SELECT {column} FROM jobs") == [(context,)]


def test_ack_deletes_and_refuses_a_missing_message_or_a_lost_lease(harness: Harness) -> None:
    harness.send("a", "b")
    first, second = harness.receive_now()

    with pytest.raises(NotFound, match="has no message"):
        harness.ack("missing", None)
    with pytest.raises(FailedPrecondition, match="no longer holds the lease"):
        harness.ack(first.key[0], second.lease_token)
    harness.ack("missing", None, ignore_not_found=True)
    harness.ack(first.key[0], first.lease_token)
    harness.ack(second.key[0], None)  # no token: deleted whoever holds it

    assert harness.job_ids() == []


def test_a_refused_ack_takes_the_transaction_down(harness: Harness) -> None:
    harness.send("a")
    transaction = harness.driver.begin()
    try:
        transaction.ack(AckParams(harness.jobs, ("a",), None, False))
        transaction.ack(AckParams(harness.jobs, ("missing",), None, False))
        with pytest.raises(NotFound):
            transaction.commit()
    finally:
        transaction.rollback()
    assert harness.job_ids() == ["a"]


def test_execute_sql_reads_rows_with_parameters(harness: Harness) -> None:
    harness.add_accounts((1, "one"), (2, "two"))
    marker = harness.traits.marker
    rows = harness.query(f"SELECT name FROM accounts WHERE id = {marker}", [2])
    assert rows == [("two",)]


def test_execute_update_counts_and_expected_rows_undoes_only_that_statement(
    harness: Harness,
) -> None:
    harness.add_accounts((1, "one"), (2, "two"))
    transaction = harness.driver.begin()
    assert transaction.execute_update("UPDATE accounts SET name = 'x' WHERE id = 1") == 1
    with pytest.raises(OutOfRange):
        transaction.execute_update("UPDATE accounts SET name = 'y'", expected_rows=1)
    transaction.commit()  # still open, with the first update

    assert harness.accounts_rows() == [(1, "x"), (2, "two")]


def test_note_sent_wakes_a_receiver_of_a_sql_insert(harness: Harness) -> None:
    receiver = harness.driver.open_receiver(harness.jobs)
    try:
        transaction = harness.driver.begin()
        marker = harness.traits.marker
        sql = f"INSERT INTO jobs (id, payload) VALUES ({marker}, {marker})"
        transaction.execute_update(sql, ["sql", b"x"])
        transaction.note_sent("Jobs")
        transaction.commit()
        started = utcnow()
        receiver.wait(5.0)
        assert utcnow() - started < timedelta(seconds=2), "the commit did not wake the receiver"
    finally:
        receiver.close()
    assert [message.key for message in harness.receive_now()] == [("sql",)]


def test_record_once_is_true_once_per_key(harness: Harness) -> None:
    transaction = harness.driver.begin()
    assert transaction.record_once("k1") is True
    assert transaction.record_once("k1") is False
    transaction.commit()
    transaction = harness.driver.begin()
    try:
        assert transaction.record_once("k1") is False
        assert transaction.record_once("k2") is True
    finally:
        transaction.rollback()
    transaction = harness.driver.begin()
    try:
        assert transaction.record_once("k2") is True, "a rolled-back record is forgotten"
    finally:
        transaction.rollback()


def test_rollback_discards_everything_and_is_then_a_no_op(harness: Harness) -> None:
    transaction = harness.driver.begin()
    transaction.write(WriteParams(harness.accounts, WriteKind.INSERT, ("Id",), [(1,)]))
    transaction.send(SendParams(harness.jobs, ("a",), b"x", None))
    transaction.rollback()
    transaction.rollback()
    assert (harness.accounts_rows(), harness.job_ids()) == ([], [])


def test_transaction_load_catalog_matches_the_drivers(harness: Harness) -> None:
    transaction = harness.driver.begin()
    try:
        tables, indexes = transaction.load_catalog()
    finally:
        transaction.rollback()
    assert (tables, indexes) == harness.driver.load_catalog()


class CallersConnection:
    """The application's own connection with a transaction open on it: sqlite3 (usable from
    the event loop's thread too), psycopg, or psycopg's AsyncConnection for the asyncio driver."""

    def __init__(self, url: str, face: str) -> None:
        self._loop = shared_loop() if face == "async" else None
        self._spanner: SpannerAppTransaction | None = None
        if url.startswith("spanner://"):  # an open google-cloud-spanner transaction
            self._spanner = SpannerAppTransaction(url)
            self.connection = self._spanner.conn
            return
        if url.startswith("sqlite"):
            path = url.removeprefix("sqlite:///").split("?", 1)[0]
            self.connection: Any = sqlite3.connect(path, timeout=10, check_same_thread=False)
            return
        import psycopg  # the postgres extra

        if self._loop is not None:
            self.connection = self._loop.run(_awaited(psycopg.AsyncConnection.connect(url)))
        else:
            self.connection = psycopg.connect(url)

    def _call(self, method: str) -> None:
        if self._spanner is not None:
            getattr(self._spanner, method)()
            return
        result = getattr(self.connection, method)()
        if self._loop is not None and not isinstance(self.connection, sqlite3.Connection):
            self._loop.run(_awaited(result))

    def commit(self) -> None:
        self._call("commit")

    def close(self) -> None:
        self._call("close")


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def test_begin_on_the_callers_connection_leaves_the_commit_to_the_caller(
    harness: Harness, face: str
) -> None:
    caller = CallersConnection(harness.url, face)
    try:
        transaction = harness.driver.begin(caller.connection)
        transaction.send(SendParams(harness.jobs, ("joined",), b"x", None))
        transaction.commit()  # a savepoint released: the caller's transaction is still open
        assert harness.job_ids() == []
        caller.commit()
        assert harness.job_ids() == ["joined"]
    finally:
        caller.close()
