"""Blocking lease operations for SQLite: receive, renew, release, next-ready, counts.

Each runs in its own short ``BEGIN IMMEDIATE`` transaction, committed before the receiver
sees the message, and two receivers can never lease the same row: SQLite admits one writer at
a time and the UPDATE picks only rows whose ready time has come. Those commits do not wait for
the disk (see ``_lease_transaction``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from txqueue.core.durations import from_micros
from txqueue.core.failures import record_failure
from txqueue.core.leases import (
    handed_out_token,
    new_stored_token,
    token_expiration_micros,
    token_locator,
)
from txqueue.core.schema import Table
from txqueue.drivers.base import ReceiveParams, ReleaseParams, RenewParams
from txqueue.drivers.sqlite.engine import map_errors, messages_from_rows, now_micros
from txqueue.drivers.sqlite.locking import begin_immediate
from txqueue.drivers.sqlite.statements import queue_statements
from txqueue.models import LeaseRenewal, Message

__all__ = ["counts", "next_ready", "receive", "release", "renew"]


@contextmanager
def _lease_transaction(connection: sqlite3.Connection) -> Iterator[None]:
    """A write transaction that changes leases only, committed without waiting for the disk.

    A lease keeps other receivers off a message while its holder lives. Every process using a
    SQLite database runs on one machine (WAL needs shared memory), so the power loss or OS
    crash that could undo an unsynced commit also ends every holder of the leases it undoes:
    they protect no one by then. The commit runs at ``synchronous=NORMAL`` (the next synced
    commit, an ack for instance, writes it down with its own); sends, acks and dead letters
    keep the database's setting. Saves one fsync per receive (~0.4 ms on a typical SSD).
    """
    level = int(connection.execute("PRAGMA synchronous").fetchone()[0])
    relaxed = level > 1  # FULL (2) or EXTRA (3)
    if relaxed:
        connection.execute("PRAGMA synchronous=NORMAL")
    try:
        begin_immediate(connection)
        try:
            yield
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
    finally:
        if relaxed:
            connection.execute(f"PRAGMA synchronous={level}")


def _micros(delta: Any) -> int:
    return int(delta.total_seconds() * 1_000_000)


def receive(connection: sqlite3.Connection, params: ReceiveParams, deliver: str) -> list[Message]:
    """Lease up to ``max_batch_size`` ready messages and commit the leases."""
    statements = queue_statements(params.queue, deliver)
    now = now_micros(params.now)
    expiration = now + _micros(params.lease)
    arguments = {
        "now": now,
        "expiration": expiration,
        "token": new_stored_token(expiration),
        "limit": params.max_batch_size,
    }
    with map_errors(), _lease_transaction(connection):
        rows = connection.execute(statements.receive, arguments).fetchall()
    return messages_from_rows(params.queue, rows)


def renew(connection: sqlite3.Connection, params: RenewParams, deliver: str) -> list[LeaseRenewal]:
    """Renew each live lease with a fresh token; the row rules are Spanner's RENEWLEASE."""
    statements = queue_statements(params.queue, deliver)
    now = now_micros(params.now)
    expiration = now + _micros(params.extension)
    renewals: list[LeaseRenewal] = []
    with map_errors(), _lease_transaction(connection):
        for token in params.tokens:
            carried = token_expiration_micros(token)
            rowid = None if carried is None else token_locator(token)
            if carried is None or carried <= now:
                continue  # unparseable or expired: no row
            if rowid is None:
                renewals.append(LeaseRenewal(token, None, None))  # not a SQLite lease
                continue
            new_token = handed_out_token(new_stored_token(expiration), rowid)
            row = connection.execute(
                statements.renew,
                {
                    "new_token": new_token,
                    "expiration": expiration,
                    "old_token": token,
                    "rowid": rowid,
                    "now": now,
                },
            ).fetchone()
            if row is None:
                renewals.append(LeaseRenewal(token, None, None))
            else:
                renewals.append(LeaseRenewal(token, new_token, from_micros(row[0])))
    return renewals


def release(connection: sqlite3.Connection, params: ReleaseParams, deliver: str) -> int:
    """Clear live leases so their messages are receivable after ``delay``."""
    statements = queue_statements(params.queue, deliver)
    now = now_micros(params.now)
    ready_at = now + _micros(params.delay)
    released = 0
    with map_errors(), _lease_transaction(connection):
        for token in params.tokens:
            rowid = token_locator(token)
            if rowid is None:
                continue
            error = params.error
            if error is not None:  # a failed attempt: its history gains an entry
                row = connection.execute(
                    statements.failures, {"rowid": rowid, "token": token, "now": now}
                ).fetchone()
                if row is None:
                    continue  # the lease is gone: nothing to release
                error = record_failure(row[0], error, params.failure, int(row[1]), from_micros(now))
            released += connection.execute(
                statements.release,
                {
                    "ready_at": ready_at,
                    "token": token,
                    "now": now,
                    "error": error,
                    "rowid": rowid,
                },
            ).rowcount
    return released


def next_ready(
    connection: sqlite3.Connection, queue: Table, deliver: str, now: Any
) -> float | None:
    """Seconds until the earliest message becomes ready (≤ 0: ready now); None when empty."""
    with map_errors():
        row = connection.execute(queue_statements(queue, deliver).next_ready).fetchone()
    if row is None or row[0] is None:
        return None
    return float(row[0] - now_micros(now)) / 1_000_000


def counts(connection: sqlite3.Connection, queue: Table, deliver: str, now: Any) -> dict[str, Any]:
    """ready / leased / scheduled counts and the oldest ready message's age."""
    current = now_micros(now)
    with map_errors():
        row = connection.execute(
            queue_statements(queue, deliver).counts, {"now": current}
        ).fetchone()
    ready, leased, scheduled, oldest = row
    return {
        "ready": ready or 0,
        "leased": leased or 0,
        "scheduled": scheduled or 0,
        "oldest_ready_age_seconds": None if oldest is None else (current - oldest) / 1_000_000,
    }
