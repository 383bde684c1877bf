"""Reading Spanner queues without leasing: message browsing in key order (keyset paging) and
the counts of a large queue estimated from a sample."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from google.cloud.spanner_v1 import param_types

from txqueue.core.failures import read_history
from txqueue.core.schema import Table
from txqueue.drivers.base import BrowseParams
from txqueue.drivers.browse import string_prefix
from txqueue.drivers.spanner import leasing
from txqueue.drivers.spanner.codec import column_type, encode
from txqueue.drivers.spanner.engine import query
from txqueue.drivers.spanner.spelling import spelling_of
from txqueue.drivers.spanner.statements import (
    DELIVERY_COUNT,
    LAST_ERROR,
    LAST_FAILURE,
    LEASE_EXPIRATION,
    READY,
    count_if,
    hidden_indexes,
    key_hash,
    now_expression,
)
from txqueue.models import StoredMessage

__all__ = ["COUNT_LIMIT", "estimate_counts", "list_messages"]

#: Counts over more rows than this are estimated (``estimate_counts``).
COUNT_LIMIT = 100_000
#: About how many rows a sample of a queue of ``COUNT_LIMIT`` rows holds.
SAMPLE_ROWS = 2_000

_STATES = ("ready", "leased", "scheduled")


def list_messages(snapshot: Any, params: BrowseParams, deliver: str) -> list[StoredMessage]:
    """A page of ``params.queue`` in key order (see ``BrowseParams``)."""
    table = params.queue
    spelling = spelling_of(snapshot)
    quote = spelling.quote
    keys = [quote(k) for k in table.primary_key]
    columns = table.key_columns
    now = now_expression(spelling)
    state = f"CASE WHEN {LEASE_EXPIRATION} > {now} THEN 1 WHEN {READY} <= {now} THEN 0 ELSE 2 END"
    select = ", ".join(
        [
            *keys,
            quote(table.payload_column.name),
            quote(deliver),
            LEASE_EXPIRATION,
            DELIVERY_COUNT,
            LAST_ERROR,
            state,
            LAST_FAILURE,
        ]
    )
    values: dict[str, Any] = {"now": params.now, "limit": params.limit}
    types: dict[str, Any] = {"now": param_types.TIMESTAMP}
    where: list[str] = []
    prefix = string_prefix(table, params)
    exact = params.key_prefix[:-1] if prefix is not None else params.key_prefix
    for i, (key, column, value) in enumerate(zip(keys, columns, exact)):
        where.append(f"{key} = @p{i}")
        values[f"p{i}"] = encode(column, value)
        types[f"p{i}"] = column_type(column)
    if prefix:  # an empty prefix matches every string
        where.append(f"STARTS_WITH({keys[len(exact)]}, @prefix)")
        values["prefix"] = prefix
    if params.after is not None:
        for i, column in enumerate(columns):
            values[f"a{i}"] = encode(column, params.after[i])
            types[f"a{i}"] = column_type(column)
        later = [
            "("
            + " AND ".join([*(f"{keys[j]} = @a{j}" for j in range(i)), f"{keys[i]} > @a{i}"])
            + ")"
            for i in range(len(keys))
        ]
        where.append("(" + " OR ".join(later) + ")")
    if params.state is not None:
        where.append(f"{state} = @state")
        values["state"] = _STATES.index(params.state)
    condition = f" WHERE {' AND '.join(where)}" if where else ""
    _, rows = query(
        snapshot,
        f"SELECT {select} FROM {quote(table.name)}{condition}"
        f" ORDER BY {', '.join(keys)} LIMIT @limit",
        values,
        types,
    )
    width = len(keys)
    messages = []
    for row in rows:
        last_error, failures = read_history(row[width + 4], row[width + 3], row[width + 6])
        messages.append(
            StoredMessage(
                queue=table.name,
                key=tuple(row[:width]),
                payload=row[width],
                deliver_time=row[width + 1],
                state=_STATES[row[width + 5]],
                lease_expiration=row[width + 2] if row[width + 5] == 1 else None,
                delivery_count=row[width + 3],
                last_error=last_error,
                failures=failures,
            )
        )
    return messages


def estimate_counts(
    snapshot: Any, table: Table, deliver: str, now: datetime | None
) -> dict[str, Any]:
    """Exact counts (``leasing.counts``) for a queue of at most ``COUNT_LIMIT`` messages.

    A larger queue is sampled (``TABLESAMPLE BERNOULLI``: each row with the same chance,
    its state counts scaled back up); the oldest ready age is that of the message at the
    head of the ready index. Dead letters are counted exactly (a range of their key).
    """
    spelling = spelling_of(snapshot)
    quote = spelling.quote
    name = quote(table.name)
    now_sql = now_expression(spelling)
    _, rows = query(
        snapshot,
        f"SELECT COUNT(*) FROM (SELECT 1 FROM {name} LIMIT @limit) AS limited",
        {"limit": COUNT_LIMIT + 1},
    )
    if int(rows[0][0]) <= COUNT_LIMIT:
        counts = leasing.counts(snapshot, table, deliver, now)
        counts["estimated"] = False
        return counts
    percent = min(100.0, 100.0 * SAMPLE_ROWS / COUNT_LIMIT)
    expired = f"({LEASE_EXPIRATION} IS NULL OR {LEASE_EXPIRATION} <= {now_sql})"
    _, sampled = query(
        snapshot,
        f"SELECT {count_if(f'{READY} <= {now_sql} AND {expired}')},"
        f" {count_if(f'{LEASE_EXPIRATION} > {now_sql}')},"
        f" {count_if(f'{READY} > {now_sql} AND {expired}')}"
        f" FROM {name} {spelling.sample(percent, key_hash(table, spelling))}",
        {"now": now},
        {"now": param_types.TIMESTAMP},
    )
    ready, leased, scheduled = (round(int(n or 0) * 100.0 / percent) for n in sampled[0])
    ready_index, _ = hidden_indexes(table)
    _, head = query(
        snapshot,
        f"SELECT {quote(deliver)}, {now_sql} FROM {spelling.force_index(table.name, ready_index)}"
        f" WHERE {READY} <= {now_sql} AND {expired} ORDER BY {READY} LIMIT 1",
        {"now": now},
        {"now": param_types.TIMESTAMP},
    )
    return {
        "ready": ready,
        "leased": leased,
        "scheduled": scheduled,
        "oldest_ready_age_seconds": (head[0][1] - head[0][0]) / timedelta(seconds=1)
        if head
        else None,
        "estimated": True,
    }
