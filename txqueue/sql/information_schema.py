"""Spanner's ``INFORMATION_SCHEMA`` views, read from txqueue's own schema catalog.

``SELECT ... FROM INFORMATION_SCHEMA.TABLES`` (``COLUMNS``, ``INDEXES``, ``INDEX_COLUMNS``)
works as on Spanner: before a statement is planned, each such name is replaced by a derived
table whose rows are the catalog's tables, queues and indexes, so the rest of the query
(WHERE, ORDER BY, joins with other views) runs on the engine as any query does. Only the
user's schema is listed (txqueue's own ``txqueue_`` tables are not); a subset of Spanner's
columns is provided (`VIEWS`). In the PostgreSQL dialect the names are lower case and
``table_schema`` is ``public``, as on Spanner.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from sqlglot import exp

from txqueue.core.schema import DELIVER_TIME, Column, ColumnType, Dialect, Index, Table
from txqueue.sql.catalog_checks import type_name

__all__ = [
    "QUEUE_STATE_COLUMNS",
    "VIEWS",
    "columns",
    "is_view",
    "queue_state_columns",
    "spanner_type",
    "view",
    "view_name",
]

_STRING, _INT64, _BOOL = ColumnType.STRING, ColumnType.INT64, ColumnType.BOOL
#: Each view's columns (GoogleSQL spelling) and their types.
VIEWS: dict[str, tuple[tuple[str, ColumnType], ...]] = {
    "TABLES": (
        ("TABLE_CATALOG", _STRING),
        ("TABLE_SCHEMA", _STRING),
        ("TABLE_NAME", _STRING),
        ("TABLE_TYPE", _STRING),
        ("PARENT_TABLE_NAME", _STRING),
        ("ON_DELETE_ACTION", _STRING),
        ("SPANNER_STATE", _STRING),
        ("INTERLEAVE_TYPE", _STRING),
    ),
    "COLUMNS": (
        ("TABLE_CATALOG", _STRING),
        ("TABLE_SCHEMA", _STRING),
        ("TABLE_NAME", _STRING),
        ("COLUMN_NAME", _STRING),
        ("ORDINAL_POSITION", _INT64),
        ("COLUMN_DEFAULT", _STRING),
        ("IS_NULLABLE", _STRING),
        ("SPANNER_TYPE", _STRING),
        ("IS_GENERATED", _STRING),
        ("SPANNER_STATE", _STRING),
    ),
    "INDEXES": (
        ("TABLE_CATALOG", _STRING),
        ("TABLE_SCHEMA", _STRING),
        ("TABLE_NAME", _STRING),
        ("INDEX_NAME", _STRING),
        ("INDEX_TYPE", _STRING),
        ("PARENT_TABLE_NAME", _STRING),
        ("IS_UNIQUE", _BOOL),
        ("IS_NULL_FILTERED", _BOOL),
        ("INDEX_STATE", _STRING),
        ("SPANNER_IS_MANAGED", _BOOL),
    ),
    "INDEX_COLUMNS": (
        ("TABLE_CATALOG", _STRING),
        ("TABLE_SCHEMA", _STRING),
        ("TABLE_NAME", _STRING),
        ("INDEX_NAME", _STRING),
        ("INDEX_TYPE", _STRING),
        ("COLUMN_NAME", _STRING),
        ("ORDINAL_POSITION", _INT64),
        ("COLUMN_ORDERING", _STRING),
        ("IS_NULLABLE", _STRING),
        ("SPANNER_TYPE", _STRING),
    ),
}
_PG_TYPES = {
    ColumnType.STRING: "character varying",
    ColumnType.BYTES: "bytea",
    ColumnType.INT64: "bigint",
    ColumnType.FLOAT64: "double precision",
    ColumnType.FLOAT32: "real",
    ColumnType.BOOL: "boolean",
    ColumnType.TIMESTAMP: "timestamp with time zone",
    ColumnType.DATE: "date",
    ColumnType.JSON: "jsonb",
    ColumnType.NUMERIC: "numeric",
}


def view_name(node: exp.Table) -> str | None:
    """``TABLES`` for ``INFORMATION_SCHEMA.TABLES`` (any case; None for other names). The
    GoogleSQL parser reads the whole dotted name as one identifier, PostgreSQL's as a schema."""
    if node.args.get("catalog"):
        return None
    if str(node.args.get("db") or "").lower() == "information_schema":
        return node.name.upper()
    schema, dot, name = str(node.name).partition(".")
    if dot and schema.lower() == "information_schema" and "." not in name:
        return name.upper()
    return None


