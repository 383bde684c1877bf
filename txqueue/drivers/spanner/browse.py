"""Reading Spanner queues without leasing: message browsing in key order (keyset paging)."""

from __future__ import annotations

from typing import Any

from google.cloud.spanner_v1 import param_types

from txqueue.drivers.base import BrowseParams
from txqueue.drivers.browse import string_prefix
from txqueue.drivers.spanner.codec import column_type, encode
from txqueue.drivers.spanner.engine import query
from txqueue.drivers.spanner.statements import (
    DELIVERY_COUNT,
    LAST_ERROR,
    LEASE_EXPIRATION,
    READY,
    quote,
)
from txqueue.models import StoredMessage

__all__ = ["list_messages"]

_STATES = ("ready", "leased", "scheduled")


def list_messages(snapshot: Any, params: BrowseParams, deliver: str) -> list[StoredMessage]:
    """A page of ``params.queue`` in key order (see ``BrowseParams``)."""
    table = params.queue
    keys = [quote(k) for k in table.primary_key]
    columns = table.key_columns
    now = "COALESCE(@now, CURRENT_TIMESTAMP())"
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
    return [
        StoredMessage(
            queue=table.name,
            key=tuple(row[:width]),
            payload=row[width],
            deliver_time=row[width + 1],
            state=_STATES[row[width + 5]],
            lease_expiration=row[width + 2] if row[width + 5] == 1 else None,
            delivery_count=row[width + 3],
            last_error=row[width + 4],
        )
        for row in rows
    ]
