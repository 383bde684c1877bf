"""Declared lengths hold on every write path (issue #40, item 1), as on Spanner.

STRING(n) counts Unicode characters and BYTES(n) counts bytes. The database itself enforces
them (a CHECK constraint in the generated DDL), so SQL INSERT and UPDATE, DML with
parameters, mutations and plain SQL from the application's own sqlite3/psycopg connection
are all refused. Through txqueue the refusal is an InvalidArgument naming the column and its
declared type.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from spannerfixtures import SpannerAppTransaction

import txqueue
from txqueue.errors import InvalidArgument

from .support import Face, asked_dialect, dialect_name, is_postgres, is_spanner

DDL = {
    "googlesql": [
        "CREATE TABLE Notes (Id INT64 NOT NULL, Code STRING(3), Tag BYTES(2)) PRIMARY KEY (Id)",
        "CREATE QUEUE Q1 (Id INT64 NOT NULL, Payload BYTES(1) NOT NULL) PRIMARY KEY (Id)",
        "CREATE QUEUE Q2 (Id STRING(4) NOT NULL, Payload STRING(2) NOT NULL) PRIMARY KEY (Id)",
    ],
    # A PostgreSQL-dialect Spanner database: bytea has no length there, so only the strings'
    # lengths are tested; unquoted names fold to lower case.
    "postgresql": [
        "CREATE TABLE notes (id bigint NOT NULL, code varchar(3), tag bytea, PRIMARY KEY (id))",
        "CREATE QUEUE q1 (id bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))",
        "CREATE QUEUE q2 (id varchar(4) NOT NULL, payload varchar(2) NOT NULL, PRIMARY KEY (id))",
    ],
}


@pytest.fixture
def db(face: Face, database_url: str) -> Iterator[txqueue.Database]:
    with face.connect(database_url, dialect=asked_dialect(database_url, "googlesql")) as database:
        database.update_ddl(DDL[dialect_name(database.dialect)])
        yield database


def _googlesql(db: txqueue.Database) -> bool:
    return dialect_name(db.dialect) == "googlesql"


def _refusal(db: txqueue.Database, named: str) -> str:
    """A pattern for an error naming ``named`` ("Code STRING(3)"), in the schema's spelling."""
    pattern = re.escape(named)
    return pattern if _googlesql(db) else f"(?i){pattern}"


def _update(db: txqueue.Database, sql: str, params: Any = None) -> int:
    def run(transaction: txqueue.Transaction) -> int:
        return transaction.execute_update(sql, params=params)

    return db.run_in_transaction(run)


def _count(db: txqueue.Database, table: str) -> int:
    with db.snapshot() as snapshot:
        return int(next(iter(snapshot.execute_sql(f"SELECT COUNT(*) FROM {table}")))[0])


@pytest.mark.parametrize(
    ("sql", "named"),
    [
        ("INSERT INTO Q1 (Id, Payload) VALUES (1, b'toolong')", "Payload BYTES(1)"),
        ("INSERT INTO Q2 (Id, Payload) VALUES ('a', 'abc')", "Payload STRING(2)"),
        ("INSERT INTO Q2 (Id, Payload) VALUES ('abcde', 'a')", "Id STRING(4)"),
        ("INSERT INTO Notes (Id, Code) VALUES (1, 'abcd')", "Code STRING(3)"),
        ("INSERT INTO Notes (Id, Tag) VALUES (1, b'abc')", "Tag BYTES(2)"),
    ],
)
def test_sql_insert_over_the_declared_length_is_refused(
    db: txqueue.Database, sql: str, named: str
) -> None:
    table = sql.split()[2]
    if not _googlesql(db) and "BYTES" in named:
        # bytea declares no length in this dialect: the same bytes are taken whole
        column = named.split()[0]
        value = re.search(r"b'(\w*)'", sql)
        assert value is not None
        _update(db, f"INSERT INTO {table} (id, {column}) VALUES (1, CAST('{value[1]}' AS bytea))")
        assert _count(db, table) == 1
        return
    with pytest.raises(InvalidArgument, match=_refusal(db, named)):
        _update(db, sql)
    assert _count(db, table) == 0


