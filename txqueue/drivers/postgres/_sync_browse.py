# Generated from txqueue/drivers/postgres/_async_browse.py by tools/async_to_sync.py; do not edit.
"""Reading PostgreSQL queues without leasing: message browsing and cheap counts of large queues.

Functions over one pooled connection (autocommit). Browsing walks the primary-key index in
key order (keyset paging, never OFFSET). A string prefix is a range on the key when text
compares by bytes (the "C"/"POSIX"/"C.UTF-8" collations); under a linguistic collation the
range would not be the prefix, so ``starts_with`` alone decides there.

Generated from ``txqueue/drivers/postgres/_async_browse.py``
by ``tools/async_to_sync.py``; do not edit.
"""

from __future__ import annotations

from typing import Any

from txqueue.core.failures import read_history
from txqueue.core.schema import Table
from txqueue.drivers.base import BrowseParams
from txqueue.drivers.browse import prefix_end, string_prefix
from txqueue.drivers.postgres.codec import decode, encode, map_errors, utc
from txqueue.drivers.postgres.statements import ident, lease_gate, queue_statements
from txqueue.models import StoredMessage

__all__ = ["COUNT_LIMIT", "estimate_counts", "list_messages"]

#: Counts over more rows than this are estimated (``estimate_counts``).
COUNT_LIMIT = 100_000
#: Pages a TABLESAMPLE of a large queue aims to read.
SAMPLE_PAGES = 2000

_CLOCK = "WITH clock AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now)"


def _receivable(deliver: str) -> str:
    ready = f"coalesce(_txq_ready_at, {ident(deliver)})"
    gate = lease_gate("_txq_lease_expiration", "_txq_delivery_count")
    return (
        f"CASE WHEN _txq_lease_expiration IS NULL THEN {ready} ELSE greatest({ready}, {gate}) END"
    )


def _state(deliver: str) -> str:
    """The state as ``queue_counts`` tells them apart: leased, ready or scheduled."""
    return (
        "CASE WHEN _txq_lease_expiration > clock.now THEN 'leased'"
        f" WHEN {_receivable(deliver)} <= clock.now THEN 'ready' ELSE 'scheduled' END"
    )


def list_messages(connection: Any, params: BrowseParams, deliver: str) -> list[StoredMessage]:
    """A page of ``params.queue`` in key order (see ``BrowseParams``)."""
    table = params.queue
    keys = [ident(k) for k in table.primary_key]
    columns = table.key_columns
    state = _state(deliver)
    arguments: dict[str, Any] = {"now": params.now, "limit": params.limit}
    where: list[str] = []
    prefix = string_prefix(table, params)
    exact = params.key_prefix[:-1] if prefix is not None else params.key_prefix
    for i, (key, column, value) in enumerate(zip(keys, columns, exact)):
        where.append(f"{key} = %(k{i})s")
        arguments[f"k{i}"] = encode(column, value)
    if prefix:  # an empty prefix matches every string
        key = keys[len(exact)]
        arguments["prefix"] = prefix
        where.append(f"starts_with({key}, %(prefix)s)")
        if _bytewise(connection):
            where.append(f"{key} >= %(prefix)s")
            end = prefix_end(prefix)
            if end is not None:
                where.append(f"{key} < %(end)s")
                arguments["end"] = end
    if params.after is not None:
        places = ", ".join(f"%(a{i})s" for i in range(len(keys)))
        where.append(f"({', '.join(keys)}) > ({places})")
        arguments.update(
            {f"a{i}": encode(c, v) for i, (c, v) in enumerate(zip(columns, params.after))}
        )
    if params.state is not None:
        where.append(f"{state} = %(state)s")
        arguments["state"] = params.state
    sql = (
        f"{_CLOCK} SELECT {', '.join(keys)}, {ident(table.payload_column.name)},"
        f" {ident(deliver)}, CASE WHEN _txq_lease_expiration > clock.now"
        " THEN _txq_lease_expiration END, _txq_delivery_count, _txq_last_error,"
        f" {state}, _txq_last_failure FROM {ident(table.name)}, clock"
    )
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" ORDER BY {', '.join(keys)} LIMIT %(limit)s"
    with map_errors():
        cursor = connection.execute(sql, arguments)
        rows = cursor.fetchall()
    width = len(keys)
    payload_column = table.payload_column
    messages = []
    for row in rows:
        last_failure = None if row[width + 6] is None else utc(row[width + 6])
        last_error, failures = read_history(row[width + 4], int(row[width + 3]), last_failure)
        messages.append(
            StoredMessage(
                queue=table.name,
                key=tuple(decode(c, v) for c, v in zip(columns, row[:width])),
                payload=decode(payload_column, row[width]),
                deliver_time=utc(row[width + 1]),
                state=row[width + 5],
                lease_expiration=None if row[width + 2] is None else utc(row[width + 2]),
                delivery_count=int(row[width + 3]),
                last_error=last_error,
                failures=failures,
            )
        )
    return messages


def _bytewise(connection: Any) -> bool:
    """Whether the database's text collation orders by bytes (so a prefix is a range)."""
    cursor = connection.execute(
        "SELECT datcollate IN ('C', 'POSIX', 'C.UTF-8', 'C.utf8', 'ucs_basic')"
        " FROM pg_database WHERE datname = current_database()"
    )
    row = cursor.fetchone()
    return bool(row and row[0])


