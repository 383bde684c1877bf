"""Every SQL and DDL statement the Spanner driver runs, built from the schema, written once
and spelled for the database's dialect (``spelling``: GoogleSQL or PostgreSQL).

A queue is emulated on a plain table (the emulator, and databases without native queues):
the declared columns, ``DeliverTime`` defaulting to the commit's ``CURRENT_TIMESTAMP()``, the
hidden lease state below, a stored generated ``txqueue_ready`` column (when the message is
receivable: ``COALESCE(txqueue_ready_at, DeliverTime)``), a stored generated shard column (a
hash of the primary key into ``SHARDS`` values) leading the ready index, so that sends spread
over ``SHARDS`` key ranges instead of all landing at the end of one (Spanner's hot spot of a
monotonically increasing index key), a NULL_FILTERED index on the lease token that renew,
release and ack find a lease by, and an insert-only change stream that wakes receivers.
Names are validated and always quoted (backticks, or double quotes in PostgreSQL); values
are always bound parameters (``@name``, which ``spelling.bind`` numbers for PostgreSQL).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from txqueue.core.schema import Column, ColumnType, Index, Table
from txqueue.drivers.ddl import create_index as index_ddl
from txqueue.drivers.spanner.spelling import GOOGLESQL, POSTGRESQL, Spelling

__all__ = [
    "CATALOG",
    "CATALOG_POSTGRESQL",
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
    "catalog_ddl",
    "count_if",
    "create_index",
    "create_table",
    "drop_table",
    "hidden_indexes",
    "hidden_objects",
    "key_hash",
    "key_matches",
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


def catalog_ddl(spelling: Spelling) -> tuple[str, ...]:
    """txqueue's own tables (``CATALOG_TABLES``, in that order) in ``spelling``'s dialect."""
    text = spelling.type_name(Column("", ColumnType.STRING))
    count = spelling.type_name(Column("", ColumnType.INT64))
    moment = spelling.timestamp()
    flag = spelling.type_name(Column("", ColumnType.BOOL))
    id36 = spelling.type_name(Column("", ColumnType.STRING, length=36))

    def table(name: str, columns: list[str], keys: list[str]) -> str:
        return spelling.table(name, columns, keys, None, False)

    return (
        table("txqueue_settings", [f"name {text} NOT NULL", f"value {text} NOT NULL"], ["name"]),
        table(
            "txqueue_objects",
            [f"name {text} NOT NULL", f"kind {text} NOT NULL", f"definition {text} NOT NULL"],
            ["name"],
        ),
        table(
            "txqueue_dead_letters",
            [
                f"queue {text} NOT NULL",
                f"key {text} NOT NULL",
                f"payload {text} NOT NULL",
                f"attempts {count} NOT NULL",
                f"last_error {text} NOT NULL",
                f"first_failure {moment} NOT NULL",
                f"last_failure {moment} NOT NULL",
            ],
            ["queue", "key"],
        ),
        table(
            "txqueue_ledger",
            [f"key {text} NOT NULL", f"recorded_at {spelling.commit_timestamp}"],
            ["key"],
        ),
        # One row per paused queue (lower-cased name): its receives lease nothing.
        table("txqueue_paused", [f"queue {text} NOT NULL"], ["queue"]),
        # Commit markers and the resolver's fences (drivers/spanner/outcome.py); Spanner's row
        # deletion policy forgets them a day after their commit.
        table(
            "txqueue_commits",
            [
                f"id {id36} NOT NULL",
                f"committed_at {spelling.commit_timestamp}",
                f"resolved {flag}",
            ],
            ["id"],
        )
        + spelling.ttl("committed_at"),
    )


CATALOG = catalog_ddl(GOOGLESQL)
CATALOG_POSTGRESQL = catalog_ddl(POSTGRESQL)


def quote(name: str, spelling: Spelling = GOOGLESQL) -> str:
    """Quote an identifier (names are validated: letters, digits and underscores)."""
    return spelling.quote(name)


def spanner_type(column: Column, spelling: Spelling = GOOGLESQL) -> str:
    """The column's type: STRING and BYTES keep their declared length."""
    return spelling.type_name(column)


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


