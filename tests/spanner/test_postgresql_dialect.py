"""PostgreSQL-dialect Cloud Spanner databases: the driver speaks the database's own dialect.

On the emulator: connecting (and refusing ``dialect="googlesql"``), the queue's hidden schema
in PG spelling, send / receive / renew / ack, and wake-ups through the queue's change stream
read with ``spanner.read_json_<stream>``. Native queues (which the emulator does not have) at
the RPC level against the client's mock server: the PG ``CREATE QUEUE`` and
``spanner.receive_<queue>`` / ``spanner.renewlease_<queue>`` with ``$n`` parameters.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from blocking import unwrap
from conformance.support import Face
from google.cloud.spanner_v1 import param_types
from spannermock import TARGET, MockServer, spanner_mock

import txqueue
from txqueue.core.schema import CreateTable, Dialect
from txqueue.drivers.base import AckParams, ReceiveParams, RenewParams
from txqueue.drivers.spanner import catalog, native
from txqueue.drivers.spanner.assertion import rows_modified
from txqueue.drivers.spanner.engine import SpannerDatabase, query
from txqueue.drivers.spanner.spelling import GOOGLESQL, POSTGRESQL, bind
from txqueue.drivers.spanner.transaction import Work
from txqueue.errors import InvalidArgument, OutOfRange
from txqueue.sql.ddl import parse_ddl

from .test_native import _BOOL, _BYTES, _INT64, _STRING, _TIMESTAMP, EXPIRES, _json, _result
from .test_wakeup_and_shards import BOUND_SECONDS, _receive_first, _send

__all__ = ["spanner_mock"]

USERS_DDL = "CREATE TABLE users (userid bigint NOT NULL, username varchar, PRIMARY KEY (userid))"
QUEUE_DDL = (
    "CREATE QUEUE usertasks (userid bigint NOT NULL, messageid varchar(36) NOT NULL,"
    " payload bytea NOT NULL, PRIMARY KEY (userid, messageid))"
    " INTERLEAVE IN PARENT users ON DELETE CASCADE"
)


@pytest.fixture
def pg(face: Face, spanner_postgresql_database_url: str) -> Iterator[Any]:
    """A PostgreSQL-dialect database holding ``users`` and its interleaved ``usertasks``."""
    database = face.connect(spanner_postgresql_database_url)
    try:
        database.update_ddl([USERS_DDL, QUEUE_DDL])
        yield database
    finally:
        database.close()


def test_binding_numbers_named_parameters_outside_quotes() -> None:
    sql, values, types = bind(
        POSTGRESQL,
        "SELECT '@not', \"@neither\", @b, @a, @b FROM t WHERE x = ANY(@a)",
        {"a": 1, "b": 2, "unused": 3},
        {"a": param_types.INT64},
    )
    assert sql == "SELECT '@not', \"@neither\", $1, $2, $1 FROM t WHERE x = ANY($2)"
    assert values == {"p1": 2, "p2": 1}
    assert types == {"p2": param_types.INT64}
    assert bind(GOOGLESQL, "SELECT @a", {"a": 1}, None) == ("SELECT @a", {"a": 1}, None)


def test_rows_modified_counts_what_a_dml_statement_would_modify_first() -> None:
    """ASSERT_ROWS_MODIFIED on the PostgreSQL dialect (which has none): counted beforehand."""
    inserted = rows_modified("INSERT INTO t (a) VALUES ($1), ($2)")
    assert inserted is not None and inserted(None, None, None) == 2
    selected = rows_modified("INSERT INTO t (a) SELECT a FROM u")  # its query's rows
    assert selected is not None and selected.sql == (
        "SELECT COUNT(*) FROM (SELECT a FROM u) AS txqueue_counted"
    )
    assert rows_modified("SELECT 1") is None


def test_connecting_with_googlesql_to_a_postgresql_database_names_both_dialects(
    face: Face, spanner_postgresql_database_url: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        face.connect(spanner_postgresql_database_url, dialect="googlesql")
    assert "'googlesql'" in str(caught.value) and "'postgresql'" in str(caught.value)
    database = face.connect(spanner_postgresql_database_url, dialect="postgresql")
    database.close()


def test_a_postgresql_database_holds_the_queue_and_its_hidden_schema(pg: Any) -> None:
    driver = unwrap(pg)._driver
    assert (driver.dialect, driver.sql_engine, pg.engine) == (
        Dialect.POSTGRESQL,
        "spanner_postgresql",
        "spanner",
    )
    _, rows = driver.database.read(
        query,
        "SELECT index_name FROM information_schema.indexes WHERE table_name = @table"
        " AND index_type = 'INDEX' ORDER BY index_name",
        {"table": "usertasks"},
    )
    assert [row[0] for row in rows] == ["txqueue_lease_usertasks", "txqueue_ready_usertasks"]
    _, rows = driver.database.read(
        query, "SELECT change_stream_name FROM information_schema.change_streams"
    )
    assert [row[0] for row in rows] == ["txqueue_wake_usertasks"]


def test_send_receive_renew_and_ack_on_a_postgresql_database(pg: Any) -> None:
    _send(pg, (1, "a"), (2, "b"))
    received = list(pg.receive("usertasks", max_duration=timedelta(seconds=1), max_batch_size=10))
    assert sorted(m.key for m in received) == [(1, "a"), (2, "b")]
    assert {m.payload for m in received} == {b"x"}
    [renewal] = pg.renew_lease("usertasks", [received[0].lease_token])
    assert renewal.new_token not in (None, received[0].lease_token)
    with pg.batch() as batch:
        batch.ack(queue="usertasks", key=received[0].key, lease_token=renewal.new_token)
        batch.ack(queue="usertasks", key=received[1].key, lease_token=received[1].lease_token)
    assert pg.queue_info("usertasks").ready == 0
    with pg.batch() as batch:  # deleting the parent deletes its messages
        batch.insert("users", columns=("userid", "username"), values=[(3, "c")])
        batch.send(queue="usertasks", key=(3, "c"), payload=b"y")
    with pg.batch() as batch:
        batch.delete("users", keys=[(3,)])
    assert pg.queue_info("usertasks").ready == 0


def test_a_send_by_another_handle_wakes_the_receiver_through_the_pg_change_stream(
    pg: Any, spanner_postgresql_database_url: str
) -> None:
    other = txqueue.connect(spanner_postgresql_database_url)
    driver = unwrap(pg)._driver
    before = driver.sends("usertasks")
    try:  # mutations and txqueue's names are case-insensitive: UserTasks is usertasks
        message, sent, arrived = _receive_first(pg, other, (1, "woken"))
    finally:
        other.close()
    assert message.key == (1, "woken")
    [(watcher, _)] = driver._watchers.values()
    assert watcher.live and not watcher.failed
    # nothing in this process sent: only the change stream can have counted that send
    assert driver.sends("usertasks") > before
    assert arrived - sent < BOUND_SECONDS


# ---- native queues, PostgreSQL dialect, at the RPC level ------------------------------------

PG_STATEMENT = parse_ddl(QUEUE_DDL, Dialect.POSTGRESQL)
assert isinstance(PG_STATEMENT, CreateTable)
PG_QUEUE = PG_STATEMENT.table
RENEW_FIELDS = [
    ("spanner_old_lease_token", _STRING),
    ("spanner_new_lease_token", _STRING),
    ("spanner_lease_expiration_timestamp", _TIMESTAMP),
]


@pytest.fixture
def pg_mock_database(spanner_mock: MockServer) -> Iterator[SpannerDatabase]:
    database = SpannerDatabase(TARGET)
    database.spelling = POSTGRESQL  # what reading the dialect of a PG database sets
    try:
        yield database
    finally:
        database.close()


def test_native_postgresql_ddl_is_create_queue_as_spanner_documents_it(
    spanner_mock: MockServer, pg_mock_database: SpannerDatabase
) -> None:
    spanner_mock.servicer.mock_spanner.add_result(
        "SELECT kind, definition FROM txqueue_objects",
        _result([("kind", _STRING), ("definition", _STRING)], []),
    )
    statements = [parse_ddl(USERS_DDL, Dialect.POSTGRESQL), PG_STATEMENT]
    catalog.apply_ddl(pg_mock_database, statements, "deliver_time", native_queues=True)
    [ddl] = spanner_mock.admin.requests
    assert list(ddl.statements) == [
        'CREATE TABLE "users" ("userid" bigint NOT NULL, "username" varchar,'
        ' PRIMARY KEY ("userid"))',
        'CREATE QUEUE "usertasks" ("userid" bigint NOT NULL, "messageid" varchar(36) NOT NULL,'
        ' "payload" bytea NOT NULL, PRIMARY KEY ("userid", "messageid"))'
        ' INTERLEAVE IN PARENT "users" ON DELETE CASCADE',
    ]
    assert native.drop_queue(PG_QUEUE, ["byuser"], POSTGRESQL) == [
        'DROP INDEX "byuser"',
        'DROP QUEUE "usertasks"',
    ]


def test_native_postgresql_receive_renew_and_fenced_ack_run_spanners_functions(
    spanner_mock: MockServer, pg_mock_database: SpannerDatabase
) -> None:
    sql = native.receive_sql(PG_QUEUE, 5, POSTGRESQL)
    assert sql == (
        'SELECT "userid", "messageid", "payload", deliver_time,'
        " spanner_lease_expiration_timestamp, spanner_lease_token"
        " FROM spanner.receive_usertasks(5, NULL, '0s')"
    )
    fields = [
        ("userid", _INT64),
        ("messageid", _STRING),
        ("payload", _BYTES),
        ("deliver_time", _TIMESTAMP),
        ("spanner_lease_expiration_timestamp", _TIMESTAMP),
        ("spanner_lease_token", _STRING),
    ]
    row = ["7", "m1", "cGF5bG9hZA==", "2026-01-02T03:04:00Z", EXPIRES, "t1"]
    spanner_mock.servicer.mock_spanner.add_result(sql, _result(fields, [row]))
    paused = "SELECT 1 FROM txqueue_paused WHERE queue = $1"  # read first: RECEIVE knows no pause
    spanner_mock.servicer.mock_spanner.add_result(paused, _result([("paused", _INT64)], []))
    params = ReceiveParams(PG_QUEUE, 5, timedelta(seconds=10))
    [message] = pg_mock_database.read_write(native.receive, params)
    assert (message.key, message.payload, message.lease_token) == ((7, "m1"), b"payload", "t1")
    assert spanner_mock.requests("ExecuteSqlRequest")[-1].sql == sql

    renew = (
        "SELECT spanner_old_lease_token, spanner_new_lease_token,"
        " spanner_lease_expiration_timestamp FROM spanner.renewlease_usertasks($1)"
    )
    spanner_mock.servicer.mock_spanner.add_result(
        renew, _result(RENEW_FIELDS, [["t1", "t2", EXPIRES]])
    )
    [renewal] = pg_mock_database.read_write(
        native.renew, RenewParams(PG_QUEUE, ["t1"], timedelta(seconds=10))
    )
    assert (renewal.old_token, renewal.new_token) == ("t1", "t2")
    read = spanner_mock.requests("ExecuteSqlRequest")[-1]
    assert read.sql == renew and list(read.params["p1"]) == ["t1"]

    work = Work(pg_mock_database, "deliver_time")  # a fenced ack: renew, then Spanner's Ack
    work.native_queues = True
    work.ack(AckParams(PG_QUEUE, (7, "m1"), "t1", ignore_not_found=False))
    work.commit()
    read = spanner_mock.requests("ExecuteSqlRequest")[-1]
    commit = spanner_mock.requests("CommitRequest")[-1]
    assert read.sql == renew and read.transaction.id == commit.transaction_id
    assert _json(commit.mutations)[0] == {"ack": {"queue": "usertasks", "key": ["7", "m1"]}}


def test_auto_probes_a_postgresql_database_with_its_create_queue(
    spanner_mock: MockServer, pg_mock_database: SpannerDatabase
) -> None:
    decided = (
        "SELECT (SELECT value FROM txqueue_settings WHERE name = $1),"
        " EXISTS (SELECT 1 FROM txqueue_objects WHERE kind = 'queue')"
    )
    fields = [("value", _STRING), ("queues", _BOOL)]
    spanner_mock.servicer.mock_spanner.add_result(decided, _result(fields, [[None, False]]))
    assert native.decide(pg_mock_database, "auto", Dialect.POSTGRESQL) is True
    probe, drop = spanner_mock.admin.requests
    assert list(probe.statements) == [
        'CREATE QUEUE "txqueue_probe_queue" ("id" varchar(36) NOT NULL, "payload" bytea NOT NULL,'
        ' PRIMARY KEY ("id"))'
    ]
    assert list(drop.statements) == ['DROP QUEUE "txqueue_probe_queue"']


def test_a_large_queue_on_a_postgresql_database_is_estimated_from_a_sample(
    pg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The emulator's PostgreSQL dialect fails on TABLESAMPLE (it stops): a key-hash sample."""
    from txqueue.drivers.spanner import browse

    monkeypatch.setattr(browse, "COUNT_LIMIT", 100)
    monkeypatch.setattr(browse, "SAMPLE_ROWS", 50)  # half the rows: a steady estimate
    with pg.batch() as batch:
        batch.insert("users", columns=("userid", "username"), values=[(1, "u")])
        for number in range(400):
            batch.send(queue="usertasks", key=(1, f"m{number:03}"), payload=b"x")
    info = pg.queue_info("usertasks", estimate=True)
    assert info.estimated is True
    assert info.ready == pytest.approx(400, rel=0.25)
    assert info.leased == 0


