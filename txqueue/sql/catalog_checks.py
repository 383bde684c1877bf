"""Checks of a parsed DDL statement against the existing schema, as Spanner makes them.

The parser (``txqueue.sql.ddl``) knows one statement; these rules need the catalog: names
taken or missing, interleaving in a parent whose key the child's must start with, and what
keeps a table from being dropped.
"""

from __future__ import annotations

from collections.abc import Mapping

from txqueue.core.schema import (
    Column,
    ColumnType,
    CreateIndex,
    CreateTable,
    DdlStatement,
    DropIndex,
    DropTable,
    Index,
    Table,
)
from txqueue.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound

__all__ = ["check_against_catalog", "type_name"]


def type_name(column: Column) -> str:
    """A column's type as Spanner's GoogleSQL spells it, e.g. ``ARRAY<STRING(MAX)>``."""
    base = column.type.value
    if column.type in (ColumnType.STRING, ColumnType.BYTES):
        base += f"({column.length if column.length is not None else 'MAX'})"
    return f"ARRAY<{base}>" if column.array else base


def _kind(table: Table) -> str:
    return "queue" if table.is_queue else "table"


def check_against_catalog(
    statement: DdlStatement, tables: Mapping[str, Table], indexes: Mapping[str, Index]
) -> None:
    """Check a parsed statement against the current schema (keys: lower-cased names).

    Raises AlreadyExists / NotFound / InvalidArgument / FailedPrecondition as Spanner would;
    returns normally when the statement may be applied (or is a no-op via IF [NOT] EXISTS).
    """
    if isinstance(statement, CreateTable):
        _check_create_table(statement, tables)
    elif isinstance(statement, DropTable):
        _check_drop_table(statement, tables, indexes)
    elif isinstance(statement, CreateIndex):
        index = statement.index
        if index.name.lower() in indexes:
            if statement.if_not_exists:
                return
            raise AlreadyExists(f"index {indexes[index.name.lower()].name} already exists")
        table = tables.get(index.table.lower())
        if table is None:
            raise NotFound(f"table {index.table} of index {index.name} does not exist")
        names = {c.name.lower() for c in table.columns}
        for column in index.columns:
            if column.lower() not in names:
                raise InvalidArgument(
                    f"index {index.name}: {_kind(table)} {table.name} has no column {column}"
                )
    elif (
        isinstance(statement, DropIndex)
        and statement.name.lower() not in indexes
        and not statement.if_exists
    ):
        raise NotFound(f"index {statement.name} does not exist")


def _check_create_table(statement: CreateTable, tables: Mapping[str, Table]) -> None:
    table = statement.table
    owner = f"{_kind(table)} {table.name}"
    existing = tables.get(table.name.lower())
    if existing is not None:
        if statement.if_not_exists:
            return
        raise AlreadyExists(f"{_kind(existing)} {existing.name} already exists")
    if table.parent is None:
        return
    parent = tables.get(table.parent.lower())
    if parent is None:
        raise NotFound(f"parent table {table.parent} of {owner} does not exist")
    if parent.is_queue:
        raise InvalidArgument(f"{owner} cannot be interleaved in queue {parent.name}")
    rule = f"the primary key of {owner} must start with the primary key of its parent {parent.name}"
    for position, parent_column in enumerate(parent.key_columns):
        if position >= len(table.primary_key):
            raise InvalidArgument(f"{rule}: key column {parent_column.name} is missing")
        column = table.column(table.primary_key[position])
        if column.name.lower() != parent_column.name.lower():
            raise InvalidArgument(
                f"{rule}: key column {position + 1} is {column.name}, expected {parent_column.name}"
            )
        if (column.type, column.array) != (parent_column.type, parent_column.array):
            raise InvalidArgument(
                f"{rule}: key column {column.name} is {type_name(column)}, "
                f"the parent's is {type_name(parent_column)}"
            )


def _check_drop_table(
    statement: DropTable, tables: Mapping[str, Table], indexes: Mapping[str, Index]
) -> None:
    kind = "queue" if statement.is_queue else "table"
    existing = tables.get(statement.name.lower())
    if existing is None:
        if statement.if_exists:
            return
        raise NotFound(f"{kind} {statement.name} does not exist")
    if existing.is_queue != statement.is_queue:
        raise InvalidArgument(
            f"{existing.name} is a {_kind(existing)}, not a {kind}: "
            f"use DROP {_kind(existing).upper()}"
        )
    lowered = existing.name.lower()
    children = sorted(t.name for t in tables.values() if (t.parent or "").lower() == lowered)
    on_it = sorted(i.name for i in indexes.values() if i.table.lower() == lowered)
    blockers = [f"{c} is interleaved in it" for c in children]
    blockers += [f"index {i} is defined on it (drop the index first)" for i in on_it]
    if blockers:
        raise FailedPrecondition(f"cannot drop {kind} {existing.name}: {blockers[0]}")
