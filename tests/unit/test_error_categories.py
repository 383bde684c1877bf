"""Errors of the right category for inputs the engines refuse: names an engine reserves,
values too big for SQLite, and Spanner's special FLOAT64 strings in a CAST."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import txqueue
from txqueue.drivers.sqlite import engine
from txqueue.errors import InvalidArgument

COMBINATIONS = [
    pytest.param(("sqlite", "googlesql"), id="sqlite-googlesql"),
    pytest.param(("sqlite", "postgresql"), id="sqlite-postgresql"),
    pytest.param(("postgres", "googlesql"), id="postgres-googlesql", marks=pytest.mark.postgres),
    pytest.param(("postgres", "postgresql"), id="postgres-postgresql", marks=pytest.mark.postgres),
]
#: The prefix each engine keeps for its own objects.
RESERVED = {"sqlite": "sqlite_", "postgres": "pg_"}


@pytest.fixture(params=COMBINATIONS)
def db(request: pytest.FixtureRequest) -> Iterator[tuple[txqueue.Database, str, str]]:
    engine_name, dialect = request.param
    url = request.getfixturevalue("sqlite_url" if engine_name == "sqlite" else "pg_database_url")
    database = txqueue.connect(str(url), dialect=dialect)
    try:
        yield database, engine_name, dialect
    finally:
        database.close()


def _table(name: str, dialect: str) -> str:
    if dialect == "googlesql":
        return f"CREATE TABLE {name} (Id INT64 NOT NULL, Note STRING(MAX)) PRIMARY KEY (Id)"
    return f"CREATE TABLE {name} (id bigint NOT NULL, note varchar, PRIMARY KEY (id))"


@pytest.mark.parametrize("suffix", ["master", "Things"])
def test_a_table_named_with_the_engines_reserved_prefix_is_refused(
    db: tuple[txqueue.Database, str, str], suffix: str
) -> None:
    database, engine_name, dialect = db
    prefix = RESERVED[engine_name]
    name = f"{prefix.upper()}Things" if suffix == "Things" else f"{prefix}master"
    with pytest.raises(InvalidArgument) as raised:
        database.update_ddl([_table(name, dialect)])
    shown = name if dialect == "googlesql" else name.lower()  # unquoted: folded
    assert shown in str(raised.value) and prefix in str(raised.value)
    assert database.queues() == []
    with pytest.raises(txqueue.errors.TxqueueError):
        database.table(name)


def test_an_index_named_with_the_engines_reserved_prefix_is_refused(
    db: tuple[txqueue.Database, str, str],
) -> None:
    database, engine_name, dialect = db
    prefix = RESERVED[engine_name]
    database.update_ddl([_table("Notes", dialect)])
    column = "Note" if dialect == "googlesql" else "note"
    with pytest.raises(InvalidArgument) as raised:
        database.update_ddl([f"CREATE INDEX {prefix}by_note ON Notes ({column})"])
    assert f"{prefix}by_note" in str(raised.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("nan", math.nan), ("NaN", math.nan), ("inf", math.inf), ("-Infinity", -math.inf)],
)
def test_a_cast_of_nan_or_infinity_to_float64_gives_that_value(
    db: tuple[txqueue.Database, str, str], text: str, expected: float
) -> None:
    database, _, dialect = db
    target = "FLOAT64" if dialect == "googlesql" else "float8"
    with database.snapshot() as snapshot:
        [row] = snapshot.execute_sql(f"SELECT CAST('{text}' AS {target}) AS value").rows
    value = row[0]
    assert isinstance(value, float)
    if math.isnan(expected):
        assert math.isnan(value)
    else:
        assert value == expected


def test_nan_inside_an_expression_is_refused_on_sqlite(sqlite_url: str) -> None:
    """SQLite has no NaN value: a NaN can be a selected column, but arithmetic or a
    comparison on it would silently give a wrong answer, so those are refused."""
    database = txqueue.connect(sqlite_url)
    try:
        with database.snapshot() as snapshot:
            [row] = snapshot.execute_sql("SELECT CAST('NaN' AS FLOAT64)").rows
            assert math.isnan(row[0])
            for sql in (
                "SELECT CAST('nan' AS FLOAT64) + 1",
                "SELECT 1 WHERE CAST('nan' AS FLOAT64) = 0",
                "SELECT x FROM (SELECT CAST('nan' AS FLOAT64) AS x)",
            ):
                with pytest.raises(InvalidArgument, match="no NaN"):
                    snapshot.execute_sql(sql)
    finally:
        database.close()


def test_a_value_too_big_for_sqlite_is_invalid_argument(tmp_path: Path) -> None:
    """SQLITE_TOOBIG (a string or blob over SQLite's 1 GiB limit, lowered here so the test
    needs no gigabyte) is the caller's input, not an unavailable database."""
    connection = sqlite3.connect(tmp_path / "big.db", isolation_level=None)
    try:
        connection.execute("CREATE TABLE t (value BLOB)")
        connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 1000)
        with pytest.raises(InvalidArgument, match="too big"):
            engine.execute_update(connection, "INSERT INTO t VALUES (?)", (b"x" * 2000,))
        assert connection.execute("SELECT count(*) FROM t").fetchone() == (0,)
    finally:
        connection.close()


def test_sqlites_reserved_name_error_is_invalid_argument(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "names.db", isolation_level=None)
    try:
        with pytest.raises(InvalidArgument, match="reserved"):
            engine.execute_update(connection, "CREATE TABLE sqlite_things (x)", None)
    finally:
        connection.close()