def is_view(node: exp.Table) -> bool:
    """Whether ``node`` names ``INFORMATION_SCHEMA.<something>``."""
    return view_name(node) is not None


def view(
    name: str,
    tables: Mapping[str, Table],
    indexes: Mapping[str, Index],
    dialect: Dialect,
) -> exp.Expression:
    """The query standing for ``INFORMATION_SCHEMA.<name>`` (a known view's name)."""
    user_tables = sorted(
        (t for t in tables.values() if not t.name.lower().startswith("txqueue_")),
        key=lambda t: t.name.lower(),
    )
    user_indexes = sorted(
        (i for i in indexes.values() if i.table.lower() in {t.name.lower() for t in user_tables}),
        key=lambda i: (i.table.lower(), i.name.lower()),
    )
    schema = "public" if dialect is Dialect.POSTGRESQL else ""
    rows = _ROWS[name.upper()](user_tables, user_indexes, tables, dialect)
    rows = [("", schema, *row) for row in rows]
    return _query(name, rows, dialect)


def _tables(
    tables: Sequence[Table], indexes: Sequence[Index], _: Mapping[str, Table], __: Dialect
) -> list[tuple[Any, ...]]:
    return [
        (
            table.name,
            "QUEUE" if table.is_queue else "BASE TABLE",
            table.parent,
            None
            if table.parent is None
            else ("CASCADE" if table.on_delete_cascade else "NO ACTION"),
            "COMMITTED",
            None if table.parent is None else "IN PARENT",
        )
        for table in tables
    ]


def _visible(table: Table, dialect: Dialect) -> list[Column]:
    """A table's columns as queries see them: declared ones, then a queue's DeliverTime."""
    columns = list(table.columns)
    if table.is_queue:
        columns.append(Column(DELIVER_TIME[dialect], ColumnType.TIMESTAMP, nullable=False))
    return columns


def _spanner_type(column: Column, dialect: Dialect) -> str:
    if dialect is Dialect.GOOGLESQL:
        return type_name(column)
    base = _PG_TYPES[column.type]
    if column.type is ColumnType.STRING and column.length is not None:
        base += f"({column.length})"
    return base + "[]" if column.array else base


def _columns(
    tables: Sequence[Table], indexes: Sequence[Index], _: Mapping[str, Table], dialect: Dialect
) -> list[tuple[Any, ...]]:
    return [
        (
            table.name,
            column.name,
            position,
            None,
            "YES" if column.nullable else "NO",
            _spanner_type(column, dialect),
            "NEVER",
            "COMMITTED",
        )
        for table in tables
        for position, column in enumerate(_visible(table, dialect), start=1)
    ]


def _indexes(
    tables: Sequence[Table], indexes: Sequence[Index], _: Mapping[str, Table], __: Dialect
) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = [
        (table.name, "PRIMARY_KEY", "PRIMARY_KEY", "", True, False, None, False) for table in tables
    ]
    rows += [
        (index.table, index.name, "INDEX", "", index.unique, False, "READ_WRITE", False)
        for index in indexes
    ]
    return sorted(rows, key=lambda row: (str(row[0]).lower(), row[2] != "PRIMARY_KEY", row[1]))


def _index_columns(
    tables: Sequence[Table],
    indexes: Sequence[Index],
    catalog: Mapping[str, Table],
    dialect: Dialect,
) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for table in tables:
        for position, column in enumerate(table.key_columns, start=1):
            rows.append(
                (
                    table.name,
                    "PRIMARY_KEY",
                    "PRIMARY_KEY",
                    column.name,
                    position,
                    "ASC",
                    "YES" if column.nullable else "NO",
                    _spanner_type(column, dialect),
                )
            )
    for index in indexes:
        owner = catalog[index.table.lower()]
        descending = index.descending or (False,) * len(index.columns)
        for position, (name, down) in enumerate(zip(index.columns, descending), start=1):
            column = next(c for c in _visible(owner, dialect) if c.name.lower() == name.lower())
            rows.append(
                (
                    owner.name,
                    index.name,
                    "INDEX",
                    column.name,
                    position,
                    "DESC" if down else "ASC",
                    "YES" if column.nullable else "NO",
                    _spanner_type(column, dialect),
                )
            )
    return rows


_ROWS = {
    "TABLES": _tables,
    "COLUMNS": _columns,
    "INDEXES": _indexes,
    "INDEX_COLUMNS": _index_columns,
}


