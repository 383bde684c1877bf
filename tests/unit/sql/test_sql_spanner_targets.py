"""The translator's Cloud Spanner targets without a database: GoogleSQL (``spanner``) and
Spanner's PostgreSQL dialect (``spanner_postgresql``, a driver's ``sql_engine``).

The statements run on the emulator in ``tests/spanner/test_postgresql_sql.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from sql_catalog import plan

from txqueue.core.schema import Dialect
from txqueue.drivers import engines
from txqueue.drivers.spanner.assertion import RowCount, rows_modified
from txqueue.drivers.spanner.spelling import POSTGRESQL, bind
from txqueue.errors import InvalidArgument
from txqueue.sql import DmlPlan, QueryPlan, parse_sql

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
    ("sql", "params", "count"),
    [
        (
            "DELETE FROM usertasks WHERE userid = $1 ASSERT_ROWS_MODIFIED 1",
            [4],
            RowCount(sql='SELECT COUNT(*) FROM "usertasks" WHERE "userid" = $1'),
        ),
        (
            "UPDATE users SET username = $2 WHERE userid = $1 ASSERT_ROWS_MODIFIED $3",
            [4, "x", 2],
            RowCount(sql='SELECT COUNT(*) FROM "users" WHERE "userid" = $2'),
        ),
        ("INSERT INTO users (userid) VALUES (1), ($1) ASSERT_ROWS_MODIFIED 2", [2], RowCount(2)),
        (
            "INSERT INTO users (userid) SELECT userid + 9 FROM users ASSERT_ROWS_MODIFIED 1",
            None,
            RowCount(
                sql='SELECT COUNT(*) FROM (SELECT "userid" + 9 FROM "users") AS txqueue_counted'
            ),
        ),
    ],
)
def test_assert_rows_modified_reaches_the_driver_which_counts_first_on_spanner_postgresql(
    sql: str, params: Any, count: RowCount
) -> None:
    """Spanner's PostgreSQL dialect has no ASSERT_ROWS_MODIFIED and Spanner no savepoints:
    the front end hands the expected count to the driver as on every engine, and the driver
    counts the rows of the statement it gets (its ``?`` markers numbered) before running it."""
    result = dml(sql, P, params)
    assert result.expected_rows is not None
    numbered, _, _ = bind(POSTGRESQL, _named(result.sql), {}, None)
    assert rows_modified(numbered) == count
    for engine in ("sqlite", "postgres", "spanner"):
        assert dml(sql, P, params, engine=engine).expected_rows == result.expected_rows


def _named(sql: str) -> str:
    """The target's ``?`` markers as the driver names them (``@p1`` …) before numbering."""
    parts = sql.split("?")
    return "".join(f"{part}@p{index}" for index, part in enumerate(parts[:-1], 1)) + parts[-1]


@pytest.mark.parametrize(
    "sql",
    [
        'INSERT INTO "t" ("a") VALUES (1) ON CONFLICT DO NOTHING',
        'UPDATE "t" SET "a" = 1 FROM "u" WHERE "t"."id" = "u"."id"',
        'DELETE FROM "t" USING "u" WHERE "t"."id" = "u"."id"',
        "SELECT 1",
    ],
)
def test_what_cannot_be_counted_first_is_not_counted(sql: str) -> None:
    assert rows_modified(sql) is None
