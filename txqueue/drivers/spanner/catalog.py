"""txqueue's catalog on Spanner: its own tables, the schema of every table and queue, DDL.

Spanner applies DDL as schema changes, outside any transaction: a batch that fails part way
keeps the statements before the failure. ``apply_ddl`` checks what it can first (the faces
have checked the statements against the catalog), then drops what a failed batch created,
so that DDL stays all or nothing as on the other engines; the catalog rows are written in a
transaction once the schema change has succeeded.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import Any

from google.cloud.spanner_v1 import KeySet, param_types

from txqueue.core.schema import (
    Catalog,
    CreateIndex,
    CreateTable,
    DdlStatement,
    Dialect,
    DropIndex,
    DropTable,
    catalog_from_rows,
    check_dialect,
)
from txqueue.drivers.spanner.codec import map_errors
from txqueue.drivers.spanner.engine import SpannerDatabase, query
from txqueue.drivers.spanner.statements import (
    CATALOG,
    CATALOG_TABLES,
    create_index,
    create_table,
    drop_table,
    hidden_indexes,
    quote,
)
from txqueue.errors import FailedPrecondition, TxqueueError

__all__ = ["apply_ddl", "initialize", "load_catalog"]


def initialize(database: SpannerDatabase, wanted: Dialect | None) -> Dialect:
    """Check the database's own dialect against ``wanted`` and create the catalog if missing."""
    database.ensure_exists(wanted)
    dialect = database.dialect()
    check_dialect(wanted, dialect)
    if dialect is Dialect.POSTGRESQL:
        raise FailedPrecondition(
            f"{database.database.name} is a PostgreSQL-dialect database: txqueue's Spanner "
            "driver speaks GoogleSQL only so far"
        )
    missing = _missing_tables(database, CATALOG_TABLES)
    if missing:
        statements = [s for s, n in zip(CATALOG, CATALOG_TABLES) if n in missing]
        try:
            database.update_ddl(statements)
        except TxqueueError:
            if _missing_tables(database, CATALOG_TABLES):
                raise  # not another process creating them at the same moment
    return dialect


def _missing_tables(database: SpannerDatabase, names: Sequence[str]) -> set[str]:
    _, rows = database.read(
        query,
        "SELECT table_name FROM INFORMATION_SCHEMA.TABLES"
        " WHERE table_schema = '' AND table_name IN UNNEST(@names)",
        {"names": list(names)},
        {"names": param_types.Array(param_types.STRING)},
    )
    return set(names) - {row[0] for row in rows}


def _existing_indexes(database: SpannerDatabase, names: Sequence[str]) -> set[str]:
    _, rows = database.read(
        query,
        "SELECT index_name FROM INFORMATION_SCHEMA.INDEXES"
        " WHERE table_schema = '' AND index_name IN UNNEST(@names)",
        {"names": list(names)},
        {"names": param_types.Array(param_types.STRING)},
    )
    return {row[0] for row in rows}


def load_catalog(reader: Any) -> Catalog:
    """Every table and index txqueue knows, by lower-cased name, read in ``reader``."""
    _, rows = query(reader, "SELECT kind, definition FROM txqueue_objects")
    return catalog_from_rows(rows)


def apply_ddl(database: SpannerDatabase, statements: Sequence[DdlStatement], deliver: str) -> None:
    """Apply checked statements as one schema change and record them in the catalog."""
    tables, indexes = database.read(load_catalog)
    ddl: list[str] = []
    puts: list[tuple[str, str, str]] = []
    deletes: list[str] = []
    dropped_tables: list[str] = []
    created_tables: list[str] = []
    created_indexes: list[str] = []
    for statement in statements:
        if isinstance(statement, CreateTable):
            table = statement.table
            if statement.if_not_exists and table.name.lower() in tables:
                continue
            ddl += create_table(table, deliver)
            created_tables.append(table.name)
            if table.is_queue:
                created_indexes += hidden_indexes(table)
            kind = "queue" if table.is_queue else "table"
            puts.append((table.name.lower(), kind, json.dumps(table.to_json())))
            tables[table.name.lower()] = table
        elif isinstance(statement, DropTable):
            dropped = tables.pop(statement.name.lower(), None)
            if dropped is None:
                continue
            own = [i for i in indexes.values() if i.table.lower() == dropped.name.lower()]
            ddl += drop_table(dropped, [i.name for i in own])
            deletes += [dropped.name.lower(), *(i.name.lower() for i in own)]
            dropped_tables.append(dropped.name.lower())
            for index in own:
                indexes.pop(index.name.lower(), None)
        elif isinstance(statement, CreateIndex):
            index = statement.index
            if statement.if_not_exists and index.name.lower() in indexes:
                continue
            ddl.append(create_index(index))
            created_indexes.append(index.name)
            puts.append((index.name.lower(), "index", json.dumps(index.to_json())))
            indexes[index.name.lower()] = index
        elif isinstance(statement, DropIndex):
            existing = indexes.pop(statement.name.lower(), None)
            if existing is None:
                continue
            ddl.append(f"DROP INDEX {quote(existing.name)}")
            deletes.append(existing.name.lower())
    if not ddl:
        return
    try:
        database.update_ddl(ddl)
    except TxqueueError:
        _undo(database, created_tables, created_indexes)
        raise
    database.read_write(_record, puts, deletes, dropped_tables)


def _record(
    transaction: Any,
    puts: list[tuple[str, str, str]],
    deletes: list[str],
    dropped: list[str],
) -> None:
    with map_errors():
        if deletes:
            transaction.delete("txqueue_objects", KeySet(keys=[[name] for name in deletes]))
        if puts:
            transaction.insert_or_update(
                "txqueue_objects", columns=("name", "kind", "definition"), values=puts
            )
    if dropped:
        with map_errors():
            transaction.execute_update(
                "DELETE FROM txqueue_dead_letters WHERE queue IN UNNEST(@queues)",
                params={"queues": dropped},
                param_types={"queues": param_types.Array(param_types.STRING)},
            )


def _undo(database: SpannerDatabase, tables: list[str], indexes: list[str]) -> None:
    """Drop what a failed schema change created before it failed (indexes first)."""
    existing = _existing_indexes(database, indexes)
    undo = [f"DROP INDEX {quote(n)}" for n in reversed(indexes) if n in existing]
    present = set(tables) - _missing_tables(database, tables)
    undo += [f"DROP TABLE {quote(n)}" for n in reversed(tables) if n in present]
    if undo:
        with contextlib.suppress(TxqueueError):  # the original error is the one to report
            database.update_ddl(undo)
