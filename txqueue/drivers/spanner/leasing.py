"""Lease operations on an emulated queue: receive, renew, release, next-ready, counts.

Each runs in one read-write transaction of its own: a SELECT (which also reads the
statement's ``CURRENT_TIMESTAMP()``, or the pinned time) and then update mutations of the
rows it read. Spanner's read locks make two receivers that read the same rows conflict: one
commits, the other is aborted and re-run, so no message is ever leased twice. (An ``UPDATE
… WHERE key IN (SELECT … LIMIT n) THEN RETURN`` would be one statement, but the emulator
fails it intermittently when the subquery reads a generated column.)

The ready index is sharded (``statements.SHARDS``). A receive's first attempt reads the
heads of every shard and leases the oldest, so one receiver gets the oldest ready messages
first. When competing receivers abort it (they read the same heads), the re-run reads a
start shard of its own, chosen at random, and only when that one is short the other shards'
heads, so that receivers spread over the shards instead of aborting each other again (and a
re-run is two queries at most); within a shard it is still oldest first, across shards it is
best effort.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from google.cloud.spanner_v1 import param_types

from txqueue.core.durations import to_micros
from txqueue.core.failures import record_failure
from txqueue.core.leases import new_stored_token, redelivery_backoff, token_expiration_micros
from txqueue.core.schema import Table
from txqueue.drivers.base import ReceiveParams, ReleaseParams, RenewParams
from txqueue.drivers.spanner.catalog import is_paused
from txqueue.drivers.spanner.codec import encode_key, map_errors, utc
from txqueue.drivers.spanner.engine import current_time, query
from txqueue.drivers.spanner.spelling import spelling_of
from txqueue.drivers.spanner.statements import (
    DELIVERY_COUNT,
    FIRST_FAILURE,
    LAST_ERROR,
    LAST_FAILURE,
    LEASE_EXPIRATION,
    LEASE_TOKEN,
    READY_AT,
    SHARDS,
    queue_statements,
)
from txqueue.models import LeaseRenewal, Message, new_message
from txqueue.telemetry import remember

__all__ = ["ShardWalk", "counts", "next_ready", "receive", "release", "renew"]

_NOW = {"now": param_types.TIMESTAMP}


def _truncated(moment: datetime) -> datetime:
    """``moment`` in UTC at microsecond precision (what a token carries)."""
    return utc(moment)


@dataclass
class ShardWalk:
    """How one receive reads the ready index: its start shard and attempts so far (the
    transaction runner re-runs ``receive`` with the same walk when Spanner aborts it)."""

    start: int = field(default_factory=lambda: random.randrange(SHARDS))
    attempts: int = 0


def _ready_rows(
    transaction: Any, params: ReceiveParams, deliver: str, walk: ShardWalk
) -> list[tuple[Any, ...]]:
    """Up to ``max_batch_size`` ready rows: the oldest of every shard's heads on the first
    attempt, else the walk's start shard first, then the oldest of the others' heads."""
    statements = queue_statements(params.queue, deliver, spelling_of(transaction))
    walk.attempts += 1
    wanted = params.max_batch_size
    if walk.attempts == 1:
        values = {"now": params.now, "limit": wanted, "skip": -1}
        return query(transaction, statements.receive, values, _NOW)[1]
    values = {"now": params.now, "limit": wanted, "shard": walk.start}
    rows = query(transaction, statements.receive_shard, values, _NOW)[1]
    if len(rows) < wanted:
        values = {"now": params.now, "limit": wanted - len(rows), "skip": walk.start}
        rows += query(transaction, statements.receive, values, _NOW)[1]
    return rows


def receive(
    transaction: Any, params: ReceiveParams, deliver: str, walk: ShardWalk | None = None
) -> list[Message]:
    """Lease up to ``max_batch_size`` ready messages (the caller commits)."""
    table = params.queue
    rows = _ready_rows(transaction, params, deliver, walk or ShardWalk())
    if not rows:
        return []
    width = len(table.primary_key)
    expiration = _truncated(rows[0][-1] + params.lease)
    micros = to_micros(expiration)
    messages: list[Message] = []
    updates: list[list[Any]] = []
    for row in rows:
        key = tuple(row[:width])
        count = int(row[width + 2]) + 1
        token = new_stored_token(micros)
        ready_at = expiration + redelivery_backoff(count)
        updates.append([*encode_key(table, key), token, expiration, ready_at, count])
        messages.append(
            new_message(table.name, key, row[width], row[width + 1], expiration, token, count)
        )
        if row[width + 3] is not None:
            remember(token, row[width + 3])
    columns = (*table.primary_key, LEASE_TOKEN, LEASE_EXPIRATION, READY_AT, DELIVERY_COUNT)
    with map_errors():
        transaction.update(table.name, columns=columns, values=updates)
    return messages


def _live_leases(
    transaction: Any, table: Table, deliver: str, tokens: list[str], now: datetime
) -> dict[str, tuple[Any, ...]]:
    """The rows whose live lease ``tokens`` name, by token: key, token, count, first failure,
    failure history."""
    if not tokens:
        return {}
    _, rows = query(
        transaction,
        queue_statements(table, deliver, spelling_of(transaction)).leases,
        {"tokens": tokens, "now": now},
        {"tokens": param_types.Array(param_types.STRING), **_NOW},
    )
    width = len(table.primary_key)
    return {row[width]: row for row in rows}


def _carried(tokens: Any, now: datetime) -> list[str]:
    """The tokens that are ours and whose lease has not yet expired by what they carry."""
    limit = to_micros(now)
    return [t for t in tokens if (token_expiration_micros(t) or 0) > limit]


def renew(transaction: Any, params: RenewParams, deliver: str) -> list[LeaseRenewal]:
    """Renew each live lease with a fresh token; the row rules are Spanner's RENEWLEASE."""
    table = params.queue
    now = current_time(transaction, params.now)
    alive = _carried(params.tokens, now)
    found = _live_leases(transaction, table, deliver, alive, now)
    expiration = _truncated(now + params.extension)
    micros = to_micros(expiration)
    width = len(table.primary_key)
    renewals: list[LeaseRenewal] = []
    updates: list[list[Any]] = []
    for token in params.tokens:
        if token not in alive:
            continue  # unparseable or expired: no row
        row = found.pop(token, None)
        if row is None:
            renewals.append(LeaseRenewal(token, None, None))
            continue
        new_token = new_stored_token(micros)
        count = int(row[width + 1])
        ready_at = expiration + redelivery_backoff(count)
        updates.append([*encode_key(table, row[:width]), new_token, expiration, ready_at])
        renewals.append(LeaseRenewal(token, new_token, expiration))
    if updates:
        columns = (*table.primary_key, LEASE_TOKEN, LEASE_EXPIRATION, READY_AT)
        with map_errors():
            transaction.update(table.name, columns=columns, values=updates)
    return renewals


