"""The application's own tables on SQLite: those txqueue did not create, read from SQLite's
catalog (``sqlite_master`` and ``pragma_table_info``) so that Spanner SQL can name them.

Types map by SQLite's declared type names, as its affinity rules read them. TIMESTAMP and
DATETIME columns map to STRING: an application (Django, SQLAlchemy) stores them as text,
whereas txqueue's own TIMESTAMP is INTEGER microseconds, so they are read and compared as
the text they hold. A type SQLite does not name (or none) maps to STRING: the stored value
comes back as SQLite holds it.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence

from txqueue.core.schema import ApplicationTable, Column, ColumnType, Table
from txqueue.drivers.sqlite.engine import map_errors

__all__ = ["application_tables", "spanner_type"]

_TABLES = (
    "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view')"
    " AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE 'txqueue\\_%' ESCAPE '\\'"
    " AND lower(name) NOT IN (SELECT name FROM txqueue_objects WHERE kind <> 'index')"
    " ORDER BY name"
)
_COLUMNS = 'SELECT name, type, "notnull", pk FROM pragma_table_info(?) ORDER BY cid'
_NAMED = [
    (re.compile(r"\bBOOL(EAN)?\b"), ColumnType.BOOL),
    (re.compile(r"\b(DATETIME|TIMESTAMP)"), ColumnType.STRING),
    (re.compile(r"^DATE$"), ColumnType.DATE),
    (re.compile(r"^JSONB?$"), ColumnType.JSON),
    (re.compile(r"INT"), ColumnType.INT64),
    (re.compile(r"CHAR|CLOB|TEXT"), ColumnType.STRING),
    (re.compile(r"BLOB"), ColumnType.BYTES),
    (re.compile(r"REAL|FLOA|DOUB"), ColumnType.FLOAT64),
    (re.compile(r"DECIMAL|NUMERIC"), ColumnType.NUMERIC),
]


def spanner_type(declared: str) -> ColumnType:
    """The Spanner type a column of SQLite's ``declared`` type reads as."""
    upper = declared.strip().upper()
    for pattern, kind in _NAMED:
        if pattern.search(upper):
            return kind
    return ColumnType.STRING


def application_tables(
    connection: sqlite3.Connection, names: Sequence[str] | None
) -> dict[str, Table]:
    """The application's tables and views by lower-cased name: those ``names`` (None: all)
    that txqueue did not create."""
    wanted = None if names is None else {name.lower() for name in names}
    found: dict[str, Table] = {}
    with map_errors():
        for name, kind in connection.execute(_TABLES).fetchall():
            if wanted is not None and name.lower() not in wanted:
                continue
            rows = connection.execute(_COLUMNS, (name,)).fetchall()
            columns = tuple(
                Column(column, spanner_type(declared or ""), nullable=not not_null)
                for column, declared, not_null, _ in rows
            )
            key = tuple(row[0] for row in sorted((r for r in rows if r[3]), key=lambda r: r[3]))
            found.setdefault(
                name.lower(),
                ApplicationTable(
                    name=name,
                    columns=columns,
                    primary_key=key,
                    engine_types=tuple(declared or "" for _, declared, _, _ in rows),
                    is_view=kind == "view",
                ),
            )
    return found
