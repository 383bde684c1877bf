"""Every SQL and DDL statement the Spanner driver runs (GoogleSQL), built from the schema.

A queue is emulated on a plain table (the emulator, and databases without native queues):
the declared columns, ``DeliverTime`` defaulting to the commit's ``CURRENT_TIMESTAMP()``, the
hidden lease state below, a stored generated ``txqueue_ready`` column (when the message is
receivable: ``COALESCE(txqueue_ready_at, DeliverTime)``), an index on it that receives read
in order, and a NULL_FILTERED index on the lease token that renew, release and ack find a
lease by. Names are validated and always quoted with backticks; values are always bound
parameters (``@name``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from txqueue.core.schema import Column, ColumnType, Index, Table
from txqueue.drivers.ddl import create_index as index_ddl

__all__ = [
    "CATALOG",
    "CATALOG_TABLES",
    "DELIVERY_COUNT",
    "FIRST_FAILURE",
    "LAST_ERROR",
    "LAST_FAILURE",
    "LEASE_EXPIRATION",
    "LEASE_TOKEN",
    "READY",
    "READY_AT",
    "TRACE_CONTEXT",
    "QueueStatements",
    "create_index",
    "create_table",
    "drop_table",
    "hidden_indexes",
    "queue_statements",
    "quote",
    "spanner_type",
]

# Hidden columns of a queue table. Spanner names start with a letter, so they carry the
# ``txqueue_`` prefix that txqueue's SQL keeps from applications.
READY_AT = "txqueue_ready_at"
LEASE_EXPIRATION = "txqueue_lease_expiration"
LEASE_TOKEN = "txqueue_lease_token"
DELIVERY_COUNT = "txqueue_delivery_count"
LAST_ERROR = "txqueue_last_error"
FIRST_FAILURE = "txqueue_first_failure"
LAST_FAILURE = "txqueue_last_failure"
TRACE_CONTEXT = "txqueue_trace_context"
#: Stored generated: when the message is receivable (its release or backoff, else DeliverTime).
READY = "txqueue_ready"

CATALOG_TABLES = ("txqueue_settings", "txqueue_objects", "txqueue_dead_letters", "txqueue_ledger")
CATALOG = (
    "CREATE TABLE txqueue_settings (name STRING(MAX) NOT NULL, value STRING(MAX) NOT NULL)"
    " PRIMARY KEY (name)",
    "CREATE TABLE txqueue_objects (name STRING(MAX) NOT NULL, kind STRING(MAX) NOT NULL,"
    " definition STRING(MAX) NOT NULL) PRIMARY KEY (name)",
    "CREATE TABLE txqueue_dead_letters (queue STRING(MAX) NOT NULL, key STRING(MAX) NOT NULL,"
    " payload STRING(MAX) NOT NULL, attempts INT64 NOT NULL, last_error STRING(MAX) NOT NULL,"
    " first_failure TIMESTAMP NOT NULL, last_failure TIMESTAMP NOT NULL)"
    " PRIMARY KEY (queue, key)",
    "CREATE TABLE txqueue_ledger (key STRING(MAX) NOT NULL, recorded_at TIMESTAMP NOT NULL"
    " OPTIONS (allow_commit_timestamp = true)) PRIMARY KEY (key)",
)

_TYPES = {
    ColumnType.INT64: "INT64",
    ColumnType.FLOAT64: "FLOAT64",
    ColumnType.FLOAT32: "FLOAT32",
    ColumnType.BOOL: "BOOL",
    ColumnType.STRING: "STRING",
    ColumnType.BYTES: "BYTES",
    ColumnType.TIMESTAMP: "TIMESTAMP",
    ColumnType.DATE: "DATE",
    ColumnType.JSON: "JSON",
    ColumnType.NUMERIC: "NUMERIC",
}


def quote(name: str) -> str:
    """Quote an identifier (names are validated: letters, digits and underscores)."""
    return "`" + name.replace("`", "") + "`"


def spanner_type(column: Column) -> str:
    """The column's GoogleSQL type: STRING and BYTES keep their declared length."""
    kind = _TYPES[column.type]
    if column.type in (ColumnType.STRING, ColumnType.BYTES):
        kind += f"({column.length if column.length is not None else 'MAX'})"
    return f"ARRAY<{kind}>" if column.array else kind


def _column(column: Column) -> str:
    return f"{quote(column.name)} {spanner_type(column)}{'' if column.nullable else ' NOT NULL'}"


def hidden_indexes(table: Table) -> tuple[str, str]:
    """The names of a queue's ready index and lease-token index."""
    return f"txqueue_ready_{table.name}", f"txqueue_lease_{table.name}"


