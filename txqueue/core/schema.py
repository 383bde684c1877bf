"""The schema model: what a CREATE TABLE / CREATE QUEUE means, independent of any engine.

The DDL front end (``txqueue.sql.ddl``) turns Spanner DDL of either dialect into these
objects; each driver turns them into its engine's DDL. The catalog stores them as JSON so
every process sees the same definitions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from functools import cached_property
from typing import Any

from txqueue.errors import InvalidArgument

__all__ = [
    "DELIVER_TIME",
    "AddColumn",
    "ApplicationTable",
    "Catalog",
    "Column",
    "ColumnType",
    "CreateIndex",
    "CreateTable",
    "DdlStatement",
    "Dialect",
    "DropIndex",
    "DropTable",
    "Index",
    "Table",
    "catalog_from_rows",
    "check_dialect",
    "check_reserved_names",
    "validate_name",
]

NAME_MAX_BYTES = 63
_NAME_RULE = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")


class Dialect(str, Enum):
    """The SQL dialect a database speaks, as in Spanner: recorded once per database."""

    GOOGLESQL = "googlesql"
    POSTGRESQL = "postgresql"


def check_dialect(wanted: Dialect | None, recorded: Dialect) -> None:
    """Refuse ``wanted`` when the database records another dialect (its first successful
    update_ddl recorded it; a database keeps one)."""
    if wanted is not None and wanted is not recorded:
        raise InvalidArgument(
            f"dialect {wanted.value!r} differs from the database's recorded dialect "
            f"{recorded.value!r} (recorded by its first update_ddl; a database keeps one)"
        )


class ColumnType(str, Enum):
    """Engine-independent column types (GoogleSQL names)."""

    INT64 = "INT64"
    FLOAT64 = "FLOAT64"
    FLOAT32 = "FLOAT32"
    BOOL = "BOOL"
    STRING = "STRING"
    BYTES = "BYTES"
    TIMESTAMP = "TIMESTAMP"
    DATE = "DATE"
    JSON = "JSON"
    NUMERIC = "NUMERIC"


PAYLOAD_TYPES = (ColumnType.BYTES, ColumnType.STRING, ColumnType.JSON)
KEY_TYPES = (
    ColumnType.INT64,
    ColumnType.STRING,
    ColumnType.BYTES,
    ColumnType.BOOL,
    ColumnType.TIMESTAMP,
    ColumnType.DATE,
    ColumnType.NUMERIC,
    ColumnType.FLOAT64,
)


def validate_name(name: object, what: str = "name") -> str:
    """Return ``name`` if it is a safe identifier, else raise InvalidArgument naming the rule.

    Rule: a letter, then letters, digits or underscores, at most 63 bytes (PostgreSQL would
    silently truncate longer names, so they are refused instead), not starting with
    ``txqueue_`` or ``_txq`` (reserved for txqueue's own tables and columns).
    """
    if not isinstance(name, str):
        raise InvalidArgument(f"{what} must be a string, got {type(name).__name__}")
    if not _NAME_RULE.match(name):
        raise InvalidArgument(
            f"{what} {name!r} is not a valid identifier: use a letter followed by letters, "
            "digits or underscores"
        )
    if len(name.encode()) > NAME_MAX_BYTES:
        raise InvalidArgument(f"{what} {name!r} is longer than {NAME_MAX_BYTES} bytes")
    lowered = name.lower()
    if lowered.startswith(("txqueue_", "_txq")):
        raise InvalidArgument(f"{what} {name!r} uses the reserved prefix txqueue_/_txq")
    return name


@dataclass(frozen=True)
class Column:
    """One declared column. ``length`` is None for MAX or where no length applies."""

    name: str
    type: ColumnType
    nullable: bool = True
    length: int | None = None
    array: bool = False


@dataclass(frozen=True)
class Table:
    """A table or a queue. A queue's columns include ``Payload``; DeliverTime is implicit.

    ``parent``/``on_delete_cascade`` describe ``INTERLEAVE IN PARENT p [ON DELETE CASCADE]``:
    the parent's primary key must be a prefix of this table's primary key.
    """

    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    is_queue: bool = False
    parent: str | None = None
    on_delete_cascade: bool = False

    @cached_property
    def _by_name(self) -> dict[str, Column]:
        return {column.name.lower(): column for column in self.columns}

    def column(self, name: str) -> Column:
        """The column named ``name`` (case-insensitive, as in Spanner)."""
        found = self._by_name.get(name.lower()) if isinstance(name, str) else None
        if found is None:
            raise InvalidArgument(f"table {self.name} has no column {name!r}")
        return found

    def has_column(self, name: str) -> bool:
        """Whether the table has a column named ``name`` (case-insensitive)."""
        return name.lower() in self._by_name

    def with_column(self, column: Column) -> Table:
        """This table with ``column`` added last (ALTER TABLE … ADD COLUMN)."""
        return replace(self, columns=(*self.columns, column))

    @cached_property
    def key_columns(self) -> tuple[Column, ...]:
        return tuple(self.column(name) for name in self.primary_key)

    @cached_property
    def payload_column(self) -> Column:
        """The queue's payload column (declared as Payload/payload)."""
        return self.column("Payload")

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["columns"] = [dict(c, type=c["type"].value) for c in data["columns"]]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Table:
        columns = tuple(
            Column(
                name=c["name"],
                type=ColumnType(c["type"]),
                nullable=c["nullable"],
                length=c["length"],
                array=c.get("array", False),
            )
            for c in data["columns"]
        )
        return cls(
            name=data["name"],
            columns=columns,
            primary_key=tuple(data["primary_key"]),
            is_queue=data["is_queue"],
            parent=data["parent"],
            on_delete_cascade=data["on_delete_cascade"],
        )


@dataclass(frozen=True)
class ApplicationTable(Table):
    """A table (or view) txqueue did not create, the application's own, as the engine's
    catalog describes it: its columns mapped to the nearest Spanner type, and each column's
    type as the engine spells it in ``engine_types`` (same order as ``columns``)."""

    engine_types: tuple[str, ...] = ()
    is_view: bool = False


DELIVER_TIME = {Dialect.GOOGLESQL: "DeliverTime", Dialect.POSTGRESQL: "deliver_time"}


@dataclass(frozen=True)
class Index:
    """CREATE [UNIQUE] INDEX name ON table (columns)."""

    name: str
    table: str
    columns: tuple[str, ...]
    unique: bool = False
    descending: tuple[bool, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Index:
        return cls(
            name=data["name"],
            table=data["table"],
            columns=tuple(data["columns"]),
            unique=data["unique"],
            descending=tuple(data["descending"]),
        )


@dataclass(frozen=True)
class CreateTable:
    table: Table
    if_not_exists: bool = False


@dataclass(frozen=True)
class DropTable:
    name: str
    is_queue: bool
    if_exists: bool = False


@dataclass(frozen=True)
class CreateIndex:
    index: Index
    if_not_exists: bool = False


@dataclass(frozen=True)
class DropIndex:
    name: str
    if_exists: bool = False


@dataclass(frozen=True)
class AddColumn:
    """ALTER TABLE table ADD COLUMN column, when the table lacks it (a nullable column only).

    Not parsed from user DDL: txqueue gives its own tables the columns a newer version
    added (`ensure_internal_tables`), so a database made by an older one keeps working.
    """

    table: str
    column: Column

    def __post_init__(self) -> None:
        if not self.column.nullable:
            raise InvalidArgument(
                f"column {self.column.name} added to {self.table} must be nullable"
            )


DdlStatement = CreateTable | DropTable | CreateIndex | DropIndex | AddColumn
#: Tables (queues included) and indexes by lower-cased name.
Catalog = tuple[dict[str, Table], dict[str, Index]]


def check_reserved_names(statements: Iterable[DdlStatement], prefix: str, engine_name: str) -> None:
    """InvalidArgument, before anything is applied, for a table, queue or index that
    ``statements`` would create under a name starting with ``prefix`` (in any case), which
    the engine called ``engine_name`` keeps for its own objects (its traits say which)."""
    for statement in statements:
        if isinstance(statement, CreateTable):
            what = "queue" if statement.table.is_queue else "table"
            name = statement.table.name
        elif isinstance(statement, CreateIndex):
            what, name = "index", statement.index.name
        else:
            continue
        if name.lower().startswith(prefix):
            raise InvalidArgument(
                f"{what} name {name!r} starts with {prefix!r}, which {engine_name} reserves "
                "for its own objects (in any case): choose another name"
            )


def catalog_from_rows(rows: Any) -> Catalog:
    """Tables and indexes by lower-cased name, from catalog rows ``(kind, definition JSON)``."""
    import json

    tables: dict[str, Table] = {}
    indexes: dict[str, Index] = {}
    for kind, definition in rows:
        data = json.loads(definition)
        if kind == "index":
            index = Index.from_json(data)
            indexes[index.name.lower()] = index
        else:
            table = Table.from_json(data)
            tables[table.name.lower()] = table
    return tables, indexes
