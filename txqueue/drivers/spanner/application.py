"""The application's own tables on Spanner: those txqueue did not create, read from Spanner's
``INFORMATION_SCHEMA`` (which Spanner answers in read-only snapshots only)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from txqueue.core.schema import ApplicationTable, Column, ColumnType, Table
from txqueue.drivers.spanner.engine import query
from txqueue.drivers.spanner.spelling import spelling_of

__all__ = ["application_tables", "spanner_type"]

_COLUMNS = (
    "SELECT c.table_name, t.table_type, c.column_name, c.spanner_type, c.is_nullable,"
    " k.ordinal_position"
    " FROM INFORMATION_SCHEMA.COLUMNS AS c"
    " JOIN INFORMATION_SCHEMA.TABLES AS t"
    "   ON t.table_schema = c.table_schema AND t.table_name = c.table_name"
    " LEFT JOIN INFORMATION_SCHEMA.INDEX_COLUMNS AS k"
    "   ON k.table_schema = c.table_schema AND k.table_name = c.table_name"
    "   AND k.index_type = 'PRIMARY_KEY' AND k.column_name = c.column_name"
    " WHERE c.table_schema = '{schema}' AND t.table_type IN ('BASE TABLE', 'VIEW')"
    " AND NOT STARTS_WITH(LOWER(c.table_name), 'txqueue_')"
    " ORDER BY c.table_name, c.ordinal_position"
)
_KNOWN = "SELECT name FROM txqueue_objects WHERE kind != 'index'"
_TYPE = re.compile(r"^(ARRAY<)?([A-Z0-9]+)(?:\((\d+|MAX)\))?>?$")
#: The PostgreSQL dialect's spelling of the types txqueue models (``spanner_type`` there).
_POSTGRESQL_TYPES = {
    "bigint": ColumnType.INT64,
    "double precision": ColumnType.FLOAT64,
    "real": ColumnType.FLOAT32,
    "boolean": ColumnType.BOOL,
    "character varying": ColumnType.STRING,
    "text": ColumnType.STRING,
    "bytea": ColumnType.BYTES,
    "timestamp with time zone": ColumnType.TIMESTAMP,
    "spanner.commit_timestamp": ColumnType.TIMESTAMP,
    "date": ColumnType.DATE,
    "jsonb": ColumnType.JSON,
    "numeric": ColumnType.NUMERIC,
}
_POSTGRESQL_TYPE = re.compile(r"^([a-z. ]+?)(?:\((\d+)\))?(\[\])?$")


def spanner_type(spelled: str) -> Column:
    """A nameless Column for Spanner's spelling of a type (``ARRAY<STRING(MAX)>``); a type
    txqueue does not model (PROTO, INTERVAL, TOKENLIST, ...) reads as STRING."""
    match = _TYPE.match(spelled.strip().upper())
    names = {kind.value for kind in ColumnType}
    if match is None or match.group(2) not in names:
        return Column("", ColumnType.STRING)
    length = match.group(3)
    return Column(
        "",
        ColumnType(match.group(2)),
        length=int(length) if length and length != "MAX" else None,
        array=match.group(1) is not None,
    )


def postgresql_type(spelled: str) -> Column:
    """A nameless Column for the PostgreSQL dialect's spelling of a type (``character
    varying(36)``, ``bigint[]``); a type txqueue does not model reads as STRING."""
    match = _POSTGRESQL_TYPE.match(spelled.strip().lower())
    kind = _POSTGRESQL_TYPES.get(match.group(1)) if match else None
    if match is None or kind is None:
        return Column("", ColumnType.STRING)
    length = match.group(2)
    return Column("", kind, length=int(length) if length else None, array=bool(match.group(3)))


def application_tables(snapshot: Any, names: Sequence[str] | None) -> dict[str, Table]:
    """The application's tables and views by lower-cased name: those ``names`` (None: all)
    that txqueue did not create, read in the read-only ``snapshot``."""
    wanted = None if names is None else {name.lower() for name in names}
    _, known_rows = query(snapshot, _KNOWN)
    known = {str(row[0]).lower() for row in known_rows}
    spelling = spelling_of(snapshot)
    _, rows = query(snapshot, _COLUMNS.format(schema=spelling.schema))
    read_type = postgresql_type if spelling.postgresql else spanner_type
    grouped: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        key = str(row[0]).lower()
        if key in known or (wanted is not None and key not in wanted):
            continue
        grouped.setdefault(key, []).append(row)
    found: dict[str, Table] = {}
    for key, columns in grouped.items():
        mapped = []
        for row in columns:
            kind = read_type(str(row[3]))
            mapped.append(Column(str(row[2]), kind.type, row[4] == "YES", kind.length, kind.array))
        keyed = sorted((row for row in columns if row[5] is not None), key=lambda r: r[5])
        found[key] = ApplicationTable(
            name=str(columns[0][0]),
            columns=tuple(mapped),
            primary_key=tuple(str(row[2]) for row in keyed),
            engine_types=tuple(str(row[3]) for row in columns),
            is_view=columns[0][1] == "VIEW",
        )
    return found
