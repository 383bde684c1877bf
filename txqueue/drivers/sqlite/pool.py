"""A small pool of SQLite connections to one database file, shared by threads."""

from __future__ import annotations

import sqlite3
import threading
from datetime import timedelta

from txqueue.drivers.sqlite.engine import connect

__all__ = ["SqlitePool"]


class SqlitePool:
    """Hands out idle connections and opens new ones on demand; keeps up to ``max_idle``."""

    def __init__(self, path: str, synchronous: str, busy_timeout: timedelta, max_idle: int = 8):
        self.path = path
        self.synchronous = synchronous
        self.busy_timeout = busy_timeout
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._max_idle = max_idle
        self._closed = False

    def acquire(self) -> sqlite3.Connection:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return connect(self.path, self.synchronous, self.busy_timeout)

    def release(self, connection: sqlite3.Connection) -> None:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        with self._lock:
            if not self._closed and len(self._idle) < self._max_idle:
                self._idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
