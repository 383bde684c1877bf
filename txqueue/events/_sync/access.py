# Generated from txqueue/events/_async/access.py by tools/async_to_sync.py; do not edit.
"""Engine SQL on the event layer's own tables, beneath the public (Spanner) SQL front end.

The public ``execute_sql`` speaks the database's Spanner dialect and refuses txqueue's reserved
``txqueue_`` names, so the event layer reads its tables with the faces' engine-SQL methods
(``execute_engine_sql`` / ``execute_engine_update``).

Generated from ``txqueue/events/_async/access.py`` by ``tools/async_to_sync.py``; do not edit.
"""

from __future__ import annotations

from typing import Any

from txqueue._sync.database import Database, Transaction

__all__ = ["engine_query", "engine_update"]


def engine_query(
    database: Database,
    sql: str,
    params: list[Any] | None = None,
    transaction: Transaction | None = None,
) -> list[tuple[Any, ...]]:
    """Rows of an engine-SQL query, in ``transaction`` or in a read-only snapshot of its own."""
    if transaction is not None:
        return (transaction.execute_engine_sql(sql, params)).rows
    with database.snapshot() as snapshot:
        return (snapshot.execute_engine_sql(sql, params)).rows


def engine_update(transaction: Transaction, sql: str, params: list[Any]) -> int:
    """Run engine-SQL DML in ``transaction``; returns the row count."""
    return transaction.execute_engine_update(sql, params)