def release(transaction: Any, params: ReleaseParams, deliver: str) -> int:
    """Clear live leases so their messages are receivable after ``delay``."""
    table = params.queue
    now = current_time(transaction, params.now)
    found = _live_leases(transaction, table, deliver, _carried(params.tokens, now), now)
    if not found:
        return 0
    width = len(table.primary_key)
    ready_at = _truncated(now + params.delay)
    columns: tuple[str, ...] = (*table.primary_key, LEASE_TOKEN, LEASE_EXPIRATION, READY_AT)
    updates = []
    for row in found.values():
        values = [*encode_key(table, row[:width]), None, None, ready_at]
        if params.error is not None:
            first = row[width + 2] if row[width + 2] is not None else now
            count = int(row[width + 1])
            history = record_failure(row[width + 3], params.error, params.failure, count, now)
            values += [history, first, now]
        updates.append(values)
    if params.error is not None:
        columns += (LAST_ERROR, FIRST_FAILURE, LAST_FAILURE)
    with map_errors():
        transaction.update(table.name, columns=columns, values=updates)
    return len(updates)


def next_ready_or_paused(
    snapshot: Any, queue: Table, deliver: str, now: datetime | None
) -> tuple[float | None, bool]:
    """``next_ready`` and whether the queue is paused, read at one timestamp: a waiting
    receiver that saw the queue paused must keep looking (a resume deletes a row, which the
    insert-only change stream does not record), and two reads could straddle the resume."""
    return next_ready(snapshot, queue, deliver, now), is_paused(snapshot, queue)


def next_ready(snapshot: Any, queue: Table, deliver: str, now: datetime | None) -> float | None:
    """Seconds until the earliest message becomes ready (≤ 0: ready now); None when empty."""
    _, rows = query(
        snapshot,
        queue_statements(queue, deliver, spelling_of(snapshot)).next_ready,
        {"now": now},
        _NOW,
    )
    earliest, current = rows[0]
    if earliest is None:
        return None
    return float((earliest - current) / timedelta(seconds=1))


def counts(snapshot: Any, queue: Table, deliver: str, now: datetime | None) -> dict[str, Any]:
    """ready / leased / scheduled counts and the oldest ready message's age."""
    _, rows = query(
        snapshot, queue_statements(queue, deliver, spelling_of(snapshot)).counts, {"now": now}, _NOW
    )
    ready, leased, scheduled, oldest, current = rows[0]
    return {
        "ready": ready or 0,
        "leased": leased or 0,
        "scheduled": scheduled or 0,
        "oldest_ready_age_seconds": None
        if oldest is None
        else (current - oldest) / timedelta(seconds=1),
    }
