"""The translator's Cloud Spanner targets without a database: GoogleSQL (``spanner``) and
Spanner's PostgreSQL dialect (``spanner_postgresql``, a driver's ``sql_engine``).

The statements run on the emulator in ``tests/spanner/test_postgresql_sql.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from sql_catalog import plan

import txqueue
from txqueue.core.schema import Dialect
from txqueue.drivers import engines
from txqueue.errors import InvalidArgument, OutOfRange
from txqueue.sql import DmlPlan, QueryPlan, RowCheck, parse_sql

G, P = Dialect.GOOGLESQL, Dialect.POSTGRESQL
TARGET = "spanner_postgresql"


def query(sql: str, dialect: Dialect = P, params: Any = None, engine: str = TARGET) -> QueryPlan:
    result = plan(sql, dialect, engine, params)
    assert isinstance(result, QueryPlan)
    return result


def dml(sql: str, dialect: Dialect = P, params: Any = None, engine: str = TARGET) -> DmlPlan:
    result = plan(sql, dialect, engine, params)
    assert isinstance(result, DmlPlan)
    return result


def test_the_postgresql_dialect_target_is_found_by_name_and_chosen_by_no_url() -> None:
    traits = engines.traits_named(TARGET)
    assert traits.display_name == "Cloud Spanner (PostgreSQL dialect)"
    assert traits.schemes == () and traits.db_system == "gcp.spanner"
    assert traits not in engines.ENGINES  # never listed to users as an engine of its own
    assert (
        engines.parse_url("spanner://projects/my-project/instances/main/databases/orders").engine
        == "spanner"
    )


def test_parameters_are_question_marks_bound_in_order() -> None:
    result = query("SELECT userid FROM users WHERE username = $2 AND userid = $1", P, [7, "a"])
    assert result.sql == 'SELECT "userid" FROM "users" WHERE "username" = ? AND "userid" = ?'
    assert result.params == ["a", 7]
    internal = query("SELECT UserId FROM Users WHERE UserId = @id OR UserId = @id", G, {"id": 3})
    assert internal.sql == 'SELECT "userid" FROM "users" WHERE "userid" = ? OR "userid" = ?'
    assert internal.params == [3, 3]
    assert query("SELECT 'what?' AS q", P).sql == "SELECT 'what?' AS \"q\""


def test_a_cached_plan_hands_out_its_own_parameter_list() -> None:
    first = query("SELECT CAST('\\x00'::bytea AS bytea) AS b", P)
    first.params.append("changed")
    assert query("SELECT CAST('\\x00'::bytea AS bytea) AS b", P).params == [b"\x00"]


@pytest.mark.parametrize(
    ("sql", "dialect", "expected"),
    [
        (
            "SELECT joined + INTERVAL '29 DAY' FROM users",
            P,
            "spanner.timestamptz_add(\"joined\", '29 DAY')",
        ),
        (
            "SELECT joined - INTERVAL '1 hour 30 minutes' FROM users",
            P,
            "spanner.timestamptz_subtract(\"joined\", '1 hour 30 minutes')",
        ),
        (
            "SELECT INTERVAL '2' SECOND + joined FROM users",
            P,
            "spanner.timestamptz_add(\"joined\", '2 SECOND')",
        ),
        (
            "SELECT TIMESTAMP_ADD(Joined, INTERVAL 3 SECOND) FROM Users",
            G,
            "spanner.timestamptz_add(\"joined\", '3 SECOND')",
        ),
        (
            "SELECT TIMESTAMP_SUB(Joined, INTERVAL @n MINUTE) FROM Users",
            G,
            "spanner.timestamptz_subtract(\"joined\", CAST(? AS TEXT) || ' MINUTE')",
        ),
        ("SELECT GENERATE_UUID()", G, "CAST(spanner.generate_uuid() AS TEXT)"),
        ("SELECT gen_random_uuid()", P, "CAST(spanner.generate_uuid() AS TEXT)"),
        ("SELECT FARM_FINGERPRINT('x')", G, "spanner.farm_fingerprint('x')"),
        ("SELECT IFNULL(UserName, 'x') FROM Users", G, "COALESCE(\"username\", 'x')"),
        ("SELECT JSON_VALUE(Profile, '$.a.b') FROM Users", G, "\"profile\" -> 'a' ->> 'b'"),
        ("SELECT JSON_QUERY(Profile, '$.list[1]') FROM Users", G, "\"profile\" -> 'list' -> 1"),
        ("SELECT profile -> 'a' ->> 'b' FROM users", P, "\"profile\" -> 'a' ->> 'b'"),
        ("SELECT concat('a', username) FROM users", P, "concat(CAST('a' AS TEXT), \"username\")"),
    ],
)
def test_what_spanners_postgresql_dialect_spells_differently(
    sql: str, dialect: Dialect, expected: str
) -> None:
    assert expected in query(sql, dialect, {"n": 5}).sql


def test_no_interval_type_is_left_for_spanner() -> None:
    for sql in ("SELECT now() + INTERVAL '1 DAY'", "SELECT CURRENT_TIMESTAMP - INTERVAL '2 hour'"):
        assert "INTERVAL" not in query(sql).sql


def test_the_jsonb_question_mark_operators_are_refused_as_spanner_lacks_them() -> None:
    with pytest.raises(InvalidArgument, match=r"not supported on Cloud Spanner \(PostgreSQL"):
        query("SELECT profile ? 'a' FROM users")


def test_googlesql_spanner_generates_uuids_with_its_own_function() -> None:
    assert query("SELECT GENERATE_UUID()", G, engine="spanner").sql == (
        "SELECT CAST(GENERATE_UUID() AS STRING)"
    )
    assert query("SELECT GENERATE_UUID()", G, engine="postgres").sql == (
        "SELECT CAST(GEN_RANDOM_UUID() AS TEXT)"
    )


@pytest.mark.parametrize("engine", ["sqlite", "postgres", "spanner", TARGET])
@pytest.mark.parametrize("dialect", [G, P])
def test_an_empty_information_schema_view_needs_no_where_without_from(
    engine: str, dialect: Dialect
) -> None:
    statement = parse_sql("SELECT table_name FROM information_schema.tables", dialect)
    result = statement.plan({}, engine, catalog=({}, {}))
    assert isinstance(result, QueryPlan)
    assert "AS _txq_empty WHERE FALSE" in result.sql.replace('"', "").replace("`", "")
    assert "SELECT NULL" not in result.sql  # typed NULLs: Spanner reads a bare one as INT64


# ---- ASSERT_ROWS_MODIFIED -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "params", "check"),
    [
        (
            "DELETE FROM usertasks WHERE userid = $1 ASSERT_ROWS_MODIFIED 1",
            [4],
            RowCheck(1, sql='SELECT COUNT(*) FROM "usertasks" WHERE "userid" = ?', params=[4]),
        ),
        (
            "UPDATE users SET username = $2 WHERE userid = $1 ASSERT_ROWS_MODIFIED $3",
            [4, "x", 2],
            RowCheck(2, sql='SELECT COUNT(*) FROM "users" WHERE "userid" = ?', params=[4]),
        ),
        (
            "INSERT INTO users (userid) VALUES (1), ($1) ASSERT_ROWS_MODIFIED 2",
            [2],
            RowCheck(2, rows=2),
        ),
        (
            "INSERT INTO users (userid) SELECT userid + 9 FROM users ASSERT_ROWS_MODIFIED 1",
            None,
            RowCheck(
                1,
                sql='SELECT COUNT(*) FROM (SELECT "userid" + 9 FROM "users") AS "_txq_counted"',
                params=[],
            ),
        ),
    ],
)
def test_assert_rows_modified_is_counted_first_where_spanner_cannot_check_it(
    sql: str, params: Any, check: RowCheck
) -> None:
    result = dml(sql, P, params)
    assert (result.check, result.expected_rows) == (check, None)
    for engine in ("sqlite", "postgres", "spanner"):  # the driver checks it there
        other = dml(sql, P, params, engine=engine)
        assert (other.check, other.expected_rows) == (None, check.expected)


def test_assert_rows_modified_with_on_conflict_is_refused_where_it_cannot_be_counted() -> None:
    with pytest.raises(InvalidArgument, match="ON CONFLICT"):
        dml("INSERT INTO users (userid) VALUES (1) ON CONFLICT DO NOTHING ASSERT_ROWS_MODIFIED 1")


@pytest.fixture(params=["sync", "async"])
def counting_db(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Any]:
    """Runs a transaction function (an ``async def`` taking ``run``, which awaits a
    transaction's execute_update on either face) on a SQLite database in the PostgreSQL
    dialect whose driver's SQL target has neither an ASSERT_ROWS_MODIFIED clause nor
    savepoints, as Spanner's PostgreSQL dialect: the face counts the rows itself."""
    url = f"sqlite:///{tmp_path}/count.db"
    reader = txqueue.connect(url, dialect="postgresql")
    reader.update_ddl(
        [
            "CREATE TABLE users (userid bigint NOT NULL, username varchar, PRIMARY KEY (userid))",
            "CREATE TABLE notes (noteid bigint NOT NULL, PRIMARY KEY (noteid))",
        ]
    )
    if request.param == "sync":
        db = txqueue.connect(url)
        db._driver.sql_engine = TARGET

        def run_sync(work: Any) -> Any:
            return db.run_in_transaction(
                lambda txn: asyncio.run(work(lambda *a: _ready(txn.execute_update(*a))))
            )

        yield run_sync, reader
        db.close()
    else:
        loop = asyncio.new_event_loop()
        adb = loop.run_until_complete(txqueue.connect_async(url))
        adb._driver.sql_engine = TARGET

        def run_async(work: Any) -> Any:
            async def body(txn: Any) -> Any:
                return await work(txn.execute_update)

            return loop.run_until_complete(adb.run_in_transaction(body))

        yield run_async, reader
        loop.run_until_complete(adb.close())
        loop.close()
    reader.close()


async def _ready(value: Any) -> Any:
    return value


async def _work(execute_update: Any) -> int:
    await execute_update("INSERT INTO users (userid, username) VALUES (1, 'a'), (2, 'b')")
    await execute_update("UPDATE users SET username = 'renamed' WHERE userid = 1")
    with pytest.raises(OutOfRange, match=r"ASSERT_ROWS_MODIFIED 1 failed: 2 row"):
        await execute_update(
            "UPDATE users SET username = 'x' WHERE userid > $1 ASSERT_ROWS_MODIFIED 1", [0]
        )
    with pytest.raises(OutOfRange, match=r"ASSERT_ROWS_MODIFIED 3 failed: 1 row"):
        await execute_update("INSERT INTO notes (noteid) VALUES (9) ASSERT_ROWS_MODIFIED 3")
    await execute_update("INSERT INTO notes (noteid) VALUES (5) ASSERT_ROWS_MODIFIED 1")
    return int(await execute_update("DELETE FROM users WHERE userid = 3 ASSERT_ROWS_MODIFIED 0"))


def test_a_counted_mismatch_fails_without_effect_and_keeps_the_transaction(
    counting_db: Any,
) -> None:
    run, reader = counting_db
    assert run(_work) == 0
    with reader.snapshot() as snapshot:
        users = [tuple(r) for r in snapshot.execute_sql("SELECT userid, username FROM users")]
        notes = [tuple(r) for r in snapshot.execute_sql("SELECT noteid FROM notes")]
    assert users == [(1, "renamed"), (2, "b")]  # the failed UPDATE changed nothing
    assert notes == [(5,)]  # the failed INSERT wrote nothing; the transaction went on
