"""txqueue's catalog on SQLite: the recorded dialect and the schema of every table and queue."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from txqueue.core.schema import (
    CreateIndex,
    CreateTable,
    DdlStatement,
    Dialect,
    DropIndex,
    DropTable,
    Index,
    Table,
    catalog_from_rows,
)
from txqueue.drivers.sqlite.engine import map_errors
from txqueue.drivers.sqlite.statements import CATALOG, create_index, create_table, quote
from txqueue.errors import InvalidArgument

__all__ = ["apply_ddl", "initialize", "load_catalog"]


def initialize(connection: sqlite3.Connection, dialect: Dialect | None) -> Dialect:
    """Create the catalog if missing; record the dialect on first use, else check it."""
    with map_errors():
        connection.execute("BEGIN IMMEDIATE")
        try:
            for statement in CATALOG:
                connection.execute(statement)
            row = connection.execute(
                "SELECT value FROM txqueue_settings WHERE name = 'dialect'"
            ).fetchone()
            if row is None:
                recorded = dialect or Dialect.GOOGLESQL
                connection.execute(
                    "INSERT INTO txqueue_settings (name, value) VALUES ('dialect', ?)",
                    (recorded.value,),
                )
            else:
                recorded = Dialect(row[0])
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
    if dialect is not None and dialect is not recorded:
        raise InvalidArgument(
            f"dialect {dialect.value!r} differs from the database's recorded dialect "
            f"{recorded.value!r}"
        )
    return recorded


def load_catalog(connection: sqlite3.Connection) -> tuple[dict[str, Table], dict[str, Index]]:
    """Every table and index txqueue knows, by lower-cased name."""
    with map_errors():
        rows = connection.execute("SELECT kind, definition FROM txqueue_objects").fetchall()
    return catalog_from_rows(rows)


def apply_ddl(
    connection: sqlite3.Connection, statements: Sequence[DdlStatement], deliver: str
) -> None:
    """Apply checked statements in one transaction and record them in the catalog."""
    with map_errors():
        connection.execute("BEGIN IMMEDIATE")
        try:
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
    elif isinstance(statement, DropIndex):
        row = connection.execute(
            "SELECT definition FROM txqueue_objects WHERE name = ? AND kind = 'index'",
            (statement.name.lower(),),
        ).fetchone()
        if row is None:
            return
        connection.execute(f"DROP INDEX {quote(json.loads(row[0])['name'])}")
        connection.execute("DELETE FROM txqueue_objects WHERE name = ?", (statement.name.lower(),))
