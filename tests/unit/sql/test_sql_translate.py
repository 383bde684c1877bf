"""The translator without a database: plans, engine SQL, and the errors it names."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from sql_catalog import plan

from txqueue.core.schema import Dialect
from txqueue.errors import InvalidArgument, NotFound
from txqueue.sql import (
    DmlPlan,
    QueryPlan,
    ReceivePlan,
    RenewPlan,
    is_complete,
    parse_sql,
    split_script,
    statement_kind,
)

G, P = Dialect.GOOGLESQL, Dialect.POSTGRESQL
ENGINES = ["sqlite", "postgres"]


def query(
    sql: str, dialect: Dialect = G, engine: str = "sqlite", params: object = None
) -> QueryPlan:
    result = plan(sql, dialect, engine, params)
    assert isinstance(result, QueryPlan)
    return result


def dml(sql: str, dialect: Dialect = G, engine: str = "sqlite", params: object = None) -> DmlPlan:
    result = plan(sql, dialect, engine, params)
    assert isinstance(result, DmlPlan)
    return result


# ---- names, stars and hidden columns ----------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_star_on_a_queue_shows_declared_columns_and_deliver_time_only(engine: str) -> None:
    result = query("SELECT * FROM UserTasks", engine=engine)
    assert [o.name for o in result.outputs or []] == [
        "UserId",
        "MessageId",
        "Payload",
        "DeliverTime",
    ]
    assert "_txq" not in result.sql and "*" not in result.sql


def test_postgresql_dialect_names_fold_to_lower_case_and_deliver_time_is_snake_case() -> None:
    result = query('SELECT UserId, "userid" AS "Quoted", t.* FROM UserTasks AS t', dialect=P)
    assert [o.name for o in result.outputs or []] == [
        "userid", "Quoted", "userid", "messageid", "payload", "deliver_time",
    ]  # fmt: skip


def test_names_are_quoted_backticks_on_sqlite_and_lower_case_on_postgres() -> None:
    sqlite = query("SELECT UserName FROM Users WHERE UserId = 1").sql
    postgres = query("SELECT UserName FROM Users WHERE UserId = 1", engine="postgres").sql
    assert sqlite == "SELECT `UserName` FROM `Users` WHERE `UserId` = 1"
    assert postgres == 'SELECT "username" FROM "users" WHERE "userid" = 1'


@pytest.mark.parametrize(
    "sql", ["SELECT _txq_lease_token FROM UserTasks", "SELECT * FROM txqueue_objects"]
)
def test_reserved_names_are_refused(sql: str) -> None:
    with pytest.raises(InvalidArgument, match="reserved for txqueue"):
        plan(sql)


def test_unknown_table_is_not_found_with_its_position() -> None:
    with pytest.raises(NotFound, match=r"Nope.*line 2, column 6"):
        plan("SELECT 1\nFROM Nope")


def test_star_of_subqueries_and_ctes_keeps_known_column_types() -> None:
    result = query(
        "WITH c AS (SELECT * FROM UserTasks) SELECT c.*, x.n FROM c, (SELECT 1 AS n) AS x"
    )
    outputs = result.outputs or []
    assert [o.name for o in outputs] == ["UserId", "MessageId", "Payload", "DeliverTime", "n"]
    assert outputs[3].column is not None and outputs[3].column.type.value == "TIMESTAMP"


# ---- literals, casts, timestamps ---------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_bytes_literals_and_casts_are_bound_bytes(engine: str) -> None:
    g = dml(
        "INSERT INTO UserTasks (UserId, MessageId, Payload) VALUES (1, 'a', b'\\x00hi')",
        engine=engine,
    )
    assert list(g.params.values()) == [b"\x00hi"]
    p = dml(
        "INSERT INTO usertasks (userid, messageid, payload) VALUES (1, 'a', CAST('\\x6869' AS bytea))",
        dialect=P,
        engine=engine,
    )
    assert list(p.params.values()) == [b"hi"]


def test_timestamp_add_is_integer_microseconds_on_sqlite() -> None:
    pinned = datetime(2030, 1, 1, tzinfo=timezone.utc)
    result = plan(
        "INSERT INTO UserTasks (UserId, MessageId, Payload, DeliverTime)"
        " VALUES (1, 'a', b'', TIMESTAMP_ADD(CURRENT_TIMESTAMP(), INTERVAL 29 DAY))",
        now=pinned,
    )
    assert isinstance(result, DmlPlan)
    assert f"+ {29 * 86_400_000_000}" in result.sql
    assert 1_893_456_000_000_000 in result.params.values()  # 2030-01-01 in µs


@pytest.mark.parametrize(
    ("sql", "dialect", "micros"),
    [
        ("SELECT TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 90 SECOND)", G, -90_000_000),
        ("SELECT CURRENT_TIMESTAMP + INTERVAL '1 HOUR'", P, 3_600_000_000),
        ("SELECT now() - INTERVAL '1 hour 30 minutes'", P, -5_400_000_000),
    ],
)
def test_interval_arithmetic_on_sqlite(sql: str, dialect: Dialect, micros: int) -> None:
    result = query(sql, dialect)
    assert f"{'-' if micros < 0 else '+'} {abs(micros)}" in result.sql
    assert (
        result.outputs
        and result.outputs[0].column
        and result.outputs[0].column.type.value == "TIMESTAMP"
    )


def test_postgres_keeps_native_timestamp_arithmetic() -> None:
    result = dml(
        "INSERT INTO UserTasks (UserId, MessageId, Payload, DeliverTime)"
        " VALUES (1, 'a', b'', TIMESTAMP_ADD(CURRENT_TIMESTAMP(), INTERVAL 29 DAY))",
        engine="postgres",
    )
    assert "CURRENT_TIMESTAMP + INTERVAL '29 DAY'" in result.sql


@pytest.mark.parametrize("engine", ENGINES)
def test_string_literals_next_to_timestamps_are_timestamps(engine: str) -> None:
    result = query(
        "SELECT 1 FROM UserTasks WHERE DeliverTime < '2030-01-01 00:00:00+01'", engine=engine
    )
    [value] = result.params.values()
    expected = datetime(2029, 12, 31, 23, tzinfo=timezone.utc)
    assert value == (1_893_452_400_000_000 if engine == "sqlite" else expected)


def test_timestamp_functions_that_would_misread_sqlite_integers_are_refused() -> None:
    with pytest.raises(
        InvalidArgument, match="EXTRACT on TIMESTAMP values is not supported on SQLite"
    ):
        plan("SELECT EXTRACT(YEAR FROM DeliverTime) FROM UserTasks")
    query("SELECT EXTRACT(YEAR FROM DeliverTime) FROM UserTasks", engine="postgres")


def test_cast_types_in_googlesql_spelling() -> None:
    sql = query(
        "SELECT CAST(UserId AS STRING(36)), CAST('7' AS INT64), CAST(UserName AS BYTES(MAX)) FROM Users",
        engine="postgres",
    ).sql
    assert sql == (
        'SELECT CAST("userid" AS TEXT), CAST(\'7\' AS BIGINT), CAST("username" AS BYTEA) FROM "users"'
    )


def test_percent_signs_are_escaped_for_psycopg_but_placeholders_are_not() -> None:
    result = query(
        "SELECT 1 FROM Users WHERE UserName LIKE '%a%' AND UserId = @id",
        engine="postgres",
        params={"id": 1},
    )
    [name] = result.params
    assert "'%%a%%'" in result.sql and f"%({name})s" in result.sql


# ---- parameters -----------------------------------------------------------------------------------


@pytest.mark.parametrize("params", [[5], (5,), {"p1": 5}, {"1": 5}])
def test_postgresql_positional_parameters(params: object) -> None:
    result = query("SELECT * FROM users WHERE userid = $1", dialect=P, params=params)
    assert list(result.params.values()) == [5]


def test_googlesql_parameters_are_named_and_missing_ones_are_named_in_the_error() -> None:
    assert list(query("SELECT @A", params={"a": 1}).params.values()) == [1]
    with pytest.raises(InvalidArgument, match=r"no value for parameter @b"):
        plan("SELECT @b", params={"a": 1})
    with pytest.raises(InvalidArgument, match="named"):
        plan("SELECT @a", params=[1])
    with pytest.raises(InvalidArgument, match=r"write query parameters as @name"):
        plan("SELECT ?")


def test_parameter_values_are_encoded_for_sqlite_storage() -> None:
    moment = datetime(1970, 1, 1, 0, 0, 1, tzinfo=timezone.utc)
    result = query("SELECT @t, @b, @j", params={"t": moment, "b": True, "j": {"a": 1}})
    assert list(result.params.values()) == [1_000_000, 1, '{"a": 1}']
    with pytest.raises(InvalidArgument, match="timezone-aware"):
        plan("SELECT @t", params={"t": datetime(2020, 1, 1)})


def test_param_types_check_and_encode() -> None:
    result = plan("SELECT @p", G, "postgres", {"p": {"k": [1]}}, param_types={"p": "JSON"})
    assert isinstance(result, QueryPlan)
    assert type(next(iter(result.params.values()))).__name__ == "Jsonb"
    with pytest.raises(InvalidArgument, match="must be an int"):
        plan("SELECT @p", params={"p": "x"}, param_types={"p": "INT64"})


# ---- DML rules --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE UserTasks SET Payload = b'' WHERE true",
        "INSERT INTO usertasks (userid, messageid, payload) VALUES (1, 'a', '') ON CONFLICT (userid, messageid) DO UPDATE SET payload = ''",
    ],
)
def test_updating_a_queue_is_refused(sql: str) -> None:
    dialect = P if sql.startswith("INSERT") else G
    with pytest.raises(InvalidArgument, match="queues do not support UPDATE; ack and send instead"):
        plan(sql, dialect)


def test_insert_into_a_queue_sends_and_names_the_queue() -> None:
    result = dml("INSERT INTO usertasks (userid, messageid, payload) VALUES (1, 'a', b'x')")
    assert result.sends_to == ("UserTasks",)
    assert dml("DELETE FROM UserTasks WHERE UserId = 1").sends_to == ()


def test_insert_without_column_list_uses_the_declared_columns() -> None:
    result = dml("INSERT INTO UserTasks VALUES (1, 'a', b'x')")
    assert "(`UserId`, `MessageId`, `Payload`)" in result.sql


def test_googlesql_delete_and_update_need_where() -> None:
    with pytest.raises(InvalidArgument, match="WHERE true"):
        plan("DELETE FROM UserTasks")
    assert dml("DELETE FROM usertasks", dialect=P).sql == "DELETE FROM `usertasks`"


def test_googlesql_refuses_a_string_for_bytes() -> None:
    with pytest.raises(InvalidArgument, match=r"Payload is BYTES: write a bytes literal"):
        plan("INSERT INTO UserTasks (UserId, MessageId, Payload) VALUES (1, 'a', 'text')")


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("DELETE FROM UserTasks WHERE UserId = 1 ASSERT_ROWS_MODIFIED 1", 1),
        ("DELETE FROM UserTasks WHERE UserId = 1\n-- note\nASSERT_ROWS_MODIFIED 0;", 0),
        ("DELETE FROM UserTasks WHERE UserId = 1 ASSERT_ROWS_MODIFIED @n", 3),
        ("DELETE FROM UserTasks WHERE UserId = 1", None),
    ],
)
def test_assert_rows_modified_becomes_expected_rows(sql: str, expected: int | None) -> None:
    result = dml(sql, params={"n": 3})
    assert result.expected_rows == expected
    assert "ASSERT" not in result.sql


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT 1 ASSERT_ROWS_MODIFIED 1", "applies to INSERT, UPDATE and DELETE"),
        ("DELETE FROM UserTasks WHERE true ASSERT_ROWS_MODIFIED -1", "needs a row count"),
        ("DELETE FROM UserTasks WHERE true ASSERT_ROWS_MODIFIED 1 AND x", "needs a row count"),
    ],
)
def test_bad_assert_rows_modified(sql: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        plan(sql)


# ---- RECEIVE_ and RENEWLEASE_ -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "dialect", "batch", "duration"),
    [
        ("SELECT * FROM RECEIVE_UserTasks(max_duration=>'20m')", G, 1, timedelta(minutes=20)),
        (
            "SELECT * FROM RECEIVE_usertasks(max_duration=>'90s', max_batch_size=>5)",
            G,
            5,
            timedelta(seconds=90),
        ),
        ("SELECT * FROM spanner.receive_usertasks(3, NULL, '1h')", P, 3, timedelta(hours=1)),
        ("SELECT * FROM spanner.receive_usertasks(NULL, NULL, NULL)", P, 1, timedelta(seconds=20)),
        (
            "SELECT * FROM spanner.receive_usertasks(max_duration => '1m')",
            P,
            1,
            timedelta(minutes=1),
        ),
    ],
)
def test_receive_arguments(sql: str, dialect: Dialect, batch: int, duration: timedelta) -> None:
    result = plan(sql, dialect)
    assert isinstance(result, ReceivePlan)
    assert (result.max_batch_size, result.max_duration) == (batch, duration)


def test_receive_projection_per_dialect() -> None:
    g = plan(
        "SELECT Payload AS p, r.SpannerLeaseToken, DeliveryCount FROM RECEIVE_UserTasks() AS r"
    )
    assert isinstance(g, ReceivePlan) and g.fields == ["p", "SpannerLeaseToken", "DeliveryCount"]
    p = plan("SELECT * FROM spanner.receive_usertasks(NULL, NULL, '1m')", P)
    assert isinstance(p, ReceivePlan)
    assert p.fields == [
        "userid", "messageid", "payload", "deliver_time", "spanner_lease_expiration_timestamp",
        "spanner_lease_token", "spanner_last_batch_message",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT * FROM RECEIVE_UserTasks(priority=>1)", "priority must be NULL"),
        ("SELECT * FROM RECEIVE_UserTasks(max_duration=>'soon')", "is not a duration"),
        ("SELECT * FROM RECEIVE_UserTasks(max_duration=>20)", "must be a string"),
        ("SELECT * FROM RECEIVE_UserTasks(max_batch_size=>0)", "positive integer"),
        ("SELECT * FROM RECEIVE_UserTasks(colour=>1)", "has no argument 'colour'"),
        ("SELECT * FROM RECEIVE_UserTasks(1, NULL, '1m', 4)", "at most 3"),
        ("SELECT * FROM RECEIVE_UserTasks(max_batch_size=>1, max_batch_size=>2)", "given twice"),
        ("SELECT Nope FROM RECEIVE_UserTasks()", "offers the columns"),
        ("SELECT * FROM RECEIVE_UserTasks() WHERE UserId = 1", "WHERE is not supported"),
        ("SELECT * FROM RECEIVE_Users()", "is a table, not a queue"),
        ("SELECT * FROM Users JOIN RECEIVE_UserTasks() ON true", "must be the only source"),
        ("SELECT * FROM RENEWLEASE_UserTasks(lease_tokens => [1])", "array of strings"),
        (
            "SELECT * FROM RENEWLEASE_UserTasks([leaseToken])",
            "must be a literal or a query parameter",
        ),
    ],
)
def test_bad_table_function_calls(sql: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        plan(sql)


@pytest.mark.parametrize(
    ("sql", "dialect", "params"),
    [
        ("SELECT * FROM RENEWLEASE_UserTasks(lease_tokens => ['t1', 't2'])", G, None),
        ("SELECT * FROM RENEWLEASE_UserTasks(['t1', 't2'])", G, None),
        ("SELECT * FROM RENEWLEASE_UserTasks(@tokens)", G, {"tokens": ["t1", "t2"]}),
        ("SELECT * FROM RENEWLEASE_UserTasks([leaseToken, 't2'])", G, {"leaseToken": "t1"}),
        ("SELECT * FROM spanner.renewlease_usertasks(lease_tokens => ARRAY['t1', 't2'])", P, None),
        ("SELECT * FROM spanner.renewlease_usertasks($1)", P, [["t1", "t2"]]),
    ],
)
def test_renewlease_tokens(sql: str, dialect: Dialect, params: object) -> None:
    result = plan(sql, dialect, params=params)
    assert isinstance(result, RenewPlan) and result.tokens == ["t1", "t2"]


# ---- syntax errors and scripts ------------------------------------------------------------------


def test_syntax_errors_name_line_column_and_token() -> None:
    with pytest.raises(
        InvalidArgument,
        match=r"syntax error at line 2, column 18 near 'ORDER BY': incomplete WHERE",
    ):
        plan("SELECT UserId\nFROM Users WHERE ORDER BY 1")
    with pytest.raises(InvalidArgument, match="unterminated"):
        plan("SELECT 'open")


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT 1; SELECT 2", "expected one SQL statement, found 2"),
        ("CREATE TABLE t (a INT64) PRIMARY KEY (a)", "is DDL: apply it with update_ddl"),
        ("VACUUM", "unsupported statement"),
        ("SELECT * FROM other.Users", "schema-qualified"),
        ("  ", "non-empty"),
    ],
)
def test_unsupported_statements(sql: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        parse_sql(sql, G).plan({}, "sqlite")


def test_split_script_keeps_comments_and_drops_empty_pieces() -> None:
    script = "-- one\nSELECT 1; /* two */ SELECT ';';\n-- trailing comment only\n"
    assert split_script(script) == ["-- one\nSELECT 1", "/* two */ SELECT ';'"]
    assert statement_kind("-- c\n  select 1", G) == "query"
    assert statement_kind("DELETE FROM t", G) == "dml"
    assert statement_kind("create queue q (a INT64) PRIMARY KEY (a)", G) == "ddl"
    assert is_complete("SELECT 1; -- done", G)
    assert not is_complete("SELECT ';'", G) and not is_complete("SELECT 'a;", G)
