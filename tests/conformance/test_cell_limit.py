"""Spanner's cell limit on every engine (SPEC §4): a payload, column value or SQL parameter over
10 MiB (Spanner's "size of a cell") is an InvalidArgument naming the field and the limit, raised
before anything is written, so what runs here runs on Spanner. Exactly 10 MiB is accepted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import txqueue
from txqueue.errors import InvalidArgument

from .support import Face, asked_dialect, dialect_name

LIMIT = 10 * 1024 * 1024  # bytes in a cell
DDL = {
    "googlesql": [
        "CREATE TABLE Docs (Id INT64 NOT NULL, Body STRING(MAX), Blob BYTES(MAX), Doc JSON,"
        " Tags ARRAY<STRING(MAX)>) PRIMARY KEY (Id)",
        "CREATE QUEUE Jobs (Id STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)",
        "CREATE QUEUE TextJobs (Id STRING(36) NOT NULL, Payload STRING(MAX) NOT NULL)"
        " PRIMARY KEY (Id)",
        "CREATE QUEUE JsonJobs (Id STRING(36) NOT NULL, Payload JSON NOT NULL) PRIMARY KEY (Id)",
    ],
    # A PostgreSQL-dialect Spanner database (the only one this suite connects to in that
    # dialect here): unquoted names fold to lower case, which the tests' names match.
    "postgresql": [
        "CREATE TABLE docs (id bigint NOT NULL, body varchar, blob bytea, doc jsonb,"
        " tags varchar[], PRIMARY KEY (id))",
        "CREATE QUEUE jobs (id varchar(36) NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))",
        "CREATE QUEUE textjobs (id varchar(36) NOT NULL, payload varchar NOT NULL,"
        " PRIMARY KEY (id))",
        "CREATE QUEUE jsonjobs (id varchar(36) NOT NULL, payload jsonb NOT NULL, PRIMARY KEY (id))",
    ],
}
TOO_BIG = "over Spanner's cell limit of 10 MiB"


@pytest.fixture
def db(face: Face, database_url: str) -> Iterator[txqueue.Database]:
    with face.connect(database_url, dialect=asked_dialect(database_url, "googlesql")) as database:
        database.update_ddl(DDL[dialect_name(database.dialect)])
        yield database


def _rows(db: txqueue.Database) -> list[Any]:
    with db.snapshot() as snapshot:
        return [tuple(row) for row in snapshot.execute_sql("SELECT Id FROM Docs")]


def _ready(db: txqueue.Database, queue: str) -> int:
    return db.queue_info(queue).ready


@pytest.mark.parametrize(
    ("queue", "payload"),
    [
        ("Jobs", b"x" * (LIMIT + 1)),
        ("TextJobs", "x" * (LIMIT + 1)),
        ("TextJobs", "é" * (LIMIT // 2 + 1)),  # fewer characters than the limit, more bytes
        ("JsonJobs", {"text": "x" * LIMIT}),
    ],
    ids=["bytes", "ascii-text", "two-byte-text", "json"],
)
def test_a_payload_over_10_mib_is_refused_and_nothing_is_written(
    db: txqueue.Database, queue: str, payload: Any
) -> None:
    with pytest.raises(InvalidArgument, match=TOO_BIG) as caught, db.batch() as batch:
        batch.insert("Docs", ("Id", "Body"), [(1, "written with the send")])
        batch.send(queue, ("m-1",), payload)
    assert "payload" in str(caught.value)
    assert _ready(db, queue) == 0
    assert _rows(db) == []


def test_a_payload_of_exactly_10_mib_is_sent(db: txqueue.Database) -> None:
    with db.batch() as batch:
        batch.send("Jobs", ("m-1",), b"x" * LIMIT)
    assert _ready(db, "Jobs") == 1


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("Body", "x" * (LIMIT + 1)),
        ("Body", "ü" * (LIMIT // 2 + 1)),
        ("Blob", b"\0" * (LIMIT + 1)),
        ("Doc", ["x" * LIMIT]),
        ("Tags", ["x" * (LIMIT // 2), "y" * (LIMIT // 2 + 1)]),  # the array is one cell
    ],
    ids=["string", "two-byte-string", "bytes", "json", "array"],
)
def test_a_column_value_over_10_mib_is_refused_by_every_mutation(
    db: txqueue.Database, column: str, value: Any
) -> None:
    with db.batch() as batch:
        batch.insert("Docs", ("Id",), [(2,)])
    for mutation in ("insert", "insert_or_update", "replace", "update"):
        with pytest.raises(InvalidArgument, match=TOO_BIG) as caught, db.batch() as batch:
            batch.insert("Docs", ("Id",), [(1,)])
            key = 3 if mutation == "insert" else 2  # a new row, or the existing one
            getattr(batch, mutation)("Docs", ("Id", column), [(key, value)])
        named = column if dialect_name(db.dialect) == "googlesql" else column.lower()
        assert named in str(caught.value), (mutation, str(caught.value))
    assert _rows(db) == [(2,)]


def test_a_sql_parameter_over_10_mib_is_refused(db: txqueue.Database) -> None:
    blob = b"x" * (LIMIT + 1)
    googlesql = dialect_name(db.dialect) == "googlesql"

    def insert(transaction: txqueue.Transaction) -> int:
        if googlesql:
            sql = "INSERT INTO Docs (Id, Blob) VALUES (@id, @blob)"
            return transaction.execute_update(sql, params={"id": 1, "blob": blob})
        return transaction.execute_update("INSERT INTO docs (id, blob) VALUES ($1, $2)", [1, blob])

    with pytest.raises(InvalidArgument, match=TOO_BIG) as caught:
        db.run_in_transaction(insert)
    assert ("@blob" if googlesql else "$2") in str(caught.value)
    assert _rows(db) == []
