"""txqueue's catalog on SQLite: the recorded dialect and the schema of every table and queue."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from txqueue.core.schema import (
    AddColumn,
    CreateIndex,
    CreateTable,
    DdlStatement,
    Dialect,
    DropIndex,
    DropTable,
    Index,
    Table,
    catalog_from_rows,
    check_dialect,
)
from txqueue.drivers.base import PauseParams
from txqueue.drivers.sqlite.engine import map_errors
from txqueue.drivers.sqlite.locking import begin_immediate
from txqueue.drivers.sqlite.statements import (
    CATALOG,
    TRACE_CONTEXT,
    add_column,
    create_index,
    create_table,
    quote,
)

__all__ = ["apply_ddl", "initialize", "is_paused", "load_catalog", "set_paused"]


def initialize(connection: sqlite3.Connection, dialect: Dialect | None) -> Dialect:
    """Create the catalog if missing; the recorded dialect, else ``dialect`` or GoogleSQL.

    Records nothing: the first successful DDL records the dialect (``apply_ddl``), so a
    connect, or a first DDL that fails, leaves the choice open.
    """
    with map_errors():
        begin_immediate(connection)
        try:
            for statement in CATALOG:
                connection.execute(statement)
            recorded = _recorded(connection)
            add_trace_columns(connection)
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
    if recorded is None:
        return dialect or Dialect.GOOGLESQL
    check_dialect(dialect, recorded)
    return recorded


def _recorded(connection: sqlite3.Connection) -> Dialect | None:
    """The dialect the database records. A record on a database holding no table, queue or
    index binds nothing: earlier versions recorded one at connect, before any DDL."""
    row = connection.execute(
        "SELECT value FROM txqueue_settings WHERE name = 'dialect'"
        " AND EXISTS (SELECT 1 FROM txqueue_objects)"
    ).fetchone()
    return None if row is None else Dialect(row[0])


def _record(connection: sqlite3.Connection, dialect: Dialect) -> None:
    """Record ``dialect`` inside the DDL's transaction, or refuse a different recorded one."""
    recorded = _recorded(connection)
    if recorded is None:
        connection.execute(
            "INSERT OR REPLACE INTO txqueue_settings (name, value) VALUES ('dialect', ?)",
            (dialect.value,),
        )
    else:
        check_dialect(dialect, recorded)


def add_trace_columns(connection: sqlite3.Connection) -> None:
    """Give queues created before the trace-context column was added that column (NULL:
    no context), so that a database made by an older txqueue keeps working."""
    missing = connection.execute(
        "SELECT o.name FROM txqueue_objects AS o WHERE o.kind = 'queue'"
        " AND EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = o.name"
        " COLLATE NOCASE)"
        " AND NOT EXISTS (SELECT 1 FROM pragma_table_info(o.name) WHERE name = ?)",
        (TRACE_CONTEXT,),
    ).fetchall()
    for (name,) in missing:
        connection.execute(f"ALTER TABLE {quote(name)} ADD COLUMN {TRACE_CONTEXT} TEXT")


def set_paused(connection: sqlite3.Connection, params: PauseParams) -> None:
    """Pause or resume a queue: add or remove its row of ``txqueue_paused`` (idempotent)."""
    name = params.queue.name.lower()
    with map_errors():
        if params.paused:
            connection.execute(
                "INSERT INTO txqueue_paused (queue) VALUES (?) ON CONFLICT DO NOTHING", (name,)
            )
        else:
            connection.execute("DELETE FROM txqueue_paused WHERE queue = ?", (name,))


def is_paused(connection: sqlite3.Connection, queue: Table) -> bool:
    """Whether ``queue`` has a row in ``txqueue_paused``."""
    with map_errors():
        row = connection.execute(
            "SELECT 1 FROM txqueue_paused WHERE queue = ?", (queue.name.lower(),)
        ).fetchone()
    return row is not None


def load_catalog(connection: sqlite3.Connection) -> tuple[dict[str, Table], dict[str, Index]]:
    """Every table and index txqueue knows, by lower-cased name."""
    with map_errors():
        rows = connection.execute("SELECT kind, definition FROM txqueue_objects").fetchall()
    return catalog_from_rows(rows)


def apply_ddl(
    connection: sqlite3.Connection,
    statements: Sequence[DdlStatement],
    deliver: str,
    dialect: Dialect,
) -> None:
    """Apply checked statements in one transaction, record them in the catalog, and record
    ``dialect`` when the database has none yet (the same transaction: all or nothing)."""
    with map_errors():
        begin_immediate(connection)
        try:
            _record(connection, dialect)
            tables, _ = load_catalog(connection)  # under the write lock: current for sure
            for statement in statements:
                _apply(connection, statement, tables, deliver)
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise


def _apply(
    connection: sqlite3.Connection, statement: DdlStatement, tables: dict[str, Table], deliver: str
) -> None:
    if isinstance(statement, CreateTable):
        table = statement.table
        if statement.if_not_exists and table.name.lower() in tables:
            return
        parent = tables[table.parent.lower()] if table.parent else None
        for sql in create_table(table, deliver, parent):
            connection.execute(sql)
        kind = "queue" if table.is_queue else "table"
        connection.execute(
            "INSERT INTO txqueue_objects (name, kind, definition) VALUES (?, ?, ?)",
            (table.name.lower(), kind, json.dumps(table.to_json())),
        )
        tables[table.name.lower()] = table
    elif isinstance(statement, DropTable):
        if statement.name.lower() not in tables:
            return
        name = tables.pop(statement.name.lower()).name
        connection.execute(f"DROP TABLE {quote(name)}")
        connection.execute("DELETE FROM txqueue_objects WHERE name = ?", (name.lower(),))
        connection.execute("DELETE FROM txqueue_dead_letters WHERE queue = ?", (name.lower(),))
        connection.execute("DELETE FROM txqueue_paused WHERE queue = ?", (name.lower(),))
    elif isinstance(statement, CreateIndex):
        index = statement.index
        if statement.if_not_exists:
            exists = connection.execute(
                "SELECT 1 FROM txqueue_objects WHERE name = ? AND kind = 'index'",
                (index.name.lower(),),
            ).fetchone()
            if exists:
                return
        connection.execute(create_index(index))
        connection.execute(
            "INSERT INTO txqueue_objects (name, kind, definition) VALUES (?, 'index', ?)",
            (index.name.lower(), json.dumps(index.to_json())),
        )
    elif isinstance(statement, AddColumn):
        found = tables.get(statement.table.lower())
        if found is None or found.has_column(statement.column.name):
            return
        connection.execute(add_column(found, statement.column))
        widened = tables[found.name.lower()] = found.with_column(statement.column)
        connection.execute(
            "UPDATE txqueue_objects SET definition = ? WHERE name = ?",
            (json.dumps(widened.to_json()), widened.name.lower()),
        )
    elif isinstance(statement, DropIndex):
        row = connection.execute(
            "SELECT definition FROM txqueue_objects WHERE name = ? AND kind = 'index'",
            (statement.name.lower(),),
        ).fetchone()
        if row is None:
            return
        connection.execute(f"DROP INDEX {quote(json.loads(row[0])['name'])}")
        connection.execute("DELETE FROM txqueue_objects WHERE name = ?", (statement.name.lower(),))
