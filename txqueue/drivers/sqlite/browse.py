"""Reading SQLite queues without leasing: message browsing and cheap counts of large queues.

Blocking functions over one pooled connection, shared by both faces. Browsing walks the
primary-key index in key order (keyset paging, never OFFSET); a string prefix is a range on
the key (``BINARY`` collation compares UTF-8 bytes, so the range is exactly the prefix).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from txqueue.core.durations import from_micros
from txqueue.core.failures import read_history
from txqueue.core.schema import Table
from txqueue.drivers.base import BrowseParams
from txqueue.drivers.browse import prefix_end, string_prefix
from txqueue.drivers.sqlite import leasing
from txqueue.drivers.sqlite.engine import decode, encode, map_errors, now_micros
from txqueue.drivers.sqlite.statements import quote
from txqueue.models import StoredMessage

__all__ = ["COUNT_LIMIT", "estimate_counts", "list_messages"]

#: Counts over more rows than this are estimated (``estimate_counts``).
COUNT_LIMIT = 100_000
#: A state filter reads the ready index's range of that state when it holds at most this many.
RANGE_LIMIT = 10_000
#: Random rowids looked up per sampling round, and the hits after which sampling stops.
PROBES = 2000
ENOUGH_HITS = 2000
MAX_ROUNDS = 10

_STATES = ("ready", "leased", "scheduled")


def _state_sql(deliver: str) -> str:
    """0 ready, 1 leased, 2 scheduled, as ``leasing.counts`` tells them apart (``?`` twice:
    now)."""
    ready = f"coalesce(_txq_ready_at, {quote(deliver)})"
    return f"CASE WHEN _txq_lease_expiration > ? THEN 1 WHEN {ready} <= ? THEN 0 ELSE 2 END"


def list_messages(
    connection: sqlite3.Connection, params: BrowseParams, deliver: str
) -> list[StoredMessage]:
    """A page of ``params.queue`` in key order (see ``BrowseParams``)."""
    table = params.queue
    now = now_micros(params.now)
    keys = [quote(k) for k in table.primary_key]
    columns = table.key_columns
    state = _state_sql(deliver)
    hidden = [
        "_txq_lease_expiration",
        "_txq_delivery_count",
        "_txq_last_error",
        state,
        "_txq_last_failure",
    ]
    select = ", ".join([*keys, quote(table.payload_column.name), quote(deliver), *hidden])
    arguments: list[Any] = [now, now]
    where: list[str] = []
    prefix = string_prefix(table, params)
    exact = params.key_prefix[:-1] if prefix is not None else params.key_prefix
    for key, column, value in zip(keys, columns, exact):
        where.append(f"{key} = ?")
        arguments.append(encode(column, value))
    if prefix:  # an empty prefix matches every string
        key = keys[len(exact)]
        where.append(f"{key} >= ?")
        arguments.append(prefix)
        end = prefix_end(prefix)
        if end is not None:
            where.append(f"{key} < ?")
            arguments.append(end)
    if params.after is not None:
        where.append(f"({', '.join(keys)}) > ({', '.join('?' * len(keys))})")
        arguments += [encode(c, v) for c, v in zip(columns, params.after)]
    name = quote(table.name)
    source = name
    if params.state is not None:
        where.append(f"{state} = ?")
        arguments += [now, now, _STATES.index(params.state)]
        candidates = _state_range(connection, table, deliver, params.state, now)
        if candidates is not None:  # few: read them by the ready index, then sort by key
            source = (
                f"({candidates}) AS _txq_candidate CROSS JOIN {name}"
                f" ON {name}.rowid = _txq_candidate._txq_row"
            )
            arguments.insert(2, now)  # after the select list's two
    sql = f"SELECT {select} FROM {source}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" ORDER BY {', '.join(keys)} LIMIT ?"
    arguments.append(params.limit)
    with map_errors():
        rows = connection.execute(sql, arguments).fetchall()
    width = len(keys)
    payload_column = table.payload_column
    messages = []
    for row in rows:
        last_failure = None if row[width + 6] is None else from_micros(row[width + 6])
        last_error, failures = read_history(row[width + 4], int(row[width + 3]), last_failure)
        messages.append(
            StoredMessage(
                queue=table.name,
                key=tuple(decode(c, v) for c, v in zip(columns, row[:width])),
                payload=decode(payload_column, row[width]),
                deliver_time=from_micros(row[width + 1]),
                state=_STATES[row[width + 5]],
                lease_expiration=from_micros(row[width + 2]) if row[width + 5] == 1 else None,
                delivery_count=int(row[width + 3]),
                last_error=last_error,
                failures=failures,
            )
        )
    return messages


def _state_range(
    connection: sqlite3.Connection, table: Table, deliver: str, state: str, now: int
) -> str | None:
    """A query of the rowids that may be in ``state`` (one ``?``: now), when there are at
    most ``RANGE_LIMIT`` of them; else None (walking the key index finds a page sooner).

    Every message in a state lies in one range of the ready index: a ready one is ready
    now; a leased one's ready time is its lease's expiration plus backoff, a scheduled one's
    is ahead. So a rare state (a few leased among a million ready) is read from that range
    instead of walking the key index past every message in another state.
    """
    ready = f"coalesce(_txq_ready_at, {quote(deliver)})"
    side = "<=" if state == "ready" else ">"
    query = f"SELECT rowid AS _txq_row FROM {quote(table.name)} WHERE {ready} {side} ?"
    with map_errors():
        row = connection.execute(
            f"SELECT count(*) FROM ({query} LIMIT {RANGE_LIMIT + 1})", [now]
        ).fetchone()
    return query if int(row[0]) <= RANGE_LIMIT else None


def estimate_counts(
    connection: sqlite3.Connection, table: Table, deliver: str, now: Any
) -> dict[str, Any]:
    """Exact counts (``leasing.counts``) for a queue of at most ``COUNT_LIMIT`` messages.

    A larger queue is sampled: random rowids between its least and greatest are looked up
    (a uniform sample of its rows, each lookup one B-tree descent), and the share of hits in
    each state scales the rowid span; the oldest ready age is exact, from the head of the
    ready index. Dead letters beyond ``COUNT_LIMIT`` are sampled the same way.
    """
    name = quote(table.name)
    current = now_micros(now)
    with map_errors():
        total = _capped(connection, f"SELECT 1 FROM {name}", [])
        dead = _capped(
            connection,
            "SELECT 1 FROM txqueue_dead_letters WHERE queue = ?",
            [table.name.lower()],
        )
        dead_estimated = dead > COUNT_LIMIT
        if dead_estimated:
            dead = round(
                _sample(
                    connection,
                    "txqueue_dead_letters",
                    "CASE WHEN queue = ? THEN 0 END",
                    [table.name.lower()],
                    1,
                )[0]
            )
        if total <= COUNT_LIMIT:
            counts = leasing.counts(connection, table, deliver, now)
            counts["dead_letters"] = dead
            counts["estimated"] = dead_estimated
            return counts
        ready = f"coalesce(_txq_ready_at, {quote(deliver)})"
        head = connection.execute(
            f"SELECT {ready} FROM {name} WHERE {ready} <= ?"
            " AND coalesce(_txq_lease_expiration, 0) <= ?"
            f" ORDER BY {ready} LIMIT 1",
            [current, current],
        ).fetchone()
        ready_count, leased, scheduled = _sample(
            connection, name, _state_sql(deliver), [current, current], 3
        )
    return {
        "ready": round(ready_count),
        "leased": round(leased),
        "scheduled": round(scheduled),
        "oldest_ready_age_seconds": None if head is None else (current - head[0]) / 1_000_000,
        "dead_letters": dead,
        "estimated": True,
    }


def _capped(connection: sqlite3.Connection, query: str, arguments: list[Any]) -> int:
    """How many rows ``query`` returns, counting no further than ``COUNT_LIMIT`` + 1."""
    row = connection.execute(
        f"SELECT count(*) FROM ({query} LIMIT {COUNT_LIMIT + 1})", arguments
    ).fetchone()
    return int(row[0])


def _sample(
    connection: sqlite3.Connection,
    table: str,
    classify: str,
    arguments: list[Any],
    classes: int,
) -> list[float]:
    """Estimated rows of ``table`` (a quoted name) in each class ``classify`` puts them in
    (0 .. classes-1, NULL for none), from random rowid lookups."""
    low, high = connection.execute(
        f"SELECT (SELECT min(rowid) FROM {table}), (SELECT max(rowid) FROM {table})"
    ).fetchone()
    if low is None:
        return [0.0] * classes
    span = high - low + 1
    tallies = [0] * classes
    probes = hits = 0
    sql = (
        "WITH RECURSIVE probe(n, id) AS (SELECT 1, ? + abs(random() % ?)"
        " UNION ALL SELECT n + 1, ? + abs(random() % ?) FROM probe WHERE n < ?)"
        f" SELECT class, count(*) FROM (SELECT {classify} AS class"
        f" FROM probe CROSS JOIN {table} AS t ON t.rowid = probe.id) GROUP BY class"
    )
    for _ in range(MAX_ROUNDS):
        rows = connection.execute(sql, [low, span, low, span, PROBES, *arguments]).fetchall()
        probes += PROBES
        for kind, count in rows:
            hits += count
            if kind is not None:
                tallies[kind] += count
        if hits >= ENOUGH_HITS:
            break
    return [tally * span / probes for tally in tallies]
