"""Every SQL and DDL statement the Spanner driver runs (GoogleSQL), built from the schema.

A queue is emulated on a plain table (the emulator, and databases without native queues):
the declared columns, ``DeliverTime`` defaulting to the commit's ``CURRENT_TIMESTAMP()``, the
hidden lease state below, a stored generated ``txqueue_ready`` column (when the message is
receivable: ``COALESCE(txqueue_ready_at, DeliverTime)``), a stored generated shard column (a
hash of the primary key into ``SHARDS`` values) leading the ready index, so that sends spread
over ``SHARDS`` key ranges instead of all landing at the end of one (Spanner's hot spot of a
monotonically increasing index key), a NULL_FILTERED index on the lease token that renew,
release and ack find a lease by, and an insert-only change stream that wakes receivers. Names are validated and always quoted with backticks; values are always bound
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
    "SHARD",
    "SHARDS",
    "TRACE_CONTEXT",
    "QueueStatements",
    "add_column",
    "create_index",
    "create_table",
    "drop_table",
    "hidden_indexes",
    "hidden_objects",
    "queue_statements",
    "quote",
    "spanner_type",
    "wake_stream",
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
#: Stored generated: the message's shard of the ready index (a hash of its primary key).
SHARD = "txqueue_shard"
#: Shards of a queue's ready index. Eight spreads sends over eight key ranges (splits) while
#: a receive's first read stays eight short range reads; fixed, because changing it would
#: rewrite every stored row of every queue.
SHARDS = 8

CATALOG_TABLES = (
    "txqueue_settings",
    "txqueue_objects",
    "txqueue_dead_letters",
    "txqueue_ledger",
    "txqueue_paused",
    "txqueue_commits",
)
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
    # One row per paused queue (lower-cased name): its receives lease nothing.
    "CREATE TABLE txqueue_paused (queue STRING(MAX) NOT NULL) PRIMARY KEY (queue)",
    # Commit markers and the resolver's fences (drivers/spanner/outcome.py); Spanner's row
    # deletion policy forgets them a day after their commit.
    "CREATE TABLE txqueue_commits (id STRING(36) NOT NULL, committed_at TIMESTAMP NOT NULL"
    " OPTIONS (allow_commit_timestamp = true), resolved BOOL) PRIMARY KEY (id),"
    " ROW DELETION POLICY (OLDER_THAN(committed_at, INTERVAL 1 DAY))",
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


def wake_stream(table: Table) -> str:
    """The name of a queue's insert-only change stream (``drivers/spanner/wakeup.py``)."""
    return f"txqueue_wake_{table.name}"


def hidden_objects(table: Table) -> list[tuple[str, str]]:
    """A queue's hidden schema objects as (kind, name), in creation order."""
    ready, lease = hidden_indexes(table)
    return [("INDEX", ready), ("INDEX", lease), ("CHANGE STREAM", wake_stream(table))]


def _key_text(column: Column) -> str:
    """A key column as deterministic text, for the shard's hash (NULL as empty)."""
    name = quote(column.name)
    text = {
        ColumnType.STRING: name,
        ColumnType.BYTES: f"TO_BASE64({name})",
        ColumnType.TIMESTAMP: f"CAST(UNIX_MICROS({name}) AS STRING)",
        ColumnType.DATE: f"CAST(UNIX_DATE({name}) AS STRING)",
    }.get(column.type, f"CAST({name} AS STRING)")
    return f"IFNULL({text}, '')"


def shard_expression(table: Table) -> str:
    """The shard of a row, 0 to SHARDS - 1, from its primary key (MOD first: no overflow)."""
    parts = ", '/', ".join(_key_text(c) for c in table.key_columns)
    return f"ABS(MOD(FARM_FINGERPRINT(CONCAT({parts})), {SHARDS}))"


def add_column(table: Table, column: Column) -> str:
    """ALTER TABLE … ADD COLUMN for a nullable column."""
    return f"ALTER TABLE {quote(table.name)} ADD COLUMN {_column(column)}"


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
            f"{SHARD} INT64 AS ({shard_expression(table)}) STORED",
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
            f"CREATE INDEX {quote(ready)} ON {quote(table.name)} ({SHARD}, {READY})",
            f"CREATE NULL_FILTERED INDEX {quote(lease)} ON {quote(table.name)} ({LEASE_TOKEN})",
            # keys only, inserts only: a receiver needs to know that something was sent
            f"CREATE CHANGE STREAM {quote(wake_stream(table))} FOR {quote(table.name)}()"
            " OPTIONS (exclude_update = true, exclude_delete = true)",
        ]
    return statements


