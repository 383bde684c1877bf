"""Acting on chosen messages on PostgreSQL: delete (cancel) them, or set when they are ready.

Functions over one pooled connection (autocommit; each opens its own transaction). The
messages are row-locked first (``FOR UPDATE``: a receive skips locked rows, and one leasing
them right now is waited for and its lease seen), so the lease check and the change are one
atomic step; the whole selection takes four round trips whatever its size.

The sync twin ``txqueue/drivers/postgres/_sync_actions.py`` is generated from this file
by ``tools/async_to_sync.py``.
"""

from __future__ import annotations

from typing import Any

from txqueue.drivers.base import (
    DeleteMessagesParams,
    MakeReadyParams,
    messages_leased,
    messages_missing,
)
from txqueue.drivers.postgres.codec import encode, map_errors
from txqueue.drivers.postgres.statements import action_statements

__all__ = ["delete_messages", "make_ready"]


async def delete_messages(connection: Any, params: DeleteMessagesParams, deliver: str) -> int:
    """Delete every message of ``params.keys``, or none (see ``DeleteMessagesParams``)."""
    statements = action_statements(params.queue, deliver)
    return await _act(connection, params, deliver, statements.delete, {})


async def make_ready(connection: Any, params: MakeReadyParams, deliver: str) -> int:
    """Set the deliver time of every message of ``params.keys``, or of none."""
    statements = action_statements(params.queue, deliver)
    values = {"deliver": params.deliver_time, "now": params.now}
    return await _act(connection, params, deliver, statements.make_ready, values)


async def _act(
    connection: Any,
    params: DeleteMessagesParams | MakeReadyParams,
    deliver: str,
    change: str,
    values: dict[str, Any],
) -> int:
    table = params.queue
    arguments: dict[str, Any] = {"now": params.now}
    for i, column in enumerate(table.key_columns):
        arguments[f"k{i}"] = [encode(column, key[i]) for key in params.keys]
    with map_errors():
        async with connection.transaction():
            cursor = await connection.execute(action_statements(table, deliver).lock, arguments)
            rows = await cursor.fetchall()
            found = {int(place) - 1: (bool(leased), location) for place, leased, location in rows}
            missing = [key for i, key in enumerate(params.keys) if i not in found]
            if missing:
                raise messages_missing(table, missing)
            leased = [key for i, key in enumerate(params.keys) if found[i][0]]
            if leased and not params.force:
                raise messages_leased(table, leased)
            locations = [location for _, location in found.values()]
            cursor = await connection.execute(change, {**values, "locations": locations})
            return int(cursor.rowcount)
