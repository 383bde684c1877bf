"""Spanner SQL on the application's own tables: made by plain SQL through the engine's own
connection (sqlite3, psycopg), never through txqueue, and read and written with
``execute_sql`` / ``execute_update`` on both faces and with ``txqueue sql``."""

from __future__ import annotations

import asyncio
import datetime as dt
import decimal
import json
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

import txqueue
from txqueue.cli.main import main
from txqueue.errors import NotFound

SQLITE_USERS = """
CREATE TABLE users (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL, email VARCHAR(200), active BOOLEAN,
  score REAL, photo BLOB, born DATE, balance DECIMAL(10, 2), settings JSON,
  joined DATETIME
)"""
POSTGRES_USERS = """
CREATE TABLE users (
  id bigint PRIMARY KEY, name text NOT NULL, email varchar(200), active boolean,
  score double precision, photo bytea, born date, balance numeric(10, 2), settings jsonb,
  joined timestamptz
)"""
ROWS = [
    (1, "ann", "ann@example.com", True, 1.5, b"\x00\x01", "2001-02-03", "10.25", '{"a": 1}'),
    (2, "bob", None, False, 2.5, None, None, None, None),
]


def _engine_connection(url: str) -> Any:
    """The engine's own connection, as the application (or its ORM) holds one."""
    if url.startswith("sqlite:"):
        return sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    if url.startswith("postgres"):
        import psycopg

        return psycopg.connect(url, autocommit=True)
    pytest.skip("the application's tables are made with plain SQL on SQLite and PostgreSQL")


def _run(url: str, *statements: str, params: Any = None) -> None:
    connection = _engine_connection(url)
    try:
        for statement in statements:
            if url.startswith("sqlite:"):
                statement = statement.replace("%s", "?")
            connection.execute(statement, params or ())
    finally:
        connection.close()


@pytest.fixture
def url(database_url: str) -> Iterator[str]:
    """A database with a queue made by txqueue and a ``users`` table made by plain SQL."""
    with txqueue.connect(database_url) as db:
        if db.dialect == "postgresql":
            db.update_ddl(
                "CREATE QUEUE mail (id bigint NOT NULL, payload text NOT NULL, PRIMARY KEY (id))"
            )
        else:
            db.update_ddl(
                "CREATE QUEUE mail (id INT64 NOT NULL, payload STRING(MAX) NOT NULL) "
                "PRIMARY KEY (id)"
            )
    postgres = not database_url.startswith("sqlite:")
    _run(database_url, POSTGRES_USERS if postgres else SQLITE_USERS)
    insert = (
        "INSERT INTO users (id, name, email, active, score, photo, born, balance, settings) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
    )
    for row in ROWS:
        values = list(row)
        if not postgres:
            values[3] = None if row[3] is None else int(row[3])
        _run(database_url, insert, params=values)
    yield database_url


def test_select_with_where_and_parameters_gives_typed_values(url: str) -> None:
    with txqueue.connect(url) as db, db.snapshot() as snapshot:
        sql = "SELECT * FROM users WHERE score > @least ORDER BY id"
        params: Any = {"least": 1.0}
        if db.dialect == "postgresql":
            sql, params = sql.replace("@least", "$1"), {"p1": 1.0}
        result = snapshot.execute_sql(sql, params)
        rows = list(result)
    assert list(result.fields) == [
        "id",
        "name",
        "email",
        "active",
        "score",
        "photo",
        "born",
        "balance",
        "settings",
        "joined",
    ]
    assert rows[0] == (
        1,
        "ann",
        "ann@example.com",
        True,
        1.5,
        b"\x00\x01",
        dt.date(2001, 2, 3),
        decimal.Decimal("10.25"),
        {"a": 1},
        None,
    )
    assert rows[1][:5] == (2, "bob", None, False, 2.5)


def test_insert_update_delete_through_execute_update(url: str) -> None:
    with txqueue.connect(url) as db:

        def write(txn: txqueue.Transaction) -> list[int]:
            return [
                txn.execute_update("INSERT INTO users (id, name, active) VALUES (3, 'cy', true)"),
                txn.execute_update("UPDATE users SET name = 'bo' WHERE id = 2"),
                txn.execute_update("DELETE FROM users WHERE id = 1"),
            ]

        assert db.run_in_transaction(write) == [1, 1, 1]
        with db.snapshot() as snapshot:
            rows = list(snapshot.execute_sql("SELECT id, name, active FROM users ORDER BY id"))
    assert rows == [(2, "bo", False), (3, "cy", True)]
    connection = _engine_connection(url)  # written for the application to read as its own
    try:
        stored = connection.execute("SELECT id, name FROM users ORDER BY id").fetchall()
    finally:
        connection.close()
    assert [tuple(row) for row in stored] == [(2, "bo"), (3, "cy")]


def test_a_join_with_a_queue_table(url: str) -> None:
    with txqueue.connect(url) as db:
        db.run_in_transaction(
            lambda txn: txn.execute_update(
                "INSERT INTO mail (id, payload) VALUES (1, 'welcome'), (2, 'bye')"
            )
        )
        with db.snapshot() as snapshot:
            rows = list(
                snapshot.execute_sql(
                    "SELECT u.name, m.payload FROM users AS u JOIN mail AS m ON m.id = u.id "
                    "ORDER BY u.id"
                )
            )
    assert rows == [("ann", "welcome"), ("bob", "bye")]


def test_a_table_created_after_connect_is_seen(url: str) -> None:
    with txqueue.connect(url) as db:
        with pytest.raises(NotFound, match="later"), db.snapshot() as snapshot:
            snapshot.execute_sql("SELECT * FROM later")
        _run(url, "CREATE TABLE later (id integer PRIMARY KEY, note text)")
        _run(url, "INSERT INTO later (id, note) VALUES (1, 'now')")
        with db.snapshot() as snapshot:
            assert list(snapshot.execute_sql("SELECT note FROM later")) == [("now",)]
        assert db.table("later").primary_key == ("id",)