def key_hash(table: Table, spelling: Spelling = GOOGLESQL) -> str:
    """A 64-bit hash of a row's primary key."""
    parts: list[str] = []
    for column in table.key_columns:
        parts += [spelling.key_text(column), "'/'"]
    text = spelling.concat(parts[:-1]) if len(parts) > 2 else parts[0]
    return f"{spelling.fingerprint}({text})"


def shard_expression(table: Table, spelling: Spelling = GOOGLESQL) -> str:
    """The shard of a row, 0 to SHARDS - 1, from its primary key (MOD first: no overflow)."""
    return f"ABS(MOD({key_hash(table, spelling)}, {SHARDS}))"


def add_column(table: Table, column: Column, spelling: Spelling = GOOGLESQL) -> str:
    """ALTER TABLE … ADD COLUMN for a nullable column."""
    return f"ALTER TABLE {spelling.quote(table.name)} ADD COLUMN {spelling.column(column)}"


def create_table(table: Table, deliver_time: str, spelling: Spelling = GOOGLESQL) -> list[str]:
    """CREATE TABLE (and, for a queue, its hidden state and indexes) for ``table``."""
    parts = [spelling.column(c) for c in table.columns]
    if table.is_queue:
        moment = spelling.timestamp()
        text = spelling.type_name(Column("", ColumnType.STRING))
        token = spelling.type_name(Column("", ColumnType.STRING, length=64))
        count = spelling.type_name(Column("", ColumnType.INT64))
        parts += [
            f"{spelling.quote(deliver_time)} {moment} NOT NULL {spelling.default(spelling.now)}",
            f"{READY_AT} {moment}",
            f"{LEASE_EXPIRATION} {moment}",
            f"{LEASE_TOKEN} {token}",
            f"{DELIVERY_COUNT} {count} NOT NULL {spelling.default('0')}",
            f"{LAST_ERROR} {text}",
            f"{FIRST_FAILURE} {moment}",
            f"{LAST_FAILURE} {moment}",
            f"{TRACE_CONTEXT} {text}",
            spelling.generated(
                READY, moment, f"COALESCE({READY_AT}, {spelling.quote(deliver_time)})"
            ),
            spelling.generated(SHARD, count, shard_expression(table, spelling)),
        ]
    keys = [spelling.quote(k) for k in table.primary_key]
    statements = [spelling.table(table.name, parts, keys, table.parent, table.on_delete_cascade)]
    if table.is_queue:
        ready, lease = hidden_indexes(table)
        name = spelling.quote(table.name)
        statements += [
            f"CREATE INDEX {spelling.quote(ready)} ON {name} ({SHARD}, {READY})",
            spelling.null_filtered_index(lease, table.name, LEASE_TOKEN),
            # keys only, inserts only: a receiver needs to know that something was sent
            spelling.insert_stream(wake_stream(table), table.name),
        ]
    return statements


def drop_table(table: Table, indexes: list[str], spelling: Spelling = GOOGLESQL) -> list[str]:
    """DROP the user ``indexes`` on ``table``, its hidden objects, then the table."""
    own = hidden_objects(table) if table.is_queue else []
    return (
        [f"DROP INDEX {spelling.quote(name)}" for name in indexes]
        + [f"DROP {kind} {spelling.quote(name)}" for kind, name in own]
        + [f"DROP TABLE {spelling.quote(table.name)}"]
    )


def create_index(index: Index, spelling: Spelling = GOOGLESQL) -> str:
    """CREATE [UNIQUE] INDEX for a user index."""
    return index_ddl(index, spelling.quote)


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
    name = table.name.lower().replace("\\", "").replace("'", "''")
    return f"NOT EXISTS (SELECT 1 FROM txqueue_paused WHERE queue = '{name}')"


def now_expression(spelling: Spelling = GOOGLESQL) -> str:
    """The pinned time, else the statement's own ``CURRENT_TIMESTAMP()``."""
    return f"COALESCE(@now, {spelling.now})"


