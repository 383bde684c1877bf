"""How the Spanner driver spells its SQL in each of Cloud Spanner's two dialects.

A Spanner database speaks GoogleSQL or Spanner's PostgreSQL dialect, fixed when it was
created. The driver writes every statement once (``statements``, ``catalog``, ``leasing``…)
and asks a ``Spelling`` for what differs: quoting, type names, function names, the forms of
generated columns, defaults, NULL-filtered indexes, change-stream options, INTERLEAVE and
row deletion, index hints, array membership and the change stream's read function.

Parameters are written ``@name`` in both; ``bind`` turns them into ``$1, $2, …`` for the
PostgreSQL dialect, whose client binds ``$n`` to the parameter named ``pn``. Mutations are
the same in both dialects (Spanner's names are case-insensitive in mutations).

The spelling of a transaction is carried by the client's transaction or snapshot object
(``attach``), as ``outcome.note_writes`` carries its note: every query reads it there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from txqueue.core.schema import Column, ColumnType, Dialect
from txqueue.drivers.spanner.codec import replace_markers

__all__ = ["GOOGLESQL", "POSTGRESQL", "Spelling", "attach", "bind", "spelling_for", "spelling_of"]

_MARKER = r"@([A-Za-z_][A-Za-z0-9_]*)"
#: The buckets of a key hash a PostgreSQL-dialect sample takes a share of.
SAMPLE_BUCKETS = 1_000_000


@dataclass(frozen=True)
class Spelling:
    """The words of one dialect (see the module's doc)."""

    dialect: Dialect
    #: the identifier quote character
    quote_character: str
    #: the INFORMATION_SCHEMA schema of the application's tables
    schema: str
    #: the statement's own time
    now: str
    #: type names, by column type; ``{n}`` takes the length of STRING and BYTES
    types: tuple[tuple[ColumnType, str], ...]
    #: a length-less STRING/BYTES (``MAX``)
    unbounded: str
    #: an array of a type (``{}`` takes the element type)
    array: str
    fingerprint: str
    #: a commit-timestamp column's type and options
    commit_timestamp: str

    @property
    def postgresql(self) -> bool:
        return self.dialect is Dialect.POSTGRESQL

    def quote(self, name: str) -> str:
        """Quote an identifier (names are validated: letters, digits and underscores)."""
        q = self.quote_character
        return q + name.replace(q, "") + q

    def type_name(self, column: Column) -> str:
        """The column's type: STRING and BYTES keep their declared length."""
        kind = dict(self.types)[column.type]
        if "{n}" in kind:
            length = column.length
            if length is None:
                kind = kind.replace("({n})", self.unbounded)
            else:
                kind = kind.replace("{n}", str(length))
        return self.array.format(kind) if column.array else kind

    def column(self, column: Column) -> str:
        null = "" if column.nullable else " NOT NULL"
        return f"{self.quote(column.name)} {self.type_name(column)}{null}"

    def timestamp(self) -> str:
        return dict(self.types)[ColumnType.TIMESTAMP]

    def default(self, expression: str) -> str:
        return f"DEFAULT {expression}" if self.postgresql else f"DEFAULT ({expression})"

    def generated(self, name: str, kind: str, expression: str) -> str:
        """A stored generated column."""
        if self.postgresql:
            return f"{name} {kind} GENERATED ALWAYS AS ({expression}) STORED"
        return f"{name} {kind} AS ({expression}) STORED"

    def table(
        self,
        name: str,
        parts: list[str],
        keys: list[str],
        parent: str | None,
        cascade: bool,
        tail: str = "",
    ) -> str:
        """CREATE TABLE (or the ``tail`` of it) with its primary key and INTERLEAVE."""
        key = f"PRIMARY KEY ({', '.join(keys)})"
        interleave = ""
        if parent:
            action = " ON DELETE CASCADE" if cascade else " ON DELETE NO ACTION"
            interleave = f"INTERLEAVE IN PARENT {self.quote(parent)}{action}"
        if self.postgresql:
            sql = f"CREATE {tail or 'TABLE'} {self.quote(name)} ({', '.join([*parts, key])})"
            return f"{sql} {interleave}" if interleave else sql
        sql = f"CREATE {tail or 'TABLE'} {self.quote(name)} ({', '.join(parts)}) {key}"
        return f"{sql}, {interleave}" if interleave else sql

    def null_filtered_index(self, name: str, table: str, column: str) -> str:
        if self.postgresql:
            return (
                f"CREATE INDEX {self.quote(name)} ON {self.quote(table)} ({column})"
                f" WHERE {column} IS NOT NULL"
            )
        return f"CREATE NULL_FILTERED INDEX {self.quote(name)} ON {self.quote(table)} ({column})"

    def insert_stream(self, name: str, table: str) -> str:
        """An insert-only change stream of ``table`` (keys only)."""
        options = "exclude_update = true, exclude_delete = true"
        word = "WITH" if self.postgresql else "OPTIONS"
        return (
            f"CREATE CHANGE STREAM {self.quote(name)} FOR {self.quote(table)}() {word} ({options})"
        )

    def ttl(self, column: str) -> str:
        """The row deletion policy: a day after ``column``."""
        if self.postgresql:
            return f" TTL INTERVAL '1 day' ON {column}"
        return f", ROW DELETION POLICY (OLDER_THAN({column}, INTERVAL 1 DAY))"

    def force_index(self, table: str, index: str) -> str:
        """``table`` read through ``index`` (a table hint)."""
        if self.postgresql:
            return f"{self.quote(table)} /*@ FORCE_INDEX = {index} */"
        return f"{self.quote(table)}@{{FORCE_INDEX={self.quote(index)}}}"

    def in_array(self, expression: str, parameter: str) -> str:
        """``expression`` is one of the array parameter ``@parameter``."""
        if self.postgresql:
            return f"{expression} = ANY(@{parameter})"
        return f"{expression} IN UNNEST(@{parameter})"

    def key_text(self, column: Column) -> str:
        """A key column as deterministic text, for the shard's hash (NULL as empty)."""
        name = self.quote(column.name)
        if self.postgresql:
            text = {
                ColumnType.STRING: name,
                ColumnType.BYTES: f"CAST(spanner.farm_fingerprint({name}) AS varchar)",
                ColumnType.TIMESTAMP: f"CAST(EXTRACT(EPOCH FROM {name}) AS varchar)",
            }.get(column.type, f"CAST({name} AS varchar)")
        else:
            text = {
                ColumnType.STRING: name,
                ColumnType.BYTES: f"TO_BASE64({name})",
                ColumnType.TIMESTAMP: f"CAST(UNIX_MICROS({name}) AS STRING)",
                ColumnType.DATE: f"CAST(UNIX_DATE({name}) AS STRING)",
            }.get(column.type, f"CAST({name} AS STRING)")
        return f"COALESCE({text}, '')"

    def concat(self, parts: list[str]) -> str:
        if self.postgresql:
            return " || ".join(parts)
        return f"CONCAT({', '.join(parts)})"

    def sample(self, percent: float, key_hash: str) -> str:
        """What follows ``FROM table`` to read about ``percent`` of its rows, each with the
        same chance: ``TABLESAMPLE BERNOULLI``; in PostgreSQL, rows whose key hashes below
        the share (the emulator's PostgreSQL dialect fails on TABLESAMPLE)."""
        if self.postgresql:
            share = round(percent * SAMPLE_BUCKETS / 100)
            return f"AS sampled WHERE ABS(MOD({key_hash}, {SAMPLE_BUCKETS})) < {share}"
        return f"TABLESAMPLE BERNOULLI ({percent:.6f} PERCENT)"

    def read_stream(self, stream: str) -> str:
        """The query of one partition of a change stream (``wakeup``)."""
        if self.postgresql:
            return (
                f"SELECT * FROM spanner.read_json_{stream}(@start, @end, @token, @heartbeat, NULL)"
            )
        return (
            f"SELECT ChangeRecord FROM {self.quote('READ_' + stream)}(start_timestamp => @start,"
            " end_timestamp => @end, partition_token => @token,"
            " heartbeat_milliseconds => @heartbeat)"
        )


GOOGLESQL = Spelling(
    dialect=Dialect.GOOGLESQL,
    quote_character="`",
    schema="",
    now="CURRENT_TIMESTAMP()",
    types=(
        (ColumnType.INT64, "INT64"),
        (ColumnType.FLOAT64, "FLOAT64"),
        (ColumnType.FLOAT32, "FLOAT32"),
        (ColumnType.BOOL, "BOOL"),
        (ColumnType.STRING, "STRING({n})"),
        (ColumnType.BYTES, "BYTES({n})"),
        (ColumnType.TIMESTAMP, "TIMESTAMP"),
        (ColumnType.DATE, "DATE"),
        (ColumnType.JSON, "JSON"),
        (ColumnType.NUMERIC, "NUMERIC"),
    ),
    unbounded="(MAX)",
    array="ARRAY<{}>",
    fingerprint="FARM_FINGERPRINT",
    commit_timestamp="TIMESTAMP NOT NULL OPTIONS (allow_commit_timestamp = true)",
)

POSTGRESQL = Spelling(
    dialect=Dialect.POSTGRESQL,
    quote_character='"',
    schema="public",
    now="CURRENT_TIMESTAMP",
    types=(
        (ColumnType.INT64, "bigint"),
        (ColumnType.FLOAT64, "double precision"),
        (ColumnType.FLOAT32, "real"),
        (ColumnType.BOOL, "boolean"),
        (ColumnType.STRING, "varchar({n})"),
        (ColumnType.BYTES, "bytea"),
        (ColumnType.TIMESTAMP, "timestamptz"),
        (ColumnType.DATE, "date"),
        (ColumnType.JSON, "jsonb"),
        (ColumnType.NUMERIC, "numeric"),
    ),
    unbounded="",
    array="{}[]",
    fingerprint="spanner.farm_fingerprint",
    commit_timestamp="spanner.commit_timestamp NOT NULL",
)


def spelling_for(dialect: Dialect) -> Spelling:
    return POSTGRESQL if dialect is Dialect.POSTGRESQL else GOOGLESQL


def attach(transaction: Any, spelling: Spelling) -> Any:
    """Say that ``transaction`` (a client transaction or snapshot) speaks ``spelling``."""
    transaction.txqueue_spelling = spelling
    return transaction


def spelling_of(transaction: Any) -> Spelling:
    """The spelling ``attach`` gave ``transaction`` (GoogleSQL when none)."""
    found = getattr(transaction, "txqueue_spelling", None)
    return found if isinstance(found, Spelling) else GOOGLESQL


def bind(
    spelling: Spelling, sql: str, values: dict[str, Any] | None, types: dict[str, Any] | None
) -> tuple[str, dict[str, Any] | None, dict[str, Any] | None]:
    """``@name`` parameters as the dialect takes them: as they are in GoogleSQL, ``$n`` (and
    the values renamed ``pn``) in PostgreSQL. Markers inside quotes are left alone."""
    if not spelling.postgresql or "@" not in sql:
        return sql, values, types
    numbers: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        return f"${numbers.setdefault(match.group(2), len(numbers) + 1)}"

    sql_numbered = replace_markers(sql, _MARKER, number)
    if not numbers:
        return sql, values, types
    sql = sql_numbered
    renamed = {f"p{numbers[n]}": v for n, v in (values or {}).items() if n in numbers}
    kinds = {f"p{numbers[n]}": t for n, t in (types or {}).items() if n in numbers}
    return sql, renamed or None, kinds or None