def test_sql_update_and_parameters_over_the_declared_length_are_refused(
    db: txqueue.Database,
) -> None:
    if not _googlesql(db):
        _update(db, "INSERT INTO notes (id, code) VALUES (1, 'abc')")
        with pytest.raises(InvalidArgument, match=_refusal(db, "Code STRING(3)")):
            _update(db, "UPDATE notes SET code = 'abcd' WHERE id = 1")
        with pytest.raises(InvalidArgument, match=_refusal(db, "Code STRING(3)")):
            _update(db, "UPDATE notes SET code = $1 WHERE id = $2", ["abcd", 1])
        with pytest.raises(InvalidArgument, match=_refusal(db, "Payload STRING(2)")):
            _update(db, "INSERT INTO q2 (id, payload) VALUES ($1, $2)", ["b", "xyz"])
        with db.snapshot() as snapshot:
            rows = [tuple(r) for r in snapshot.execute_sql("SELECT id, code FROM notes")]
        assert rows == [(1, "abc")]
        return
    _update(db, "INSERT INTO Notes (Id, Code, Tag) VALUES (1, 'abc', b'ab')")
    with pytest.raises(InvalidArgument, match=r"Code STRING\(3\)"):
        _update(db, "UPDATE Notes SET Code = 'abcd' WHERE Id = 1")
    with pytest.raises(InvalidArgument, match=r"Tag BYTES\(2\)"):
        _update(db, "UPDATE Notes SET Tag = @tag WHERE Id = @id", {"id": 1, "tag": b"abc"})
    with pytest.raises(InvalidArgument, match=r"Payload BYTES\(1\)"):
        _update(db, "INSERT INTO Q1 (Id, Payload) VALUES (@id, @p)", {"id": 2, "p": b"xy"})
    with db.snapshot() as snapshot:
        rows = [tuple(r) for r in snapshot.execute_sql("SELECT Id, Code, Tag FROM Notes")]
    assert rows == [(1, "abc", b"ab")]


def test_strings_count_characters_and_bytes_count_bytes(db: txqueue.Database) -> None:
    # Three characters of two UTF-8 bytes each fit STRING(3); two bytes fit BYTES(2).
    if _googlesql(db):
        _update(db, "INSERT INTO Notes (Id, Code, Tag) VALUES (1, 'äöü', b'\\xff\\xfe')")
    else:
        _update(db, "INSERT INTO notes (id, code) VALUES (1, 'äöü')")
    _update(db, "INSERT INTO Q2 (Id, Payload) VALUES ('ßßßß', '€€')")
    with pytest.raises(InvalidArgument, match=_refusal(db, "Payload STRING(2)")):
        _update(db, "INSERT INTO Q2 (Id, Payload) VALUES ('b', '€€€')")
    assert _count(db, "Notes") == 1
    assert _count(db, "Q2") == 1


def test_mutations_over_the_declared_length_are_refused(db: txqueue.Database) -> None:
    if not _googlesql(db):
        with pytest.raises(InvalidArgument, match=r"longer than STRING\(2\)"), db.batch() as batch:
            batch.send("q2", ("a",), "abc")
        with pytest.raises(InvalidArgument, match=r"longer than STRING\(3\)"), db.batch() as batch:
            batch.insert("notes", ("id", "code"), [(1, "abcd")])
        assert _count(db, "q2") == 0
        assert _count(db, "notes") == 0
        return
    with pytest.raises(InvalidArgument, match=r"longer than BYTES\(1\)"), db.batch() as batch:
        batch.send("Q1", (2,), b"toolong")
    with pytest.raises(InvalidArgument, match=r"longer than STRING\(3\)"), db.batch() as batch:
        batch.insert("Notes", ("Id", "Code"), [(1, "abcd")])
    assert _count(db, "Q1") == 0
    assert _count(db, "Notes") == 0