def create_table(table: Table, deliver_time: str) -> list[str]:
    """CREATE TABLE (and, for a queue, its hidden state and indexes) for ``table``."""
    parts = [_column(c) for c in table.columns]
    if table.is_queue:
        parts += [
            f"{quote(deliver_time)} TIMESTAMP NOT NULL DEFAULT (CURRENT_TIMESTAMP())",
            f"{READY_AT} TIMESTAMP",
            f"{LEASE_EXPIRATION} TIMESTAMP",
            f"{LEASE_TOKEN} STRING(64)",
            f"{DELIVERY_COUNT} INT64 NOT NULL DEFAULT (0)",
            f"{LAST_ERROR} STRING(MAX)",
            f"{FIRST_FAILURE} TIMESTAMP",
            f"{LAST_FAILURE} TIMESTAMP",
            f"{TRACE_CONTEXT} STRING(MAX)",
            f"{READY} TIMESTAMP AS (COALESCE({READY_AT}, {quote(deliver_time)})) STORED",
        ]
    keys = ", ".join(quote(k) for k in table.primary_key)
    sql = f"CREATE TABLE {quote(table.name)} ({', '.join(parts)}) PRIMARY KEY ({keys})"
    if table.parent:
        action = " ON DELETE CASCADE" if table.on_delete_cascade else " ON DELETE NO ACTION"
        sql += f", INTERLEAVE IN PARENT {quote(table.parent)}{action}"
    statements = [sql]
    if table.is_queue:
        ready, lease = hidden_indexes(table)
        statements += [
            f"CREATE INDEX {quote(ready)} ON {quote(table.name)} ({READY})",
            f"CREATE NULL_FILTERED INDEX {quote(lease)} ON {quote(table.name)} ({LEASE_TOKEN})",
        ]
    return statements


def drop_table(table: Table, indexes: list[str]) -> list[str]:
    """DROP the user ``indexes`` on ``table``, its hidden indexes, then the table."""
    own = list(hidden_indexes(table)) if table.is_queue else []
    return [f"DROP INDEX {quote(name)}" for name in [*indexes, *own]] + [
        f"DROP TABLE {quote(table.name)}"
    ]


def create_index(index: Index) -> str:
    """CREATE [UNIQUE] INDEX for a user index."""
    return index_ddl(index, quote)


@dataclass(frozen=True)
class QueueStatements:
    """The queries of one queue table (writes are mutations, built by the driver)."""

    #: the ready messages, oldest first, and the statement's own time (@now or the clock's)
    receive: str
    #: the live leases named by @tokens, with each row's key and delivery count
    leases: str
    #: one message by key (@k0, @k1, ...) with its lease
    lease_of: str
    #: the earliest ready time and the clock
    next_ready: str
    counts: str
    #: one message by key with what a dead letter keeps
    dead_letter: str


def now_expression() -> str:
    """The pinned time, else the statement's own ``CURRENT_TIMESTAMP()``."""
    return "COALESCE(@now, CURRENT_TIMESTAMP())"


@lru_cache(maxsize=512)
def queue_statements(table: Table, deliver_time: str) -> QueueStatements:
    """Build (once) the queries of the queue operations of ``table``."""
    name = quote(table.name)
    ready_index, _ = hidden_indexes(table)
    keys = [quote(k) for k in table.primary_key]
    key_list = ", ".join(keys)
    key_match = " AND ".join(f"{k} = @k{i}" for i, k in enumerate(keys))
    payload = quote(table.payload_column.name)
    deliver = quote(deliver_time)
    now = now_expression()
    return QueueStatements(
        receive=(
            f"SELECT {key_list}, {payload}, {deliver}, {DELIVERY_COUNT}, {TRACE_CONTEXT}, {now}"
            f" FROM {name}@{{FORCE_INDEX={quote(ready_index)}}}"
            f" WHERE {READY} <= {now} ORDER BY {READY} LIMIT @limit"
        ),
        leases=(
            f"SELECT {key_list}, {LEASE_TOKEN}, {DELIVERY_COUNT}, {FIRST_FAILURE} FROM {name}"
            f" WHERE {LEASE_TOKEN} IN UNNEST(@tokens) AND {LEASE_EXPIRATION} > @now"
        ),
        lease_of=(f"SELECT {LEASE_TOKEN}, {LEASE_EXPIRATION}, {now} FROM {name} WHERE {key_match}"),
        next_ready=f"SELECT MIN({READY}), {now} FROM {name}",
        counts=(
            "SELECT"
            f" COUNTIF({READY} <= {now} AND ({LEASE_EXPIRATION} IS NULL"
            f" OR {LEASE_EXPIRATION} <= {now})),"
            f" COUNTIF({LEASE_EXPIRATION} > {now}),"
            f" COUNTIF({READY} > {now} AND ({LEASE_EXPIRATION} IS NULL"
            f" OR {LEASE_EXPIRATION} <= {now})),"
            f" MIN(IF({READY} <= {now}, {deliver}, NULL)), {now}"
            f" FROM {name}"
        ),
        dead_letter=(
            f"SELECT {payload}, {DELIVERY_COUNT}, {FIRST_FAILURE}, {LEASE_TOKEN},"
            f" {LEASE_EXPIRATION} FROM {name} WHERE {key_match}"
        ),
    )
