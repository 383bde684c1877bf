"""Every SQL statement the SQLite driver runs, built once per table from its schema.

Identifiers come from validated schema names and are always double-quoted; values are always
bound parameters. Timestamps are INTEGER microseconds since the Unix epoch (exact, cheap to
compare, and the hidden-state arithmetic stays in integers).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from txqueue.core.leases import LOCATOR_SEPARATOR, MAX_BACKOFF_EXPONENT, MAX_BACKOFF_SECONDS
from txqueue.core.lengths import constraint_name, limited
from txqueue.core.schema import Column, ColumnType, Index, Table
from txqueue.drivers.ddl import create_index as index_ddl

__all__ = ["NOW_MICROS", "QueueStatements", "add_column", "create_index", "create_table", "quote"]

#: The hidden column holding the W3C trace context of the send (NULL for plain SQL).
TRACE_CONTEXT = "_txq_trace_context"

#: SQLite's clock in µs since the epoch (millisecond resolution), for column defaults.
NOW_MICROS = "(CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER))"

CATALOG = (
    "CREATE TABLE IF NOT EXISTS txqueue_settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS txqueue_objects ("
    " name TEXT PRIMARY KEY, kind TEXT NOT NULL, definition TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS txqueue_dead_letters ("
    " queue TEXT NOT NULL, key TEXT NOT NULL, payload TEXT NOT NULL,"
    " attempts INTEGER NOT NULL, last_error TEXT NOT NULL,"
    " first_failure INTEGER NOT NULL, last_failure INTEGER NOT NULL,"
    " PRIMARY KEY (queue, key))",
    "CREATE TABLE IF NOT EXISTS txqueue_ledger ("
    f" key TEXT PRIMARY KEY, recorded_at INTEGER NOT NULL DEFAULT {NOW_MICROS})",
    # One row per paused queue (lower-cased name): its receives lease nothing.
    "CREATE TABLE IF NOT EXISTS txqueue_paused (queue TEXT PRIMARY KEY)",
)

_TYPES = {
    ColumnType.INT64: "INTEGER",
    ColumnType.FLOAT64: "REAL",
    ColumnType.FLOAT32: "REAL",
    ColumnType.BOOL: "INTEGER",
    ColumnType.STRING: "TEXT",
    ColumnType.BYTES: "BLOB",
    ColumnType.TIMESTAMP: "INTEGER",
    ColumnType.DATE: "TEXT",
    ColumnType.JSON: "TEXT",
    ColumnType.NUMERIC: "TEXT",
}


def quote(name: str) -> str:
    """Quote an identifier (names are validated, so this never needs escaping beyond quotes)."""
    return '"' + name.replace('"', '""') + '"'


def _column(column: Column) -> str:
    kind = "TEXT" if column.array else _TYPES[column.type]
    return f"{quote(column.name)} {kind}{'' if column.nullable else ' NOT NULL'}{_length(column)}"


def _length(column: Column) -> str:
    """The named CHECK holding a declared length: SQLite's length() counts the characters
    of text and the bytes of a blob, so BYTES(n) measures the value as a blob."""
    if not limited(column):
        return ""
    name = quote(column.name)
    measured = name if column.type is ColumnType.STRING else f"CAST({name} AS BLOB)"
    check = f"length({measured}) <= {column.length}"
    return f" CONSTRAINT {quote(constraint_name(column))} CHECK ({check})"


def add_column(table: Table, column: Column) -> str:
    """ALTER TABLE … ADD COLUMN for a nullable column."""
    return f"ALTER TABLE {quote(table.name)} ADD COLUMN {_column(column)}"


def create_table(table: Table, deliver_time: str, parent: Table | None) -> list[str]:
    """CREATE TABLE (and, for queues, the hidden state and ready index) for ``table``."""
    parts = [_column(c) for c in table.columns]
    if table.is_queue:
        parts += [
            f"{quote(deliver_time)} INTEGER NOT NULL DEFAULT {NOW_MICROS}",
            "_txq_ready_at INTEGER",
            "_txq_lease_expiration INTEGER",
            "_txq_lease_token TEXT",
            "_txq_delivery_count INTEGER NOT NULL DEFAULT 0",
            "_txq_last_error TEXT",
            "_txq_first_failure INTEGER",
            "_txq_last_failure INTEGER",
            f"{TRACE_CONTEXT} TEXT",
        ]
    parts.append(f"PRIMARY KEY ({', '.join(quote(k) for k in table.primary_key)})")
    if parent is not None:
        own = ", ".join(quote(k) for k in table.primary_key[: len(parent.primary_key)])
        theirs = ", ".join(quote(k) for k in parent.primary_key)
        action = " ON DELETE CASCADE" if table.on_delete_cascade else ""
        parts.append(f"FOREIGN KEY ({own}) REFERENCES {quote(parent.name)} ({theirs}){action}")
    statements = [f"CREATE TABLE {quote(table.name)} ({', '.join(parts)})"]
    if table.is_queue:
        ready = f"coalesce(_txq_ready_at, {quote(deliver_time)})"
        statements += [
            f"CREATE INDEX {quote('_txq_ready_' + table.name)} ON {quote(table.name)} ({ready})",
        ]
    if parent is not None:
        child_key = ", ".join(quote(k) for k in table.primary_key[: len(parent.primary_key)])
        statements.append(
            f"CREATE INDEX {quote('_txq_parent_' + table.name)} ON {quote(table.name)} ({child_key})"
        )
    return statements


def create_index(index: Index) -> str:
    """CREATE [UNIQUE] INDEX for a user index."""
    return index_ddl(index, quote)


@dataclass(frozen=True)
class QueueStatements:
    """The queue operations of one queue table."""

    receive: str
    next_ready: str
    renew: str
    release: str
    send: str
    ack: str
    exists: str
    counts: str
    dead_letter: str
    trace: str
    #: one message's lease expiration (µs, NULL when none), by key
    lease_of: str
    delete_one: str
    #: set a message's deliver time, dropping its backoff and any lease
    make_ready: str
    #: the failure history and delivery count of the message a live lease holds
    failures: str


def not_paused(table: Table) -> str:
    """SQL true while ``table`` is not paused: a constant term of the statement it is in,
    which SQLite evaluates once, before the scan (one primary-key probe, no extra query)."""
    name = table.name.lower().replace("'", "''")
    return f"NOT EXISTS (SELECT 1 FROM txqueue_paused WHERE queue = '{name}')"


def backoff_micros(count: str) -> str:
    """SQL for ``core.leases.redelivery_backoff(count)`` in µs: the delay once the lease
    being taken or renewed (the ``count``-th) expires."""
    exponent = f"min(max({count} - 1, 0), {MAX_BACKOFF_EXPONENT})"
    return f"(min(1 << {exponent}, {MAX_BACKOFF_SECONDS}) * 1000000)"


@lru_cache(maxsize=512)
def queue_statements(table: Table, deliver_time: str) -> QueueStatements:
    """Build (once) the SQL for the queue operations of ``table``."""
    name = quote(table.name)
    keys = [quote(k) for k in table.primary_key]
    key_match = " AND ".join(f"{k} = ?" for k in keys)
    payload = quote(table.payload_column.name)
    deliver = quote(deliver_time)
    ready = f"coalesce(_txq_ready_at, {deliver})"
    returning = ", ".join([*keys, payload, deliver])
    return QueueStatements(
        # :expiration and :now are µs; :token is the expiration and random part of the token
        # (core.leases), drawn once per statement; the rowid makes each row's token its own.
        receive=(
            f"UPDATE {name} SET"
            f" _txq_lease_token = :token || printf('{LOCATOR_SEPARATOR}%x', rowid),"
            " _txq_lease_expiration = :expiration,"
            f" _txq_ready_at = :expiration + {backoff_micros('_txq_delivery_count + 1')},"
            " _txq_delivery_count = _txq_delivery_count + 1"
            f" WHERE rowid IN (SELECT rowid FROM {name} WHERE {ready} <= :now"
            f" AND {not_paused(table)} ORDER BY {ready} LIMIT :limit)"
            f" RETURNING {returning}, _txq_lease_expiration, _txq_lease_token,"
            f" _txq_delivery_count, {TRACE_CONTEXT}"
        ),
        # A paused queue has nothing to become ready: its receivers wait to be woken.
        next_ready=f"SELECT min({ready}) FROM {name} WHERE {not_paused(table)}",
        renew=(
            f"UPDATE {name} SET _txq_lease_token = :new_token,"
            " _txq_lease_expiration = :expiration,"
            f" _txq_ready_at = :expiration + {backoff_micros('_txq_delivery_count')}"
            " WHERE rowid = :rowid AND _txq_lease_token = :old_token"
            " AND _txq_lease_expiration > :now"
            " RETURNING _txq_lease_expiration"
        ),
        release=(
            f"UPDATE {name} SET _txq_lease_token = NULL, _txq_lease_expiration = NULL,"
            " _txq_ready_at = :ready_at,"
            " _txq_last_error = coalesce(:error, _txq_last_error),"
            " _txq_first_failure = CASE WHEN :error IS NULL THEN _txq_first_failure"
            " ELSE coalesce(_txq_first_failure, :now) END,"
            " _txq_last_failure = CASE WHEN :error IS NULL THEN _txq_last_failure ELSE :now END"
            " WHERE rowid = :rowid AND _txq_lease_token = :token"
            " AND _txq_lease_expiration > :now"
        ),
        send=(
            f"INSERT INTO {name} ({', '.join([*keys, payload, deliver])})"
            f" VALUES ({', '.join('?' * (len(keys) + 1))}, coalesce(?, {NOW_MICROS}))"
            " ON CONFLICT DO NOTHING"
        ),
        # Without a token (NULL) the key alone decides; with one, only its live lease may ack.
        ack=(
            f"DELETE FROM {name} WHERE {key_match} AND (? IS NULL"
            " OR _txq_lease_token = ? AND _txq_lease_expiration > ?)"
        ),
        exists=f"SELECT 1 FROM {name} WHERE {key_match}",
        lease_of=f"SELECT _txq_lease_expiration FROM {name} WHERE {key_match}",
        delete_one=f"DELETE FROM {name} WHERE {key_match}",
        make_ready=(
            f"UPDATE {name} SET {deliver} = ?, _txq_ready_at = NULL,"
            f" _txq_lease_token = NULL, _txq_lease_expiration = NULL WHERE {key_match}"
        ),
        trace=f"UPDATE {name} SET {TRACE_CONTEXT} = ? WHERE {key_match}",
        dead_letter=(
            f"DELETE FROM {name} WHERE {key_match}"
            " AND _txq_lease_token = ? AND _txq_lease_expiration > ?"
            f" RETURNING {payload}, _txq_delivery_count, _txq_first_failure, _txq_last_error"
        ),
        failures=(
            f"SELECT _txq_last_error, _txq_delivery_count FROM {name}"
            " WHERE rowid = :rowid AND _txq_lease_token = :token"
            " AND _txq_lease_expiration > :now"
        ),
        counts=(
            "SELECT"
            f" sum(CASE WHEN {ready} <= :now AND _txq_lease_expiration IS NULL"
            f" OR {ready} <= :now AND _txq_lease_expiration <= :now THEN 1 ELSE 0 END),"
            " sum(CASE WHEN _txq_lease_expiration > :now THEN 1 ELSE 0 END),"
            f" sum(CASE WHEN {ready} > :now AND coalesce(_txq_lease_expiration, 0) <= :now"
            " THEN 1 ELSE 0 END),"
            f" min(CASE WHEN {ready} <= :now THEN {deliver} END)"
            f" FROM {name}"
        ),
    )