def test_the_applications_own_connection_is_refused_too(
    db: txqueue.Database, database_url: str
) -> None:
    """The constraint is in the table: a write from outside txqueue is refused as well."""
    if is_spanner(database_url):  # Spanner's own column sizes, in Spanner's words
        from google.api_core.exceptions import GoogleAPICallError

        connection = SpannerAppTransaction(database_url)
        try:
            if _googlesql(db):
                with pytest.raises(GoogleAPICallError, match=r"Q1\.Payload, size: 7, limit: 1\b"):
                    connection.execute(
                        "INSERT INTO Q1 (Id, Payload) VALUES (1, :p)", {"p": b"toolong"}
                    )
                connection.rollback()
            with pytest.raises(GoogleAPICallError, match=r"(?i)Notes\.Code, size: 4, limit: 3\b"):
                connection.execute("INSERT INTO Notes (Id, Code) VALUES (1, 'abcd')", {})
        finally:
            connection.close()
    elif is_postgres(database_url):
        import psycopg

        with psycopg.connect(database_url) as connection:
            with pytest.raises(psycopg.errors.CheckViolation, match=r"Payload BYTES\(1\)"):
                connection.execute("INSERT INTO q1 (id, payload) VALUES (1, %s)", (b"toolong",))
            connection.rollback()
            with pytest.raises(psycopg.errors.CheckViolation, match=r"Code STRING\(3\)"):
                connection.execute("INSERT INTO notes (id, code) VALUES (1, 'abcd')")
    else:
        path = database_url[len("sqlite:///") :]
        connection = sqlite3.connect(path)
        try:
            with pytest.raises(sqlite3.IntegrityError, match=r"Payload BYTES\(1\)"):
                connection.execute("INSERT INTO Q1 (Id, Payload) VALUES (1, ?)", (b"toolong",))
            with pytest.raises(sqlite3.IntegrityError, match=r"Code STRING\(3\)"):
                connection.execute("INSERT INTO Notes (Id, Code) VALUES (1, 'abcd')")
            # Text stored in a BYTES column is measured in bytes, as Spanner would store it.
            with pytest.raises(sqlite3.IntegrityError, match=r"Tag BYTES\(2\)"):
                connection.execute("INSERT INTO Notes (Id, Tag) VALUES (2, 'éé')")
        finally:
            connection.close()
    assert _count(db, "Q1") == 0
    assert _count(db, "Notes") == 0


def test_the_postgresql_dialect_varchar_length_names_the_column(
    face: Face, database_url: str
) -> None:
    if is_spanner(database_url):
        with face.connect(database_url) as db:
            recorded = dialect_name(db.dialect)
        if recorded == "googlesql":  # PostgreSQL is refused at connect
            with pytest.raises(InvalidArgument, match="fixed when the database was created"):
                face.connect(database_url, dialect="postgresql")
            return
    with face.connect(database_url, dialect="postgresql") as db:
        db.update_ddl(
            [
                "CREATE QUEUE tasks (id varchar(4) NOT NULL, payload varchar(2) NOT NULL,"
                " PRIMARY KEY (id))"
            ]
        )
        with pytest.raises(InvalidArgument, match=r"payload STRING\(2\)"):
            _update(db, "INSERT INTO tasks (id, payload) VALUES ('a', 'abc')")
        _update(db, "INSERT INTO tasks (id, payload) VALUES ('äöüß', 'éé')")
        assert _count(db, "tasks") == 1


def test_long_column_names_keep_distinct_constraints(face: Face, database_url: str) -> None:
    """Two 63-byte column names alike but for their last character: PostgreSQL keeps names
    of at most 63 bytes, so each constraint's name is shortened with a digest of the whole."""
    first, second = "A" * 62 + "1", "A" * 62 + "2"
    with face.connect(database_url, dialect=asked_dialect(database_url, "googlesql")) as db:
        if _googlesql(db):
            table, key, bytes_of = "Wide", "Id", lambda text: f"b'{text}'"
            ddl = f"CREATE TABLE Wide (Id INT64 NOT NULL, {first} STRING(1), {second} BYTES(2))"
            ddl += " PRIMARY KEY (Id)"
            second_type = r"BYTES\(2\)"
        else:  # a PostgreSQL-dialect Spanner database: no BYTES(n), names folded
            first, second = first.lower(), second.lower()
            table, key, bytes_of = "wide", "id", lambda text: f"'{text}'"
            ddl = f"CREATE TABLE wide (id bigint NOT NULL, {first} varchar(1),"
            ddl += f" {second} varchar(2), PRIMARY KEY (id))"
            second_type = r"STRING\(2\)"
        db.update_ddl([ddl])
        insert = f"INSERT INTO {table} ({key}, "
        _update(db, f"{insert}{first}, {second}) VALUES (1, 'é', {bytes_of('ab')})")
        with pytest.raises(InvalidArgument, match=r"STRING\(1\)"):
            _update(db, f"{insert}{first}) VALUES (2, 'ab')")
        with pytest.raises(InvalidArgument, match=second_type):
            _update(db, f"{insert}{second}) VALUES (3, {bytes_of('abc')})")
        assert _count(db, table) == 1
