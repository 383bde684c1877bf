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
    AddColumn,
    Catalog,
    CreateIndex,
    CreateTable,
    DdlStatement,
    Dialect,
    DropIndex,
    DropTable,
    Table,
    catalog_from_rows,
)
from txqueue.drivers.base import PauseParams
from txqueue.drivers.spanner import native
from txqueue.drivers.spanner.codec import map_errors
from txqueue.drivers.spanner.engine import SpannerDatabase, query, update
from txqueue.drivers.spanner.spelling import spelling_of
from txqueue.drivers.spanner.statements import (
    CATALOG_TABLES,
    add_column,
    catalog_ddl,
    create_index,
    create_table,
    drop_table,
    hidden_indexes,
    wake_stream,
)
from txqueue.errors import InvalidArgument, TxqueueError

__all__ = ["apply_ddl", "initialize", "is_paused", "load_catalog", "set_paused"]


def initialize(database: SpannerDatabase, wanted: Dialect | None) -> Dialect:
    """Check the database's own dialect against ``wanted`` and create the catalog if missing."""
    database.ensure_exists(wanted)
    dialect = database.dialect()
    if wanted is not None and wanted is not dialect:
        raise InvalidArgument(
            f"dialect {wanted.value!r} differs from the Cloud Spanner database's recorded "
            f"dialect {dialect.value!r} (its own, fixed when the database was created): "
            f"connect without dialect= or with dialect={dialect.value!r}"
        )
    missing = _missing_tables(database, CATALOG_TABLES)
    if missing:
        own = catalog_ddl(database.spelling)
        statements = [s for s, n in zip(own, CATALOG_TABLES) if n in missing]
        try:
            database.update_ddl(statements)
        except TxqueueError:
            if _missing_tables(database, CATALOG_TABLES):
                raise  # not another process creating them at the same moment
    return dialect


def _missing_tables(database: SpannerDatabase, names: Sequence[str]) -> set[str]:
    spelling = database.spelling
    _, rows = database.read(
        query,
        "SELECT table_name FROM INFORMATION_SCHEMA.TABLES"
        f" WHERE table_schema = '{spelling.schema}' AND {spelling.in_array('table_name', 'names')}",
        {"names": list(names)},
        {"names": param_types.Array(param_types.STRING)},
    )
    return set(names) - {row[0] for row in rows}


def _existing_indexes(database: SpannerDatabase, names: Sequence[str]) -> set[str]:
    spelling = database.spelling
    _, rows = database.read(
        query,
        "SELECT index_name FROM INFORMATION_SCHEMA.INDEXES"
        f" WHERE table_schema = '{spelling.schema}' AND {spelling.in_array('index_name', 'names')}",
        {"names": list(names)},
        {"names": param_types.Array(param_types.STRING)},
    )
    return {row[0] for row in rows}


def load_catalog(reader: Any) -> Catalog:
    """Every table and index txqueue knows, by lower-cased name, read in ``reader``."""
    _, rows = query(reader, "SELECT kind, definition FROM txqueue_objects")
    return catalog_from_rows(rows)