def test_information_schema_lists_the_application_tables(url: str) -> None:
    with txqueue.connect(url) as db, db.snapshot() as snapshot:
        tables = list(
            snapshot.execute_sql(
                "SELECT TABLE_NAME, TABLE_TYPE FROM INFORMATION_SCHEMA.TABLES ORDER BY TABLE_NAME"
            )
        )
        columns = list(
            snapshot.execute_sql(
                "SELECT COLUMN_NAME, SPANNER_TYPE FROM INFORMATION_SCHEMA.COLUMNS "
                "WHERE TABLE_NAME = 'users' ORDER BY ORDINAL_POSITION"
            )
        )
    assert [(name.lower(), kind.lower()) for name, kind in tables] == [
        ("mail", "queue"),
        ("users", "base table"),
    ]
    types = dict(columns)
    if db.dialect == "postgresql":
        assert (types["id"], types["settings"], types["joined"]) == (
            "bigint",
            "jsonb",
            "timestamp with time zone",
        )
    else:
        # SQLite: DATETIME holds the application's text, so it reads as STRING.
        assert (types["id"], types["settings"], types["joined"]) == (
            "INT64",
            "JSON",
            "STRING(MAX)",
        )


def test_mixed_case_names_keep_their_case_where_the_engine_folds_them(url: str) -> None:
    """Prisma-style names: a quoted table "Account" with a column "createdBy"."""
    _run(url, 'CREATE TABLE "Account" (id integer PRIMARY KEY, "createdBy" text)')
    with txqueue.connect(url) as db:
        db.run_in_transaction(
            lambda txn: txn.execute_update("INSERT INTO Account (id, createdBy) VALUES (1, 'ann')")
        )
        db.run_in_transaction(
            lambda txn: txn.execute_update(
                "UPDATE account SET createdby = 'bob' WHERE Account.id = 1"
            )
        )
        with db.snapshot() as snapshot:
            star = snapshot.execute_sql("SELECT * FROM (SELECT * FROM Account) AS a")
            assert (list(star.fields), list(star)) == (["id", "createdBy"], [(1, "bob")])
            named = list(
                snapshot.execute_sql("SELECT a.createdBy FROM Account AS a WHERE createdBy = 'bob'")
            )
            assert named == [("bob",)]
        db.run_in_transaction(
            lambda txn: txn.execute_update("DELETE FROM ACCOUNT WHERE createdBy = 'bob'")
        )
        with db.snapshot() as snapshot:
            assert list(snapshot.execute_sql("SELECT COUNT(*) FROM Account")) == [(0,)]


def test_the_asyncio_face_reads_and_writes_them(url: str) -> None:
    async def work() -> list[tuple[Any, ...]]:
        db = await txqueue.connect_async(url)
        try:

            async def write(txn: txqueue.AsyncTransaction) -> int:
                return await txn.execute_update("UPDATE users SET score = 9.5 WHERE id = 2")

            assert await db.run_in_transaction(write) == 1
            async with db.snapshot() as snapshot:
                result = await snapshot.execute_sql("SELECT name, score FROM users WHERE id = 2")
                return list(result)
        finally:
            await db.close()

    assert asyncio.run(work()) == [("bob", 9.5)]


# ---- txqueue sql -------------------------------------------------------------------------------


def _cli(*args: str, stdin: str | None = None) -> str:
    result = CliRunner().invoke(main, list(args), input=stdin)
    assert result.exit_code == 0, result.output
    return result.output


def test_txqueue_sql_lists_describes_and_queries_them(url: str) -> None:
    listed = [
        json.loads(line)
        for line in _cli("sql", "--database", url, "--format", "json", "\\d").splitlines()
    ]
    by_name = {record["name"].lower(): record for record in listed}
    assert by_name["users"]["created_by_txqueue"] is False
    assert by_name["mail"]["created_by_txqueue"] is True
    table = _cli("sql", "--database", url, "\\d")
    assert "not created by txqueue" in table

    described = [
        json.loads(line)
        for line in _cli("sql", "--database", url, "--format", "json", "\\d users").splitlines()
    ]
    columns = {record["column"]: record for record in described}
    assert columns["id"]["key"] == 1
    assert columns["name"]["nullable"] is False
    if url.startswith("sqlite:"):
        assert (columns["joined"]["type"], columns["joined"]["engine_type"]) == (
            "STRING(MAX)",
            "DATETIME",
        )
    else:
        assert (columns["email"]["type"], columns["email"]["engine_type"]) == (
            "character varying(200)",
            "character varying(200)",
        )
    assert "engine's catalog" in _cli("sql", "--database", url, "\\d users")

    output = _cli(
        "sql", "--database", url, "--format", "json", "SELECT name FROM users WHERE id = 2"
    )
    assert json.loads(output) == {"name": "bob"}


def test_help_prints_lines_not_escapes(url: str) -> None:
    output = _cli("sql", "--database", url, stdin="help\n")
    assert "\\n" not in output
    assert "\n  \\d NAME" in output


def test_a_decimal_column_reads_as_its_decimal_value(url: str) -> None:
    """SQLite stores a DECIMAL column's value as REAL: 0.1 must not read as its binary value."""
    _run(url, "UPDATE users SET balance = 0.1 WHERE id = 2")
    with txqueue.connect(url) as db, db.snapshot() as snapshot:
        rows = list(snapshot.execute_sql("SELECT balance FROM users WHERE id = 2"))
    assert rows == [(decimal.Decimal("0.1"),)]
