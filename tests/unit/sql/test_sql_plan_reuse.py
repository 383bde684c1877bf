"""A statement's plan is kept and reused: the SQL depends on the engine, the time, the tables
read and the parameters' types, never on their values, so a later call with values of the same
types binds its own values into the kept SQL (checked as on a first call), and a call with
other types, or a plan that read the clock, is planned afresh."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from sql_catalog import plan

from txqueue.core.schema import ColumnType, Dialect
from txqueue.errors import InvalidArgument
from txqueue.sql import DmlPlan, QueryPlan

G, P = Dialect.GOOGLESQL, Dialect.POSTGRESQL
ENGINES = ["sqlite", "postgres"]


def query(sql: str, params: object, engine: str = "sqlite", dialect: Dialect = G) -> QueryPlan:
    result = plan(sql, dialect, engine, params)
    assert isinstance(result, QueryPlan)
    return result


def values(result: QueryPlan | DmlPlan) -> list[object]:
    return list(result.params.values()) if isinstance(result.params, dict) else result.params


@pytest.mark.parametrize("engine", ENGINES)
def test_a_later_call_binds_its_own_values_into_the_same_sql(engine: str) -> None:
    sql = "SELECT UserName FROM Users WHERE UserId = @id AND UserName = @name AND UserId > @id"
    first = query(sql, {"id": 1, "name": "ada"}, engine)
    second = query(sql, {"id": 2, "name": "grace"}, engine)
    assert second.sql == first.sql
    assert values(first) == [1, "ada", 1]  # the first plan's values are its own still
    assert values(second) == [2, "grace", 2]


def test_positional_dialect_parameters_are_rebound_in_order() -> None:
    sql = "SELECT username FROM users WHERE userid = $2 AND username = $1"
    assert values(query(sql, ["a", 1], dialect=P)) == [1, "a"]
    assert values(query(sql, ["b", 2], dialect=P)) == [2, "b"]
    assert values(query(sql, {"p1": "c", "p2": 3}, dialect=P)) == [3, "c"]


@pytest.mark.parametrize("engine", ENGINES)
def test_the_translators_constants_stay_beside_the_new_values(engine: str) -> None:
    sql = "SELECT b'ab', @a, TIMESTAMP '2020-01-01 00:00:00+00', @a"
    first = values(query(sql, {"a": 1}, engine))
    second = values(query(sql, {"a": 2}, engine))
    assert [first[0], first[2]] == [second[0], second[2]]  # the bytes and the timestamp
    assert [first[1], first[3], second[1], second[3]] == [1, 1, 2, 2]


def test_values_of_another_type_get_a_plan_of_their_own() -> None:
    sql = "SELECT @p"
    kinds = []
    for value in (1, "x", True, 2.5, None, [1, 2], 7):
        output = query(sql, {"p": value}).outputs
        assert output is not None
        column = output[0].column
        kinds.append(None if column is None else column.type)
    assert kinds == [
        ColumnType.INT64,
        ColumnType.STRING,
        ColumnType.BOOL,
        ColumnType.FLOAT64,
        None,
        None,
        ColumnType.INT64,
    ]


def test_every_call_checks_its_values() -> None:
    sql = "SELECT UserName FROM Users WHERE UserId = @id"
    query(sql, {"id": 1})
    with pytest.raises(InvalidArgument, match="parameter @id"):
        query(sql, {"id": 2**63})  # out of INT64's range, with a plan for INT64 kept
    typed = "SELECT @p"
    plan(typed, params={"p": 1}, param_types={"p": "INT64"})
    with pytest.raises(InvalidArgument, match="must be an int"):
        plan(typed, params={"p": "x"}, param_types={"p": "INT64"})
    with pytest.raises(InvalidArgument, match=r"no value for parameter @id"):
        query(sql, {"other": 1})
    with pytest.raises(InvalidArgument, match=r"parameter @p\[0\] is an array"):
        query(typed, {"p": [[1]]})


def test_assert_rows_modified_takes_each_calls_count() -> None:
    sql = "DELETE FROM UserTasks WHERE UserId = @id ASSERT_ROWS_MODIFIED @n"
    counts = [plan(sql, params={"id": 1, "n": n}) for n in (1, 3, 0)]
    assert [c.expected_rows for c in counts if isinstance(c, DmlPlan)] == [1, 3, 0]
    constant = "DELETE FROM UserTasks WHERE UserId = 1 ASSERT_ROWS_MODIFIED @n"
    counts = [plan(constant, params={"n": n}) for n in (2, 5)]
    assert [c.expected_rows for c in counts if isinstance(c, DmlPlan)] == [2, 5]
    with pytest.raises(InvalidArgument, match="non-negative integer"):
        plan(constant, params={"n": -1})


def test_a_pinned_time_is_part_of_the_plan_and_the_clock_is_read_on_every_call() -> None:
    sql = "SELECT CURRENT_TIMESTAMP(), @a"
    one = datetime(2030, 1, 1, tzinfo=timezone.utc)
    two = datetime(2031, 1, 1, tzinfo=timezone.utc)
    assert values(query_at(sql, {"a": 1}, one))[0] != values(query_at(sql, {"a": 1}, two))[0]
    # Unpinned, SQLite binds the clock's reading: never a kept plan's.
    earlier = values(query(sql, {"a": 1}))[0]
    later = values(query(sql, {"a": 1}))[0]
    assert isinstance(earlier, int) and isinstance(later, int) and later > earlier


def query_at(sql: str, params: object, now: datetime) -> QueryPlan:
    result = plan(sql, G, "sqlite", params, now=now)
    assert isinstance(result, QueryPlan)
    return result