def columns(name: str, dialect: Dialect) -> list[Column]:
    """The columns of view ``name`` (lower case in the PostgreSQL dialect)."""
    return [
        Column(column.lower() if dialect is Dialect.POSTGRESQL else column, kind)
        for column, kind in VIEWS[name.upper()]
    ]


def _query(name: str, rows: Sequence[tuple[Any, ...]], dialect: Dialect) -> exp.Expression:
    """``SELECT v AS c, ... UNION ALL SELECT ...`` (no rows: a derived table of one row and
    ``WHERE FALSE``, as Spanner allows no WHERE without FROM), ready for the engine (it does
    not pass through the compiler: `columns` are its types). A NULL is cast to its column's
    type (Spanner reads a bare one as INT64). The UNIONs nest as balanced trees, in chunks
    (SQLite allows 500 terms in one compound SELECT)."""
    view_columns = columns(name, dialect)
    aliases = [column.name for column in view_columns]
    kinds = [column.type for column in view_columns]

    def select(values: Sequence[Any], named: bool) -> exp.Select:
        items: list[Any] = [_literal(value, kind) for value, kind in zip(values, kinds)]
        if named:
            items = [exp.alias_(item, alias) for item, alias in zip(items, aliases)]
        return exp.select(*items)

    if not rows:
        empty = exp.Subquery(
            this=select([None] * len(aliases), True),
            alias=exp.TableAlias(this=exp.to_identifier("_txq_empty")),
        )
        return exp.select("*").from_(empty).where(exp.false())
    chunks = [
        _balanced(
            [select(row, index == 0) for index, row in enumerate(rows[start : start + _CHUNK])]
        )
        for start in range(0, len(rows), _CHUNK)
    ]
    if len(chunks) == 1:
        return cast(exp.Expression, chunks[0])
    wrapped: list[Any] = [
        exp.select("*").from_(exp.Subquery(this=chunk, alias=exp.TableAlias(this=f"c{n}")))
        for n, chunk in enumerate(chunks)
    ]
    return cast(exp.Expression, _balanced(wrapped))


_CHUNK = 250


def _balanced(selects: list[Any]) -> Any:
    """``a UNION ALL b UNION ALL ...`` nested as a balanced tree (log(n) deep)."""
    while len(selects) > 1:
        pairs = zip(selects[::2], selects[1::2])
        merged: list[Any] = [exp.union(a, b, distinct=False) for a, b in pairs]
        selects = merged + ([selects[-1]] if len(selects) % 2 else [])
    return selects[0]


_SQL_TYPES = {_STRING: "TEXT", _INT64: "BIGINT", _BOOL: "BOOLEAN"}


def _literal(value: Any, kind: ColumnType) -> exp.Expression:
    if value is None:
        return exp.cast(exp.null(), exp.DataType.build(_SQL_TYPES[kind]))
    if isinstance(value, bool):
        return exp.true() if value else exp.false()
    if isinstance(value, int):
        return exp.Literal.number(value)
    return exp.Literal.string(str(value))


def spanner_type(column: Column, dialect: Dialect) -> str:
    """A column's type as Spanner's INFORMATION_SCHEMA.COLUMNS.SPANNER_TYPE spells it."""
    return _spanner_type(column, dialect)


#: A queue's hidden state, next to its declared columns and DeliverTime: never in ``SELECT *``
#: or INFORMATION_SCHEMA, named here for ``txqueue sql``'s ``\d QUEUE``.
QUEUE_STATE_COLUMNS = (
    ("_txq_ready_at", "TIMESTAMP", "when a message given back or retried is ready again"),
    ("_txq_lease_expiration", "TIMESTAMP", "when the current lease ends"),
    ("_txq_lease_token", "STRING", "the current lease's token"),
    ("_txq_delivery_count", "INT64", "how many times the message was received (never NULL)"),
    ("_txq_last_error", "STRING", "a dead letter's reason"),
    ("_txq_first_failure", "TIMESTAMP", "a dead letter's first failure"),
    ("_txq_last_failure", "TIMESTAMP", "a dead letter's last failure"),
    ("_txq_trace_context", "STRING", "the sender's W3C trace context, when traced"),
)


def queue_state_columns(dialect: Dialect) -> list[tuple[str, str, str]]:
    """`QUEUE_STATE_COLUMNS` with each type spelled as ``dialect`` spells it (``timestamp with
    time zone`` in the PostgreSQL dialect, as its INFORMATION_SCHEMA does)."""
    return [
        (name, _spanner_type(Column(name, ColumnType(kind)), dialect), meaning)
        for name, kind, meaning in QUEUE_STATE_COLUMNS
    ]
