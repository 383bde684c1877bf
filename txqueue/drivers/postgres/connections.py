"""The connections of txqueue's PostgreSQL pools: psycopg's, with what txqueue keeps per
connection (both faces; the drivers' pools make these instead of plain connections).

- ``commit_slot``: the row of ``txqueue_commits`` whose token this connection's commits
  replace (its backend's pid and start time, unique on the server), set when the pool
  configures it.
- ``execute_kept``: ``execute`` on one cursor kept for the connection's life. psycopg's
  ``connection.execute`` makes a cursor per statement, whose cache of adapters starts
  empty: ~12 µs of client CPU a statement, about a tenth of a lone
  send's. Only for statements with a small result, read before the connection runs
  another: the kept cursor holds it until then, idle in the pool too, so never for rows
  carrying payloads. Never inside a pipeline.
"""

from __future__ import annotations

import select
from typing import Any

import psycopg

from txqueue.errors import FailedPrecondition

__all__ = ["AsyncPooledConnection", "PooledConnection", "check_encoding", "has_input"]


def has_input(connection: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """Whether an idle connection's socket has something to read (a zero-timeout poll):
    the server ended it (an error message, or end of file), or a notification came. True
    for a connection already closed."""
    if connection.closed:
        return True
    try:
        readable, _, _ = select.select([connection.pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.OperationalError):
        return True
    return bool(readable)


class PooledConnection(psycopg.Connection[Any]):
    """A pooled connection (sync face)."""

    commit_slot: str = ""
    _kept: psycopg.Cursor[Any] | None = None

    def execute_kept(
        self, query: str, params: Any = None, *, binary: bool = False
    ) -> psycopg.Cursor[Any]:
        """Run ``query`` on the kept cursor; its result is valid until the next one."""
        cursor = self._kept
        if cursor is None or cursor.closed:
            cursor = self._kept = self.cursor()
        return cursor.execute(query, params, binary=binary)


class AsyncPooledConnection(psycopg.AsyncConnection[Any]):
    """A pooled connection (asyncio face)."""

    commit_slot: str = ""
    _kept: psycopg.AsyncCursor[Any] | None = None

    async def execute_kept(
        self, query: str, params: Any = None, *, binary: bool = False
    ) -> psycopg.AsyncCursor[Any]:
        """Run ``query`` on the kept cursor; its result is valid until the next one."""
        cursor = self._kept
        if cursor is None or cursor.closed:
            cursor = self._kept = self.cursor()
        return await cursor.execute(query, params, binary=binary)


def check_encoding(connection: Any) -> None:
    """FailedPrecondition for a SQL_ASCII database: it keeps text as unchecked bytes, which
    psycopg hands back as ``bytes``, so names, tokens and JSON would not read back."""
    if connection.info.parameter_status("server_encoding") == "SQL_ASCII":
        raise FailedPrecondition(
            f"database {connection.info.dbname!r} has the encoding SQL_ASCII, which keeps text "
            "as unchecked bytes: txqueue needs UTF8. Create the database with ENCODING 'UTF8' "
            "(CREATE DATABASE name ENCODING 'UTF8' TEMPLATE template0) and move the data there"
        )