def estimate_counts(connection: Any, table: Table, deliver: str, now: Any) -> dict[str, Any]:
    """Exact counts (``queue_counts``'s statement) for a queue of at most ``COUNT_LIMIT``
    messages. For a larger one: the number of rows is the planner's own estimate (rows per
    page at the last ANALYZE times the table's pages now; a sample's when never analyzed),
    shared among the states as in a ``TABLESAMPLE SYSTEM`` of about ``SAMPLE_PAGES`` pages;
    the oldest ready age is exact, from the head of the ready index. Dead letters beyond
    ``COUNT_LIMIT`` are sampled the same way."""
    name = ident(table.name)
    queue = table.name.lower()
    with map_errors():
        planned = _planned_rows(connection, name)
        total = COUNT_LIMIT + 1  # the statistics say large: no need to count
        if planned is None or planned <= 2 * COUNT_LIMIT:
            total = _capped(connection, f"SELECT 1 FROM {name}", [])
        dead = _capped(connection, "SELECT 1 FROM txqueue_dead_letters WHERE queue = %s", [queue])
        dead_estimated = dead > COUNT_LIMIT
        if dead_estimated:
            sampled, scale = _sample(
                connection,
                "txqueue_dead_letters",
                "count(*) FILTER (WHERE queue = %(queue)s)",
                {"queue": queue},
            )
            dead = round(sampled[0] * scale)
        if total <= COUNT_LIMIT:
            cursor = connection.execute(queue_statements(table, deliver).counts, {"now": now})
            row = cursor.fetchone()
            ready, leased, scheduled, oldest = row if row else (0, 0, 0, None)
            return {
                "ready": ready,
                "leased": leased,
                "scheduled": scheduled,
                "oldest_ready_age_seconds": oldest,
                "dead_letters": dead,
                "estimated": dead_estimated,
            }
        ready_expression = f"coalesce(_txq_ready_at, {ident(deliver)})"
        gate = lease_gate("_txq_lease_expiration", "_txq_delivery_count")
        cursor = connection.execute(
            f"{_CLOCK} SELECT extract(epoch FROM clock.now - {ready_expression})::float8"
            f" FROM {name}, clock WHERE {ready_expression} <= clock.now"
            f" AND (_txq_lease_expiration IS NULL OR {gate} <= clock.now)"
            f" ORDER BY {ready_expression} LIMIT 1",
            {"now": now},
        )
        head = cursor.fetchone()
        state = _state(deliver)
        sampled, scale = _sample(
            connection,
            name,
            f"count(*) FILTER (WHERE {state} = 'ready'),"
            f" count(*) FILTER (WHERE {state} = 'leased'),"
            f" count(*) FILTER (WHERE {state} = 'scheduled')",
            {"now": now},
        )
    rows = sum(sampled)
    size = planned if planned is not None else rows * scale
    shares = [count / rows if rows else 0.0 for count in sampled]
    return {
        "ready": round(shares[0] * size),
        "leased": round(shares[1] * size),
        "scheduled": round(shares[2] * size),
        "oldest_ready_age_seconds": None if head is None else head[0],
        "dead_letters": dead,
        "estimated": True,
    }


def _planned_rows(connection: Any, name: str) -> float | None:
    """The planner's estimate of a table's rows (None when it was never analyzed)."""
    cursor = connection.execute(
        "SELECT reltuples / relpages * (pg_relation_size(oid)"
        " / current_setting('block_size')::int) FROM pg_class"
        " WHERE oid = to_regclass(%s) AND relpages > 0 AND reltuples >= 0",
        [name],
    )
    row = cursor.fetchone()
    return float(row[0]) if row and row[0] is not None else None


def _capped(connection: Any, query: str, arguments: list[Any]) -> int:
    """How many rows ``query`` returns, counting no further than ``COUNT_LIMIT`` + 1."""
    cursor = connection.execute(
        f"SELECT count(*) FROM ({query} LIMIT {COUNT_LIMIT + 1}) AS capped", arguments
    )
    row = cursor.fetchone()
    return int(row[0]) if row else 0


def _sample(
    connection: Any, table: str, tallies: str, arguments: dict[str, Any]
) -> tuple[list[int], float]:
    """``tallies`` (count(*) FILTER … columns) over a page sample of ``table`` (a quoted
    name), and the factor scaling them to the whole table."""
    cursor = connection.execute(
        "SELECT greatest(pg_relation_size(%(table)s::regclass)"
        " / current_setting('block_size')::int, 1)",
        {"table": table},
    )
    row = cursor.fetchone()
    pages = int(row[0]) if row else 1
    percent = min(100.0, 100.0 * SAMPLE_PAGES / pages)
    cursor = connection.execute(
        f"{_CLOCK} SELECT {tallies} FROM {table} TABLESAMPLE SYSTEM (%(percent)s::float4), clock",
        {**arguments, "now": arguments.get("now"), "percent": percent},
    )
    row = cursor.fetchone()
    return [int(value) for value in (row or ())], 100.0 / percent
