"""How each engine's own column types read as Spanner types, for the application's tables."""

from __future__ import annotations

import pytest

from txqueue.core.schema import ColumnType
from txqueue.drivers.postgres import application as postgres
from txqueue.drivers.spanner import application as spanner
from txqueue.drivers.sqlite import application as sqlite

T = ColumnType


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        ("INTEGER", T.INT64),
        ("bigint", T.INT64),
        ("TEXT", T.STRING),
        ("varchar(200)", T.STRING),
        ("BLOB", T.BYTES),
        ("REAL", T.FLOAT64),
        ("double precision", T.FLOAT64),
        ("BOOLEAN", T.BOOL),
        ("bool", T.BOOL),
        ("DATE", T.DATE),
        ("DATETIME", T.STRING),  # the application's text, not txqueue's microseconds
        ("timestamp", T.STRING),
        ("JSON", T.JSON),
        ("decimal(10, 2)", T.NUMERIC),
        ("", T.STRING),  # no declared type: the stored value as it is
        ("geometry", T.STRING),
    ],
)
def test_sqlite_types(declared: str, expected: ColumnType) -> None:
    assert sqlite.spanner_type(declared) is expected


@pytest.mark.parametrize(
    ("engine_type", "expected", "length", "array"),
    [
        ("bigint", T.INT64, None, False),
        ("integer", T.INT64, None, False),
        ("text", T.STRING, None, False),
        ("character varying(200)", T.STRING, 200, False),
        ("bytea", T.BYTES, None, False),
        ("double precision", T.FLOAT64, None, False),
        ("real", T.FLOAT32, None, False),
        ("boolean", T.BOOL, None, False),
        ("timestamp with time zone", T.TIMESTAMP, None, False),
        ("timestamp without time zone", T.TIMESTAMP, None, False),
        ("date", T.DATE, None, False),
        ("jsonb", T.JSON, None, False),
        ("json", T.JSON, None, False),
        ("numeric(10,2)", T.NUMERIC, None, False),
        ("integer[]", T.INT64, None, True),
        ("uuid", T.STRING, None, False),
    ],
)
def test_postgres_types(engine_type: str, expected: ColumnType, length: int, array: bool) -> None:
    column = postgres.spanner_type(engine_type)
    assert (column.type, column.length, column.array) == (expected, length, array)


@pytest.mark.parametrize(
    ("spelled", "expected", "length", "array"),
    [
        ("INT64", T.INT64, None, False),
        ("STRING(MAX)", T.STRING, None, False),
        ("STRING(36)", T.STRING, 36, False),
        ("BYTES(MAX)", T.BYTES, None, False),
        ("ARRAY<STRING(MAX)>", T.STRING, None, True),
        ("ARRAY<INT64>", T.INT64, None, True),
        ("TIMESTAMP", T.TIMESTAMP, None, False),
        ("JSON", T.JSON, None, False),
        ("PROTO<examples.Thing>", T.STRING, None, False),
    ],
)
def test_spanner_types(spelled: str, expected: ColumnType, length: int, array: bool) -> None:
    column = spanner.spanner_type(spelled)
    assert (column.type, column.length, column.array) == (expected, length, array)
