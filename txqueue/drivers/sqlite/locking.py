"""Taking SQLite's write lock within a millisecond of its release.

SQLite's busy handler (``sqlite3.connect(timeout=)``) sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25,
50, 50, 100 ms between its tries: a writer that finds the lock taken sleeps through the moment
it is given back, and the longer it has waited the longer it sleeps. Two processes that take
turns often (an application publishing events 200 times a second, and the dispatcher that
receives and acks them) waited 80–150 ms at the 99th percentile that way.

`begin_immediate` (and `without_busy_handler`, for a statement SQLite commits by itself) turns
the busy handler off for that one write and tries again every `RETRY_SECONDS` itself, up to
the connection's busy timeout. Every other statement keeps the busy handler: a read meets a
busy database only while another connection recovers or removes the WAL, rare and brief.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import Any, TypeVar

from txqueue.drivers.sqlite.authorizer import Guard
from txqueue.errors import TxqueueError

__all__ = [
    "RETRY_SECONDS",
    "Connection",
    "begin_immediate",
    "set_busy_timeout",
    "without_busy_handler",
]

T = TypeVar("T")

#: How long a writer waits between two tries of BEGIN IMMEDIATE while another one writes.
RETRY_SECONDS = 0.0005

_SQLITE_BUSY = 5


class Connection(sqlite3.Connection):
    """A ``sqlite3.Connection`` that knows its busy timeout (SQLite does not say it cheaply)
    and holds its authorizer (``authorizer.py``)."""

    busy_ms: int = 5000
    guard: Guard | None = None


def set_busy_timeout(connection: sqlite3.Connection, milliseconds: int) -> None:
    """How long this connection's statements wait for a lock before SQLite says it is busy."""
    connection.execute(f"PRAGMA busy_timeout={int(milliseconds)}")
    if isinstance(connection, Connection):
        connection.busy_ms = int(milliseconds)


def begin_immediate(connection: sqlite3.Connection) -> None:
    """``BEGIN IMMEDIATE``: the write lock now, tried every `RETRY_SECONDS` while another
    connection holds it, for up to the busy timeout; then the error SQLite gives."""
    without_busy_handler(connection, connection.execute, "BEGIN IMMEDIATE")


def without_busy_handler(connection: sqlite3.Connection, write: Callable[..., T], *args: Any) -> T:
    """``write(*args)``, the first write on ``connection`` outside any transaction (BEGIN
    IMMEDIATE, or a statement SQLite commits by itself), tried again every `RETRY_SECONDS`
    while another connection holds the write lock, for up to the busy timeout.

    A write that finds the lock taken has changed nothing, so trying it again is safe.
    """
    busy_ms = getattr(connection, "busy_ms", None)
    if busy_ms is None:  # not one of ours: SQLite's busy handler it is
        return write(*args)
    connection.execute("PRAGMA busy_timeout=0")
    try:
        deadline = None
        while True:
            try:
                return write(*args)
            except (sqlite3.OperationalError, TxqueueError) as error:
                if not _busy(error) or connection.in_transaction:
                    raise
                now = time.monotonic()
                if deadline is None:
                    deadline = now + busy_ms / 1000
                elif now >= deadline:
                    raise
            time.sleep(RETRY_SECONDS)
    finally:
        connection.execute(f"PRAGMA busy_timeout={busy_ms}")


def _busy(error: BaseException) -> bool:
    """Is this (or the SQLite error it was mapped from) SQLITE_BUSY?"""
    if not isinstance(error, sqlite3.OperationalError):
        cause = error.__cause__
        return isinstance(cause, sqlite3.OperationalError) and _busy(cause)
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return bool(code & 0xFF == _SQLITE_BUSY)
    return "database is locked" in str(error)
