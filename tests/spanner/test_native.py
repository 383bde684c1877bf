"""Native Cloud Spanner queues (``?queues=native``), at the RPC level against the client's mock
server (``tests/spannermock.py``): the exact DDL, commit mutations and receive / renew SQL
txqueue sends. The emulator has no native queues: there, ``auto`` chooses emulated ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from conformance.support import Face
from google.cloud.spanner_v1 import Mutation, TypeCode
from google.cloud.spanner_v1.types import result_set
from google.protobuf import json_format
from spannermock import TARGET, MockServer, spanner_mock

import txqueue
from txqueue.core.schema import CreateTable, Dialect
from txqueue.drivers.base import AckParams, ReceiveParams, RenewParams, SendParams
from txqueue.drivers.spanner import catalog, native
from txqueue.drivers.spanner.engine import SpannerDatabase
from txqueue.drivers.spanner.transaction import Work
from txqueue.errors import FailedPrecondition, InvalidArgument
from txqueue.sql.ddl import parse_ddl

__all__ = ["spanner_mock"]

USERS_DDL = "CREATE TABLE Users (UserId INT64 NOT NULL, UserName STRING(MAX)) PRIMARY KEY (UserId)"
QUEUE_DDL = (
    "CREATE QUEUE UserTasks (UserId INT64 NOT NULL, MessageId STRING(36) NOT NULL,"
    " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (UserId, MessageId),"
    " INTERLEAVE IN PARENT Users ON DELETE CASCADE"
)
STATEMENT = parse_ddl(QUEUE_DDL, Dialect.GOOGLESQL)
assert isinstance(STATEMENT, CreateTable)
QUEUE = STATEMENT.table
EXPIRES = "2026-01-02T03:04:05.000006Z"
_STRING, _INT64, _BYTES, _TIMESTAMP, _BOOL = (
    TypeCode.STRING,
    TypeCode.INT64,
    TypeCode.BYTES,
    TypeCode.TIMESTAMP,
    TypeCode.BOOL,
)


#: The pause check a native receive reads first, in its own transaction.
PAUSED = "SELECT 1 FROM txqueue_paused WHERE queue = @queue"


def _result(fields: list[tuple[str, Any]], rows: list[list[Any]]) -> result_set.ResultSet:
    return result_set.ResultSet(
        metadata={"row_type": {"fields": [{"name": n, "type_": {"code": c}} for n, c in fields]}},
        rows=rows,
    )


def _json(mutations: Any) -> list[dict[str, Any]]:
    return [json_format.MessageToDict(Mutation.pb(m)) for m in mutations]


@pytest.fixture
def database(spanner_mock: MockServer) -> Iterator[SpannerDatabase]:
    database = SpannerDatabase(TARGET)
    try:
        yield database
    finally:
        database.close()


def _work(database: SpannerDatabase) -> Work:
    work = Work(database, "DeliverTime")
    work.native_queues = True
    return work


def test_native_ddl_is_create_queue_as_spanner_documents_it(
    spanner_mock: MockServer, database: SpannerDatabase
) -> None:
    spanner_mock.servicer.mock_spanner.add_result(
        "SELECT kind, definition FROM txqueue_objects",
        _result([("kind", _STRING), ("definition", _STRING)], []),
    )
    statements = [parse_ddl(USERS_DDL, Dialect.GOOGLESQL), STATEMENT]
    catalog.apply_ddl(database, statements, "DeliverTime", native_queues=True)
    [ddl] = spanner_mock.admin.requests
    assert list(ddl.statements)[1:] == [
        "CREATE QUEUE `UserTasks` (`UserId` INT64 NOT NULL, `MessageId` STRING(36) NOT NULL,"
        " `Payload` BYTES(MAX) NOT NULL) PRIMARY KEY (`UserId`, `MessageId`),"
        " INTERLEAVE IN PARENT `Users` ON DELETE CASCADE"
    ]  # no hidden columns, indexes or change stream of txqueue's
    assert native.drop_queue(QUEUE, ["ByUser"]) == [
        "DROP INDEX `ByUser`",
        "DROP QUEUE `UserTasks`",
    ]


def test_native_send_and_ack_are_spanners_mutations(
    spanner_mock: MockServer, database: SpannerDatabase
) -> None:
    work = _work(database)
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    work.send(SendParams(QUEUE, (7, "m1"), b"payload", when))
    work.ack(AckParams(QUEUE, (7, "m0"), None, ignore_not_found=True))
    work.commit()
    [commit] = spanner_mock.requests("CommitRequest")
    send, ack, marker = _json(commit.mutations)
    assert send == {
        "send": {
            "queue": "UserTasks",
            "key": ["7", "m1"],
            "deliverTime": "2026-01-02T03:04:05Z",
            "payload": "cGF5bG9hZA==",  # BYTES as base64, as the client takes them
        }
    }
    assert ack == {"ack": {"queue": "UserTasks", "key": ["7", "m0"], "ignoreNotFound": True}}
    assert marker["insert"]["table"] == "txqueue_commits"
    assert not spanner_mock.requests("ExecuteSqlRequest")  # no read before: Spanner refuses


def test_a_fenced_native_ack_renews_its_token_in_the_same_transaction(
    spanner_mock: MockServer, database: SpannerDatabase
) -> None:
    fields = [
        ("SpannerOldLeaseToken", _STRING),
        ("SpannerNewLeaseToken", _STRING),
        ("SpannerLeaseExpirationTimestamp", _TIMESTAMP),
    ]
    renew = native.renew_sql(QUEUE)
    spanner_mock.servicer.mock_spanner.add_result(renew, _result(fields, [["t1", "t2", EXPIRES]]))
    work = _work(database)
    work.ack(AckParams(QUEUE, (7, "m1"), "t1", ignore_not_found=False))
    work.commit()
    [read] = spanner_mock.requests("ExecuteSqlRequest")
    [commit] = spanner_mock.requests("CommitRequest")
    assert read.sql == (
        "SELECT SpannerOldLeaseToken, SpannerNewLeaseToken, SpannerLeaseExpirationTimestamp"
        " FROM RENEWLEASE_UserTasks(lease_tokens=>@tokens)"
    )
    assert list(read.params["tokens"]) == ["t1"]
    assert read.transaction.id == commit.transaction_id  # one transaction: fenced
    assert _json(commit.mutations)[0] == {"ack": {"queue": "UserTasks", "key": ["7", "m1"]}}
    # a token whose lease was taken over: no new token, no Ack, nothing committed
    spanner_mock.servicer.mock_spanner.add_result(renew, _result(fields, [["t1", None, None]]))
    work = _work(database)
    work.ack(AckParams(QUEUE, (7, "m1"), "t1", ignore_not_found=False))
    with pytest.raises(FailedPrecondition, match="no longer holds the lease"):
        work.commit()
    assert len(spanner_mock.requests("CommitRequest")) == 1
    assert spanner_mock.requests("RollbackRequest")


def test_native_receive_and_renew_run_spanners_functions(
    spanner_mock: MockServer, database: SpannerDatabase
) -> None:
    sql = native.receive_sql(QUEUE, 5)
    assert sql == (
        "SELECT `UserId`, `MessageId`, `Payload`, DeliverTime, SpannerLeaseExpirationTimestamp,"
        " SpannerLeaseToken FROM RECEIVE_UserTasks(max_duration=>'0s', max_batch_size=>5)"
    )
    fields = [
        ("UserId", _INT64),
        ("MessageId", _STRING),
        ("Payload", _BYTES),
        ("DeliverTime", _TIMESTAMP),
        ("SpannerLeaseExpirationTimestamp", _TIMESTAMP),
        ("SpannerLeaseToken", _STRING),
    ]
    row = ["7", "m1", "cGF5bG9hZA==", "2026-01-02T03:04:00Z", EXPIRES, "t1"]
    spanner_mock.servicer.mock_spanner.add_result(sql, _result(fields, [row]))
    spanner_mock.servicer.mock_spanner.add_result(PAUSED, _result([("paused", _INT64)], []))
    [message] = database.read_write(native.receive, ReceiveParams(QUEUE, 5, timedelta(seconds=10)))
    assert (message.key, message.payload, message.lease_token) == ((7, "m1"), b"payload", "t1")
    paused, read = spanner_mock.requests("ExecuteSqlRequest")  # in one transaction
    assert (paused.sql, read.sql) == (PAUSED, sql)
    assert paused.transaction == read.transaction
    [commit] = spanner_mock.requests("CommitRequest")
    assert [m["insert"]["table"] for m in _json(commit.mutations)] == ["txqueue_commits"]

    renew = native.renew_sql(QUEUE)
    spanner_mock.servicer.mock_spanner.add_result(
        renew,
        _result(
            [
                ("SpannerOldLeaseToken", _STRING),
                ("SpannerNewLeaseToken", _STRING),
                ("SpannerLeaseExpirationTimestamp", _TIMESTAMP),
            ],
            [["t1", "t2", EXPIRES]],
        ),
    )
    [renewal] = database.read_write(
        native.renew, RenewParams(QUEUE, ["t1", "bogus"], timedelta(seconds=10))
    )
    assert (renewal.old_token, renewal.new_token) == ("t1", "t2")
    assert list(spanner_mock.requests("ExecuteSqlRequest")[-1].params["tokens"]) == ["t1", "bogus"]


def test_a_paused_native_queue_leases_nothing(
    spanner_mock: MockServer, database: SpannerDatabase
) -> None:
    """Spanner's RECEIVE_ knows no pause: txqueue reads the pause first and, paused, never
    calls it."""
    spanner_mock.servicer.mock_spanner.add_result(PAUSED, _result([("paused", _INT64)], [["1"]]))
    received = database.read_write(native.receive, ReceiveParams(QUEUE, 5, timedelta(seconds=10)))
    assert received == []
    assert [r.sql for r in spanner_mock.requests("ExecuteSqlRequest")] == [PAUSED]


def test_auto_uses_native_queues_where_the_database_accepts_create_queue(
    spanner_mock: MockServer, database: SpannerDatabase
) -> None:
    decided = (
        "SELECT (SELECT value FROM txqueue_settings WHERE name = @name),"
        " EXISTS (SELECT 1 FROM txqueue_objects WHERE kind = 'queue')"
    )
    fields = [("value", _STRING), ("queues", _BOOL)]
    spanner_mock.servicer.mock_spanner.add_result(decided, _result(fields, [[None, False]]))
    assert native.decide(database, "auto", Dialect.GOOGLESQL) is True
    probe, drop = spanner_mock.admin.requests
    assert list(probe.statements) == [
        "CREATE QUEUE `txqueue_probe_queue` (`id` STRING(36) NOT NULL,"
        " `payload` BYTES(MAX) NOT NULL) PRIMARY KEY (`id`)"
    ]
    assert list(drop.statements) == ["DROP QUEUE `txqueue_probe_queue`"]
    [commit] = spanner_mock.requests("CommitRequest")
    assert _json(commit.mutations)[0]["insertOrUpdate"]["values"] == [["queues", "native"]]
    # recorded: a database keeps one kind of queue
    spanner_mock.servicer.mock_spanner.add_result(decided, _result(fields, [["native", True]]))
    assert native.decide(database, "native", Dialect.GOOGLESQL) is True
    with pytest.raises(FailedPrecondition, match="queues=emulated but this database's queues"):
        native.decide(database, "emulated", Dialect.GOOGLESQL)
    assert len(spanner_mock.admin.requests) == 2  # probed once


def test_the_queues_url_option_is_checked() -> None:
    with pytest.raises(InvalidArgument, match="URL option queues must be one of auto, native"):
        txqueue.connect("spanner://projects/txqueue-test/instances/inst/databases/db?queues=fast")
    with pytest.raises(InvalidArgument, match="unknown Cloud Spanner URL option pool"):
        txqueue.connect("spanner://projects/txqueue-test/instances/inst/databases/db?pool=2")


def test_on_the_emulator_auto_chooses_emulated_queues(face: Face, spanner_url: str) -> None:
    db = face.connect(spanner_url)  # auto: the emulator refuses CREATE QUEUE, so emulated
    try:
        db.update_ddl([USERS_DDL, QUEUE_DDL])
        with db.batch() as batch:
            batch.insert("Users", columns=("UserId",), values=[(7,)])
            batch.send(queue="UserTasks", key=(7, "m1"), payload=b"p")
        [message] = db.receive_now("UserTasks")
        assert message.key == (7, "m1")
    finally:
        db.close()
    with pytest.raises(FailedPrecondition, match="queues=native but this database's queues"):
        face.connect(spanner_url + "?queues=native")


def test_native_queues_on_the_emulator_are_refused_by_it(face: Face, spanner_emulator: Any) -> None:
    url = spanner_emulator.create_database()
    try:
        db = face.connect(url + "?queues=native")  # as asked: no probe
        try:
            with pytest.raises(InvalidArgument, match="QUEUE"):
                db.update_ddl(
                    QUEUE_DDL.replace(", INTERLEAVE IN PARENT Users ON DELETE CASCADE", "")
                )
        finally:
            db.close()
    finally:
        spanner_emulator.drop_database(url)