def test_assert_rows_modified_counts_with_the_statements_own_parameters(pg: Any) -> None:
    """The count first, then the statement: a parameter only the SET uses is still bound
    (the count query gets every parameter of the statement), and a mismatch changes nothing
    while the transaction goes on with its earlier writes."""

    def work(txn: Any) -> None:
        txn.execute_update("INSERT INTO users (userid, username) VALUES (1, 'a'), (2, 'b')")
        renamed = "UPDATE users SET username = $1 WHERE userid = $2 ASSERT_ROWS_MODIFIED 1"
        assert txn.execute_update(renamed, ["renamed", 1]) == 1
        everyone = "UPDATE users SET username = $1 WHERE userid > $2 ASSERT_ROWS_MODIFIED 1"
        with pytest.raises(OutOfRange, match="ASSERT_ROWS_MODIFIED 1"):
            txn.execute_update(everyone, ["x", 0])
        copied = (
            "INSERT INTO users (userid, username) SELECT userid + 10, username FROM users"
            " WHERE userid = $1 ASSERT_ROWS_MODIFIED 1"
        )
        assert txn.execute_update(copied, [2]) == 1

    pg.run_in_transaction(work)
    with pg.snapshot() as snapshot:
        rows = sorted(tuple(r) for r in snapshot.execute_sql("SELECT userid, username FROM users"))
    assert rows == [(1, "renamed"), (2, "b"), (12, "b")]
