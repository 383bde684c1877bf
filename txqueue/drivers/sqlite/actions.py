"""Acting on chosen messages on SQLite: delete (cancel) them, or set when they are ready.

Each call is one write transaction (BEGIN IMMEDIATE), so the lease check and the change are
one step: no receive can lease a message between them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from txqueue.core.durations import to_micros
from txqueue.drivers.base import (
    DeleteMessagesParams,
    MakeReadyParams,
    messages_leased,
    messages_missing,
)
from txqueue.drivers.sqlite.engine import encode_key, map_errors, now_micros
from txqueue.drivers.sqlite.locking import begin_immediate
from txqueue.drivers.sqlite.statements import QueueStatements, queue_statements

__all__ = ["delete_messages", "make_ready"]


def delete_messages(
    connection: sqlite3.Connection, params: DeleteMessagesParams, deliver: str
) -> int:
    """Delete every message of ``params.keys``, or none (see ``DeleteMessagesParams``)."""
    statements = queue_statements(params.queue, deliver)
    return _act(connection, params, statements, statements.delete_one, [])


def make_ready(connection: sqlite3.Connection, params: MakeReadyParams, deliver: str) -> int:
    """Set the deliver time of every message of ``params.keys``, or of none."""
    statements = queue_statements(params.queue, deliver)
    when = params.deliver_time
    ready = to_micros(when) if when is not None else now_micros(params.now)
    return _act(connection, params, statements, statements.make_ready, [ready])


def _act(
    connection: sqlite3.Connection,
    params: DeleteMessagesParams | MakeReadyParams,
    statements: QueueStatements,
    change: str,
    values: list[Any],
) -> int:
    table = params.queue
    now = now_micros(params.now)
    keys = [encode_key(table, key) for key in params.keys]
    with map_errors():
        begin_immediate(connection)
        try:
            _check(connection, params, statements, keys, now)
            changed = sum(connection.execute(change, [*values, *key]).rowcount for key in keys)
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
    return changed


def _check(
    connection: sqlite3.Connection,
    params: DeleteMessagesParams | MakeReadyParams,
    statements: QueueStatements,
    keys: Sequence[list[Any]],
    now: int,
) -> None:
    """Refuse the whole call when a key has no message, or a message is leased (no force)."""
    missing: list[tuple[Any, ...]] = []
    leased: list[tuple[Any, ...]] = []
    for key, encoded in zip(params.keys, keys):
        row = connection.execute(statements.lease_of, encoded).fetchone()
        if row is None:
            missing.append(key)
        elif row[0] is not None and row[0] > now:
            leased.append(key)
    if missing:
        raise messages_missing(params.queue, missing)
    if leased and not params.force:
        raise messages_leased(params.queue, leased)
