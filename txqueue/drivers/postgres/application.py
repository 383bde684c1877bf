"""The application's own tables on PostgreSQL: those txqueue did not create, read from
``pg_catalog`` in the schemas of the connection's ``search_path`` (the first schema holding a
name wins, as it does for the unqualified names txqueue's SQL uses).

Types map by ``format_type``'s spelling; a type with no Spanner counterpart (uuid, inet,
interval, ...) maps to STRING and its value comes back as psycopg reads it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from txqueue.core.schema import ApplicationTable, Column, ColumnType, Table

__all__ = ["APPLICATION_COLUMNS", "application_tables", "parameters", "spanner_type"]

#: One row per column: table, kind, column, engine type, NOT NULL, primary key position (0:
#: none). Tables whose lower-cased name is in ``names`` (NULL: all), in search_path order.
APPLICATION_COLUMNS = (
    "SELECT c.relname, c.relkind, a.attname, format_type(a.atttypid, a.atttypmod),"
    " a.attnotnull,"
    " coalesce(array_position(string_to_array(i.indkey::text, ' ')::int2[], a.attnum), 0)"
    " FROM pg_class AS c"
    " JOIN pg_namespace AS n ON n.oid = c.relnamespace"
    " JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped"
    " LEFT JOIN pg_index AS i ON i.indrelid = c.oid AND i.indisprimary"
    " WHERE n.nspname = ANY (current_schemas(false))"
    " AND c.relkind IN ('r', 'p', 'v', 'm', 'f')"
    " AND (%(names)s::text[] IS NULL OR lower(c.relname) = ANY (%(names)s::text[]))"
    " AND lower(c.relname) NOT LIKE 'txqueue\\_%%'"
    " AND NOT EXISTS (SELECT 1 FROM txqueue_objects AS o"
    "   WHERE o.name = lower(c.relname) AND o.kind <> 'index')"
    " ORDER BY array_position(current_schemas(false), n.nspname),"
    " c.relname <> lower(c.relname), c.relname, a.attnum"
)
_NAMED = [
    (re.compile(r"^(bigint|integer|smallint)$"), ColumnType.INT64),
    (re.compile(r"^(text|character varying|character|name|citext)\b"), ColumnType.STRING),
    (re.compile(r"^bytea$"), ColumnType.BYTES),
    (re.compile(r"^double precision$"), ColumnType.FLOAT64),
    (re.compile(r"^real$"), ColumnType.FLOAT32),
    (re.compile(r"^boolean$"), ColumnType.BOOL),
    (re.compile(r"^timestamp\b"), ColumnType.TIMESTAMP),
    (re.compile(r"^date$"), ColumnType.DATE),
    (re.compile(r"^jsonb?$"), ColumnType.JSON),
    (re.compile(r"^numeric\b"), ColumnType.NUMERIC),
]
_LENGTH = re.compile(r"^character varying\((\d+)\)$")


def spanner_type(engine_type: str) -> Column:
    """The Spanner type (a nameless Column) a column of ``engine_type`` reads as."""
    base, array = engine_type, engine_type.endswith("[]")
    if array:
        base = engine_type[:-2]
    kind = next((k for pattern, k in _NAMED if pattern.search(base)), ColumnType.STRING)
    length = _LENGTH.match(base)
    return Column("", kind, length=int(length.group(1)) if length else None, array=array)


def parameters(names: Sequence[str] | None) -> dict[str, Any]:
    return {"names": None if names is None else [name.lower() for name in names]}


def application_tables(rows: Sequence[Sequence[Any]]) -> dict[str, Table]:
    """``APPLICATION_COLUMNS``' rows as tables by lower-cased name (the first of a name)."""
    grouped: dict[str, list[Sequence[Any]]] = {}
    names: dict[str, str] = {}
    for row in rows:
        name = str(row[0])
        if names.setdefault(name.lower(), name) == name:
            grouped.setdefault(name.lower(), []).append(row)
    found: dict[str, Table] = {}
    for key, columns in grouped.items():
        mapped = tuple(
            Column(
                str(row[2]),
                (kind := spanner_type(str(row[3]))).type,
                nullable=not row[4],
                length=kind.length,
                array=kind.array,
            )
            for row in columns
        )
        primary_key = tuple(str(row[2]) for row in sorted(columns, key=lambda r: r[5]) if row[5])
        found[key] = ApplicationTable(
            name=names[key],
            columns=mapped,
            primary_key=primary_key,
            engine_types=tuple(str(row[3]) for row in columns),
            is_view=columns[0][1] in ("v", "m"),
        )
    return found