def drop_table(table: Table, indexes: list[str]) -> list[str]:
    """DROP the user ``indexes`` on ``table``, its hidden objects, then the table."""
    own = hidden_objects(table) if table.is_queue else []
    return (
        [f"DROP INDEX {quote(name)}" for name in indexes]
        + [f"DROP {kind} {quote(name)}" for kind, name in own]
        + [f"DROP TABLE {quote(table.name)}"]
    )


def create_index(index: Index) -> str:
    """CREATE [UNIQUE] INDEX for a user index."""
    return index_ddl(index, quote)


@dataclass(frozen=True)
class QueueStatements:
    """The queries of one queue table (writes are mutations, built by the driver)."""

    #: the ready messages, oldest first, and the statement's own time (@now or the clock's):
    #: the oldest of the heads of every shard but @skip
    receive: str
    #: the same from one shard (@shard)
    receive_shard: str
    #: the live leases named by @tokens, with each row's key and delivery count
    leases: str
    #: one message by key (@k0, @k1, ...) with its lease
    lease_of: str
    #: the earliest ready time and the clock
    next_ready: str
    counts: str
    #: one message by key with what a dead letter keeps
    dead_letter: str


def not_paused(table: Table) -> str:
    """SQL true while ``table`` is not paused (a key lookup in ``txqueue_paused``, read in
    the receive's own statement, so a pause and a receive conflict instead of crossing)."""
    name = table.name.lower().replace("\\", "\\\\").replace("'", "\\'")
    return f"NOT EXISTS (SELECT 1 FROM txqueue_paused WHERE queue = '{name}')"


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
    selected = f"{key_list}, {payload}, {deliver}, {DELIVERY_COUNT}, {TRACE_CONTEXT}"
    indexed = f"{name}@{{FORCE_INDEX={quote(ready_index)}}}"
    # equal ready times in key order, as on the other engines (the index holds the
    # primary key after the shard and ready columns, so this is still its own order)
    oldest = f"ORDER BY {READY}, {key_list} LIMIT @limit"
    heads = " UNION ALL ".join(
        f"(SELECT {selected}, {READY}, {SHARD} FROM {indexed}"
        f" WHERE {SHARD} = {shard} AND {READY} <= {now} {oldest})"
        for shard in range(SHARDS)
    )
    firsts = " UNION ALL ".join(
        f"(SELECT {READY} FROM {indexed} WHERE {SHARD} = {shard} ORDER BY {READY} LIMIT 1)"
        for shard in range(SHARDS)
    )
    return QueueStatements(
        receive=(
            f"SELECT {selected}, {now} FROM ({heads})"
            f" WHERE {SHARD} != @skip AND {not_paused(table)} {oldest}"
        ),
        receive_shard=(
            f"SELECT {selected}, {now} FROM {indexed} WHERE {SHARD} = @shard"
            f" AND {READY} <= {now} AND {not_paused(table)} {oldest}"
        ),
        leases=(
            f"SELECT {key_list}, {LEASE_TOKEN}, {DELIVERY_COUNT}, {FIRST_FAILURE}, {LAST_ERROR}"
            f" FROM {name}"
            f" WHERE {LEASE_TOKEN} IN UNNEST(@tokens) AND {LEASE_EXPIRATION} > @now"
        ),
        lease_of=(f"SELECT {LEASE_TOKEN}, {LEASE_EXPIRATION}, {now} FROM {name} WHERE {key_match}"),
        # Paused: MIN of no row is NULL, nothing becomes ready.
        next_ready=f"SELECT MIN({READY}), {now} FROM ({firsts}) WHERE {not_paused(table)}",
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
            f" {LEASE_EXPIRATION}, {LAST_ERROR} FROM {name} WHERE {key_match}"
        ),
    )


def messages_by_key(table: Table, deliver_time: str, count: int) -> str:
    """The keys of the messages named by ``count`` keys (``@k{i}_{n}``: key column i of
    the n-th key) with their lease expirations, and the time (@now or the clock's)."""
    keys = [quote(k) for k in table.primary_key]
    match = " OR ".join(
        "(" + " AND ".join(f"{k} = @k{i}_{n}" for i, k in enumerate(keys)) + ")"
        for n in range(count)
    )
    return (
        f"SELECT {', '.join(keys)}, {LEASE_EXPIRATION}, {now_expression()}"
        f" FROM {quote(table.name)} WHERE {match}"
    )