def count_if(condition: str) -> str:
    """How many rows meet ``condition`` (COUNTIF, which the PostgreSQL dialect lacks)."""
    return f"COUNT(CASE WHEN {condition} THEN 1 END)"


@lru_cache(maxsize=512)
def queue_statements(
    table: Table, deliver_time: str, spelling: Spelling = GOOGLESQL
) -> QueueStatements:
    """Build (once) the queries of the queue operations of ``table``."""
    quote = spelling.quote
    name = quote(table.name)
    ready_index, _ = hidden_indexes(table)
    keys = [quote(k) for k in table.primary_key]
    key_list = ", ".join(keys)
    key_match = " AND ".join(f"{k} = @k{i}" for i, k in enumerate(keys))
    payload = quote(table.payload_column.name)
    deliver = quote(deliver_time)
    now = now_expression(spelling)
    selected = f"{key_list}, {payload}, {deliver}, {DELIVERY_COUNT}, {TRACE_CONTEXT}"
    indexed = spelling.force_index(table.name, ready_index)
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
    idle = f"({LEASE_EXPIRATION} IS NULL OR {LEASE_EXPIRATION} <= {now})"
    return QueueStatements(
        receive=(
            f"SELECT {selected}, {now} FROM ({heads}) AS heads"
            f" WHERE {SHARD} != @skip AND {not_paused(table)} {oldest}"
        ),
        receive_shard=(
            f"SELECT {selected}, {now} FROM {indexed} WHERE {SHARD} = @shard"
            f" AND {READY} <= {now} AND {not_paused(table)} {oldest}"
        ),
        leases=(
            f"SELECT {key_list}, {LEASE_TOKEN}, {DELIVERY_COUNT}, {FIRST_FAILURE}, {LAST_ERROR}"
            f" FROM {name}"
            f" WHERE {spelling.in_array(LEASE_TOKEN, 'tokens')} AND {LEASE_EXPIRATION} > @now"
        ),
        lease_of=(f"SELECT {LEASE_TOKEN}, {LEASE_EXPIRATION}, {now} FROM {name} WHERE {key_match}"),
        # Paused: MIN of no row is NULL, nothing becomes ready.
        next_ready=(
            f"SELECT MIN({READY}), {now} FROM ({firsts}) AS firsts WHERE {not_paused(table)}"
        ),
        counts=(
            f"SELECT {count_if(f'{READY} <= {now} AND {idle}')},"
            f" {count_if(f'{LEASE_EXPIRATION} > {now}')},"
            f" {count_if(f'{READY} > {now} AND {idle}')},"
            f" MIN(CASE WHEN {READY} <= {now} THEN {deliver} END), {now}"
            f" FROM {name}"
        ),
        dead_letter=(
            f"SELECT {payload}, {DELIVERY_COUNT}, {FIRST_FAILURE}, {LEASE_TOKEN},"
            f" {LEASE_EXPIRATION}, {LAST_ERROR} FROM {name} WHERE {key_match}"
        ),
    )


def key_matches(table: Table, count: int, spelling: Spelling = GOOGLESQL) -> str:
    """``count`` keys as one condition (``@k{i}_{n}``: key column i of the n-th key)."""
    keys = [spelling.quote(k) for k in table.primary_key]
    return " OR ".join(
        "(" + " AND ".join(f"{k} = @k{i}_{n}" for i, k in enumerate(keys)) + ")"
        for n in range(count)
    )


def messages_by_key(
    table: Table, deliver_time: str, count: int, spelling: Spelling = GOOGLESQL
) -> str:
    """The keys of the messages named by ``count`` keys (``@k{i}_{n}``: key column i of
    the n-th key) with their lease expirations, and the time (@now or the clock's)."""
    keys = [spelling.quote(k) for k in table.primary_key]
    return (
        f"SELECT {', '.join(keys)}, {LEASE_EXPIRATION}, {now_expression(spelling)}"
        f" FROM {spelling.quote(table.name)} WHERE {key_matches(table, count, spelling)}"
    )
