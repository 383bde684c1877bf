"""Engine SQL on the event layer's own tables, beneath the public (Spanner) SQL front end.

The public ``execute_sql`` speaks the database's Spanner dialect and refuses txqueue's reserved
``txqueue_`` names, so the event layer reads its tables with the faces' engine-SQL methods
(``execute_engine_sql`` / ``execute_engine_update``).

The sync twin ``txqueue/events/_sync/access.py`` is generated from this file
by ``tools/async_to_sync.py``.
"""

from __future__ import annotations

from typing import Any

from txqueue._async.database import AsyncDatabase, AsyncTransaction

__all__ = ["engine_query", "engine_update"]


async def engine_query(
    database: AsyncDatabase,
    sql: str,
    params: list[Any] | None = None,
    transaction: AsyncTransaction | None = None,
) -> list[tuple[Any, ...]]:
    """Rows of an engine-SQL query, in ``transaction`` or in a read-only snapshot of its own."""
    if transaction is not None:
        return (await transaction.execute_engine_sql(sql, params)).rows
    async with database.snapshot() as snapshot:
        return (await snapshot.execute_engine_sql(sql, params)).rows


async def engine_update(transaction: AsyncTransaction, sql: str, params: list[Any]) -> int:
    """Run engine-SQL DML in ``transaction``; returns the row count."""
    return await transaction.execute_engine_update(sql, params)
