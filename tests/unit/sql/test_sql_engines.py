"""The SQL layer on real engines: every test runs on SQLite and PostgreSQL, in both dialects."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import threading
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

import txqueue
from txqueue.errors import InvalidArgument, OutOfRange
from txqueue.sql import AsyncStreamingResultSet, StreamingResultSet

SCHEMA = {
    "googlesql": [
        "CREATE TABLE Users (UserId INT64 NOT NULL, UserName STRING(MAX), Active BOOL,"
        " Joined TIMESTAMP, Birthday DATE, Profile JSON, Score NUMERIC) PRIMARY KEY (UserId)",
        "CREATE QUEUE UserTasks (UserId INT64 NOT NULL, MessageId STRING(36) NOT NULL,"
        " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (UserId, MessageId),"
        " INTERLEAVE IN PARENT Users ON DELETE CASCADE",
    ],
    "postgresql": [
        "CREATE TABLE users (userid bigint NOT NULL, username varchar, active boolean,"
        " joined timestamptz, birthday date, profile jsonb, score numeric, PRIMARY KEY (userid))",
        "CREATE QUEUE usertasks (userid bigint NOT NULL, messageid varchar(36) NOT NULL,"
        " payload bytea NOT NULL, PRIMARY KEY (userid, messageid))"
        " INTERLEAVE IN PARENT users ON DELETE CASCADE",
    ],
}
COMBINATIONS = [
    pytest.param(("sqlite", "googlesql"), id="sqlite-googlesql"),
    pytest.param(("sqlite", "postgresql"), id="sqlite-postgresql"),
    pytest.param(("postgres", "googlesql"), id="postgres-googlesql", marks=pytest.mark.postgres),
    pytest.param(("postgres", "postgresql"), id="postgres-postgresql", marks=pytest.mark.postgres),
]
JOINED = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.timezone.utc)


@pytest.fixture(params=COMBINATIONS)
def url_and_dialect(request: pytest.FixtureRequest) -> tuple[str, str]:
    engine, dialect = request.param
    url = request.getfixturevalue("sqlite_url" if engine == "sqlite" else "pg_database_url")
    return str(url), dialect


@pytest.fixture
def db(url_and_dialect: tuple[str, str]) -> Iterator[txqueue.Database]:
    url, dialect = url_and_dialect
    database = txqueue.connect(url, dialect=dialect)
    database.update_ddl(SCHEMA[dialect])
    with database.batch() as batch:
        batch.insert(
            "Users",
            ("UserId", "UserName", "Active", "Joined", "Birthday", "Profile", "Score"),
            [(1, "Ada", True, JOINED, dt.date(1815, 12, 10), {"langs": ["en"]}, Decimal("1.5"))],
        )
    yield database
    database.close()


def gsql(db: txqueue.Database) -> bool:
    return db.dialect is txqueue.Dialect.GOOGLESQL


def param(db: txqueue.Database, name: str, position: int) -> str:
    return f"@{name}" if gsql(db) else f"${position}"


def params(db: txqueue.Database, **values: Any) -> Any:
    return values if gsql(db) else list(values.values())


def query(db: txqueue.Database, sql: str, values: Any = None) -> txqueue.ResultSet:
    with db.snapshot() as snapshot:
        result = snapshot.execute_sql(sql, values)
        assert not isinstance(result, StreamingResultSet)
        return result


def update(db: txqueue.Database, sql: str, values: Any = None) -> int:
    return db.run_in_transaction(lambda txn: txn.execute_update(sql, values))


def send_sql(db: txqueue.Database, user: int, message: str, payload: bytes = b"p") -> None:
    value = f"b'{payload.decode()}'" if gsql(db) else f"'{payload.decode()}'"
    update(
        db,
        f"INSERT INTO usertasks (userid, messageid, payload) VALUES ({user}, '{message}', {value})",
    )


def receive_sql(db: txqueue.Database, arguments: str = "") -> str:
    if gsql(db):
        return f"SELECT * FROM RECEIVE_UserTasks({arguments})"
    return f"SELECT * FROM spanner.receive_usertasks({arguments or 'NULL, NULL, NULL'})"


# ---- typed results -------------------------------------------------------------------------------


def test_rows_come_back_as_python_values_of_the_declared_types(db: txqueue.Database) -> None:
    result = query(db, "SELECT * FROM users")
    assert [f.lower() for f in result.fields] == [
        "userid", "username", "active", "joined", "birthday", "profile", "score",
    ]  # fmt: skip
    assert result.rows == [
        (1, "Ada", True, JOINED, dt.date(1815, 12, 10), {"langs": ["en"]}, Decimal("1.5"))
    ]


def test_star_on_a_queue_hides_the_state_and_shows_deliver_time(db: txqueue.Database) -> None:
    send_sql(db, 1, "m1", b"hello")
    result = query(db, "SELECT * FROM usertasks")
    deliver = "DeliverTime" if gsql(db) else "deliver_time"
    assert result.fields[3] == deliver and len(result.fields) == 4
    [(user, message, payload, deliver_time)] = result.rows
    assert (user, message, payload) == (1, "m1", b"hello")
    assert isinstance(deliver_time, dt.datetime) and deliver_time.tzinfo is not None
    with pytest.raises(InvalidArgument, match="reserved"):
        query(db, "SELECT _txq_lease_token FROM usertasks")


def test_parameters_of_every_type_compare_with_stored_values(db: txqueue.Database) -> None:
    sql = (
        f"SELECT userid FROM users WHERE joined = {param(db, 'j', 1)}"
        f" AND active = {param(db, 'a', 2)} AND username = {param(db, 'n', 3)}"
    )
    assert query(db, sql, params(db, j=JOINED, a=True, n="Ada")).rows == [(1,)]
    later = f"SELECT COUNT(*) FROM users WHERE joined > {param(db, 't', 1)}"
    assert query(db, later, params(db, t=JOINED + dt.timedelta(microseconds=1))).rows == [(0,)]


def test_timestamp_literals_and_arithmetic_agree_across_engines(db: txqueue.Database) -> None:
    if gsql(db):
        sql = (
            "SELECT TIMESTAMP_ADD(Joined, INTERVAL 1 DAY), TIMESTAMP '2024-05-06 07:08:09.123456+00'"
            " = Joined, Joined < '2025-01-01T00:00:00Z' FROM Users"
        )
    else:
        sql = (
            "SELECT joined + INTERVAL '1 day', CAST('2024-05-06 07:08:09.123456+00' AS timestamptz)"
            " = joined, joined < '2025-01-01T00:00:00Z' FROM users"
        )
    assert query(db, sql).rows == [(JOINED + dt.timedelta(days=1), True, True)]


def test_percent_signs_and_uuids(db: txqueue.Database) -> None:
    assert query(db, "SELECT COUNT(*) FROM users WHERE username LIKE '%d%'").rows == [(1,)]
    uuid = "GENERATE_UUID()" if gsql(db) else "CAST(gen_random_uuid() AS varchar)"
    [(first, second)] = query(db, f"SELECT {uuid}, {uuid}").rows
    assert len(first) == 36 and first.count("-") == 4 and first != second


# ---- DML ---------------------------------------------------------------------------------------------


def test_assert_rows_modified_undoes_only_that_statement(db: txqueue.Database) -> None:
    send_sql(db, 1, "a")
    send_sql(db, 1, "b")

    def work(txn: txqueue.Transaction) -> None:
        txn.execute_update("UPDATE users SET username = 'renamed' WHERE userid = 1")
        with pytest.raises(OutOfRange, match="2 row"):
            txn.execute_update("DELETE FROM usertasks WHERE userid = 1 ASSERT_ROWS_MODIFIED 1")
        assert (
            txn.execute_update("DELETE FROM usertasks WHERE messageid = 'a' ASSERT_ROWS_MODIFIED 1")
            == 1
        )

    db.run_in_transaction(work)
    assert query(db, "SELECT username FROM users").rows == [("renamed",)]
    assert query(db, "SELECT messageid FROM usertasks").rows == [("b",)]


def test_batch_update_forms(db: txqueue.Database) -> None:
    p = param(db, "m", 1)
    insert = (
        f"INSERT INTO usertasks (userid, messageid, payload) VALUES (1, {p}, {param(db, 'p', 2)})"
    )
    counts = db.run_in_transaction(
        lambda txn: txn.batch_update(
            [
                (insert, params(db, m="x", p=b"1")),
                (insert, params(db, m="y", p=b"2"), None),
                "DELETE FROM usertasks WHERE messageid = 'x'",
            ]
        )
    )
    assert counts == [1, 1, 1]
    with pytest.raises(InvalidArgument, match="each statement"):
        db.run_in_transaction(lambda txn: txn.batch_update([42]))


@pytest.mark.parametrize(
    ("method", "sql", "message"),
    [
        ("execute_update", "SELECT 1", "execute_update runs INSERT, UPDATE and DELETE"),
        ("execute_sql", "DELETE FROM users WHERE true", "use execute_update"),
        ("execute_sql", "RECEIVE", "take leases in their own short transactions"),
    ],
)
def test_statements_in_the_wrong_place_are_refused(
    db: txqueue.Database, method: str, sql: str, message: str
) -> None:
    text = receive_sql(db) if sql == "RECEIVE" else sql
    with pytest.raises(InvalidArgument, match=message):
        db.run_in_transaction(lambda txn: getattr(txn, method)(text))
    with db.snapshot() as snapshot, pytest.raises(InvalidArgument, match="read-only"):
        snapshot.execute_sql("DELETE FROM users WHERE true")


def test_pinned_clock_is_current_timestamp(url_and_dialect: tuple[str, str]) -> None:
    url, dialect = url_and_dialect
    pinned = dt.datetime(2031, 2, 3, 4, 5, 6, tzinfo=dt.timezone.utc)
    with txqueue.connect(url, dialect=dialect, clock=lambda: pinned) as db:
        now = "CURRENT_TIMESTAMP()" if dialect == "googlesql" else "now()"
        assert query(db, f"SELECT {now}").rows == [(pinned,)]


# ---- RECEIVE_ and RENEWLEASE_ ---------------------------------------------------------------------


def test_receive_streams_messages_as_they_are_sent(db: txqueue.Database) -> None:
    send_sql(db, 1, "first")
    arguments = "max_duration=>'30s'" if gsql(db) else "NULL, NULL, '30s'"
    with db.snapshot() as snapshot:
        result = snapshot.execute_sql(receive_sql(db, arguments))
    assert isinstance(result, StreamingResultSet)
    with result:
        first = next(result)
        assert first[:3] == (1, "first", b"p")
        # A send made with SQL after the stream started arrives on the same stream.
        sender = threading.Thread(target=send_sql, args=(db, 1, "second"))
        sender.start()
        second = next(result)
        sender.join()
    assert second[:3] == (1, "second", b"p")
    assert result.rows == [first, second]


def test_list_of_a_receive_gets_every_row(db: txqueue.Database) -> None:
    # list() asks for len() first, which waits for the whole stream: the rows it waited for
    # must still be iterated (they were lost: list() gave []).
    for i in range(3):
        send_sql(db, 1, f"m{i}")
    arguments = "max_duration=>'1s'" if gsql(db) else "NULL, NULL, '1s'"
    with db.snapshot() as snapshot:
        rows = list(snapshot.execute_sql(receive_sql(db, arguments)))
    assert sorted(row[1] for row in rows) == ["m0", "m1", "m2"]


def test_batches_mark_their_last_message(db: txqueue.Database) -> None:
    for i in range(5):
        send_sql(db, 1, f"m{i}")
    arguments = "max_duration=>'30s', max_batch_size=>3" if gsql(db) else "3, NULL, '30s'"
    sql = receive_sql(db, arguments).replace(
        "*", "SpannerLastBatchMessage" if gsql(db) else "spanner_last_batch_message"
    )
    with db.snapshot() as snapshot:
        result = snapshot.execute_sql(sql)
        assert isinstance(result, StreamingResultSet)
        with result:
            flags = [row[0] for row in itertools.islice(result, 5)]
    assert flags == [False, False, True, False, True]


@pytest.mark.parametrize(
    ("googlesql", "postgresql", "message"),
    [
        ("priority=>5", "NULL, 5, NULL", "priority must be NULL"),
        ("max_duration=>'20 minutes'", "NULL, NULL, '20 minutes'", "is not a duration"),
    ],
)
def test_bad_receive_arguments(
    db: txqueue.Database, googlesql: str, postgresql: str, message: str
) -> None:
    with db.snapshot() as snapshot, pytest.raises(InvalidArgument, match=message):
        snapshot.execute_sql(receive_sql(db, googlesql if gsql(db) else postgresql))


def test_renewlease_skips_tokens_that_are_not_leases(db: txqueue.Database) -> None:
    sql = (
        "SELECT * FROM RENEWLEASE_UserTasks(lease_tokens => ['not-a-token'])"
        if gsql(db)
        else "SELECT * FROM spanner.renewlease_usertasks(ARRAY['not-a-token'])"
    )
    assert query(db, sql).rows == []


def test_async_face_streams_with_async_for(url_and_dialect: tuple[str, str]) -> None:
    url, dialect = url_and_dialect

    async def main() -> list[tuple[Any, ...]]:
        adb = await txqueue.connect_async(url, dialect=dialect)
        try:
            await adb.update_ddl(SCHEMA[dialect])

            async def work(txn: txqueue.AsyncTransaction) -> list[int]:
                bytes_literal = "b'x'" if dialect == "googlesql" else "'x'"
                return await txn.batch_update(
                    [
                        "INSERT INTO users (userid, username) VALUES (7, 'async')",
                        "INSERT INTO usertasks (userid, messageid, payload)"
                        f" VALUES (7, 'a', {bytes_literal})",
                    ]
                )

            assert await adb.run_in_transaction(work) == [1, 1]
            sql = (
                "SELECT UserId, MessageId, Payload FROM RECEIVE_UserTasks(max_duration=>'30s')"
                if dialect == "googlesql"
                else "SELECT userid, messageid, payload FROM spanner.receive_usertasks(NULL, NULL, '30s')"
            )
            async with adb.snapshot() as snapshot:
                result = await snapshot.execute_sql(sql)
            assert isinstance(result, AsyncStreamingResultSet)
            async with result:
                async for row in result:
                    return [row]
            return []
        finally:
            await adb.close()

    assert asyncio.run(main()) == [(7, "a", b"x")]


def test_an_sql_insert_into_a_queue_marks_the_transaction_to_wake_receivers(
    db: txqueue.Database,
) -> None:
    """Like ``send``, the INSERT makes the commit wake the queue's receivers (driver detail)."""
    marked: set[str] = set()

    def work(txn: txqueue.Transaction) -> None:
        txn.execute_update("UPDATE users SET username = 'x' WHERE userid = 1")
        assert not getattr(txn._transaction, "_sent", set())
        send_sql_in(txn, db)
        marked.update(getattr(txn._transaction, "_sent", set()))

    db.run_in_transaction(work)
    assert {name.lower() for name in marked} == {"usertasks"}


def send_sql_in(txn: txqueue.Transaction, db: txqueue.Database) -> None:
    payload = "b'p'" if gsql(db) else "'p'"
    txn.execute_update(
        f"INSERT INTO usertasks (userid, messageid, payload) VALUES (1, 'wake', {payload})"
    )


def test_array_parameters_match_elements(db: txqueue.Database) -> None:
    sql = (
        "SELECT userid FROM users WHERE userid IN UNNEST(@ids)"
        if gsql(db)
        else "SELECT userid FROM users WHERE userid = ANY($1)"
    )
    assert query(db, sql, params(db, ids=[3, 1, 2])).rows == [(1,)]
    assert query(db, sql, params(db, ids=[3])).rows == []