def apply_ddl(
    database: SpannerDatabase,
    statements: Sequence[DdlStatement],
    deliver: str,
    native_queues: bool = False,
) -> None:
    """Apply checked statements as one schema change and record them in the catalog
    (queues as Spanner's own ``CREATE QUEUE`` when ``native_queues``: ``native.py``)."""
    tables, indexes = database.read(load_catalog)
    spelling = database.spelling
    ddl: list[str] = []
    puts: list[tuple[str, str, str]] = []
    deletes: list[str] = []
    dropped_tables: list[str] = []
    created_tables: list[str] = []
    created_indexes: list[str] = []
    created_streams: list[str] = []
    for statement in statements:
        if isinstance(statement, CreateTable):
            table = statement.table
            if statement.if_not_exists and table.name.lower() in tables:
                continue
            if native_queues and table.is_queue:
                ddl.append(native.create_queue(table, spelling))
            else:
                ddl += create_table(table, deliver, spelling)
            created_tables.append(table.name)
            if table.is_queue and not native_queues:
                created_indexes += hidden_indexes(table)
                created_streams.append(wake_stream(table))
            kind = "queue" if table.is_queue else "table"
            puts.append((table.name.lower(), kind, json.dumps(table.to_json())))
            tables[table.name.lower()] = table
        elif isinstance(statement, DropTable):
            dropped = tables.pop(statement.name.lower(), None)
            if dropped is None:
                continue
            own = [i for i in indexes.values() if i.table.lower() == dropped.name.lower()]
            if native_queues and dropped.is_queue:
                ddl += native.drop_queue(dropped, [i.name for i in own], spelling)
            else:
                ddl += drop_table(dropped, [i.name for i in own], spelling)
            deletes += [dropped.name.lower(), *(i.name.lower() for i in own)]
            dropped_tables.append(dropped.name.lower())
            for index in own:
                indexes.pop(index.name.lower(), None)
        elif isinstance(statement, CreateIndex):
            index = statement.index
            if statement.if_not_exists and index.name.lower() in indexes:
                continue
            ddl.append(create_index(index, spelling))
            created_indexes.append(index.name)
            puts.append((index.name.lower(), "index", json.dumps(index.to_json())))
            indexes[index.name.lower()] = index
        elif isinstance(statement, AddColumn):
            widened = tables.get(statement.table.lower())
            if widened is None or widened.has_column(statement.column.name):
                continue
            ddl.append(add_column(widened, statement.column, spelling))
            widened = tables[widened.name.lower()] = widened.with_column(statement.column)
            kind = "queue" if widened.is_queue else "table"
            puts.append((widened.name.lower(), kind, json.dumps(widened.to_json())))
        elif isinstance(statement, DropIndex):
            existing = indexes.pop(statement.name.lower(), None)
            if existing is None:
                continue
            ddl.append(f"DROP INDEX {spelling.quote(existing.name)}")
            deletes.append(existing.name.lower())
    if not ddl:
        return
    # txqueue's own tables (CREATE ... if missing) may be made by another process at the same
    # moment: its change wins, ours fails, and what it made is kept (it records it too).
    if_missing = all(
        isinstance(s, (CreateTable, CreateIndex)) and s.if_not_exists for s in statements
    )
    try:
        database.update_ddl(ddl)
    except TxqueueError:
        if not (
            if_missing and _present(database, created_tables, created_indexes, created_streams)
        ):
            _undo(database, created_tables, created_indexes, created_streams)
            raise
    database.read_write(_record, puts, deletes, dropped_tables)


def _present(
    database: SpannerDatabase, tables: list[str], indexes: list[str], streams: list[str]
) -> bool:
    """Whether every one of these tables, indexes and change streams exists."""
    return (
        not _missing_tables(database, tables)
        and set(indexes) <= _existing_indexes(database, indexes)
        and set(streams) <= _existing_streams(database, streams)
    )


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
        for forgotten in ("txqueue_dead_letters", "txqueue_paused"):
            update(
                transaction,
                f"DELETE FROM {forgotten} WHERE {spelling_of(transaction).in_array('queue', 'queues')}",
                {"queues": dropped},
                {"queues": param_types.Array(param_types.STRING)},
            )


def set_paused(transaction: Any, params: PauseParams) -> None:
    """Pause or resume a queue: write or delete its row of ``txqueue_paused`` (idempotent)."""
    name = params.queue.name.lower()
    with map_errors():
        if params.paused:
            transaction.insert_or_update("txqueue_paused", columns=("queue",), values=[(name,)])
        else:
            transaction.delete("txqueue_paused", KeySet(keys=[[name]]))


def is_paused(snapshot: Any, queue: Table) -> bool:
    """Whether ``queue`` has a row in ``txqueue_paused``."""
    _, rows = query(
        snapshot,
        "SELECT 1 FROM txqueue_paused WHERE queue = @queue",
        {"queue": queue.name.lower()},
        {"queue": param_types.STRING},
    )
    return bool(rows)


def _existing_streams(database: SpannerDatabase, names: Sequence[str]) -> set[str]:
    _, rows = database.read(
        query,
        "SELECT change_stream_name FROM INFORMATION_SCHEMA.CHANGE_STREAMS"
        f" WHERE {database.spelling.in_array('change_stream_name', 'names')}",
        {"names": list(names)},
        {"names": param_types.Array(param_types.STRING)},
    )
    return {row[0] for row in rows}


def _undo(
    database: SpannerDatabase, tables: list[str], indexes: list[str], streams: list[str]
) -> None:
    """Drop what a failed schema change created before it failed (tables last)."""
    quote = database.spelling.quote
    existing = _existing_indexes(database, indexes)
    undo = [f"DROP INDEX {quote(n)}" for n in reversed(indexes) if n in existing]
    if streams:
        present_streams = _existing_streams(database, streams)
        undo += [f"DROP CHANGE STREAM {quote(n)}" for n in streams if n in present_streams]
    present = set(tables) - _missing_tables(database, tables)
    undo += [f"DROP TABLE {quote(n)}" for n in reversed(tables) if n in present]
    if undo:
        with contextlib.suppress(TxqueueError):  # the original error is the one to report
            database.update_ddl(undo)
