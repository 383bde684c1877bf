"""Wake-ups for waiting receivers, sent off the committing transaction's path.

A NOTIFY inside a transaction serialises commits: PostgreSQL holds a database-wide lock
from the NOTIFY's queueing until the end of COMMIT, including its WAL flush (River found
the same). Sent right after COMMIT in the committing pipeline, it still cost each commit a
statement, and a transaction that only sends could not be one plain statement.

So a commit only records the queues it sent to (``owe``, no I/O), and one thread per driver
sends them, on a connection of its own, as one NOTIFY statement for all the queues owed
since its last round. The NOTIFYs of many commits coalesce: at most one round per
``SPACING``, and the next round starts as soon as one is owed after that. A NOTIFY that
fails (connection dropped, server restarting) is not retried: receivers look again on
their own within the driver's fallback poll, as they do for a NOTIFY that never came.

A round is one simple-protocol query of ``pg_notify`` calls on literals, run by libpq itself
(``PGconn.exec_``, without the GIL): it costs the thread far less CPU than a cursor would,
CPU that lone sends committing beside it would otherwise lose (figures in
docs/performance-history.md).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq import ExecStatus

from txqueue.drivers.postgres.statements import CHANNEL

__all__ = ["Notifier"]

log = logging.getLogger("txqueue.postgres")

#: The shortest time between two NOTIFY rounds: a burst of commits shares one.
SPACING = 0.002
#: How long ``close`` waits for the last round.
CLOSE_TIMEOUT = 5.0


class Notifier:
    """Sends the NOTIFYs that committed transactions owe, from a daemon thread."""

    def __init__(self, conninfo: str) -> None:
        self._conninfo = conninfo
        self._start_fresh()

    def _start_fresh(self) -> None:
        """No thread, nothing owed: at creation, and in a forked child (whose copy of the
        lock may be held by a parent's thread that does not exist there)."""
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._owed: set[str] = set()
        self._closing = False
        self._thread: threading.Thread | None = None

    def owe(self, queues: Iterable[str]) -> None:
        """Record that transactions which sent to ``queues`` committed; returns at once."""
        if os.getpid() != self._pid:
            self._start_fresh()
        with self._lock:
            if self._closing:
                return
            self._owed.update(queues)
            if self._thread is None or not self._thread.is_alive():  # first use
                self._thread = threading.Thread(
                    target=self._run, name="txqueue-notifier", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def close(self) -> None:
        """Send what is owed, then end the thread and its connection."""
        if os.getpid() != self._pid:
            self._start_fresh()  # a forked child: nothing of its own to send
        with self._lock:
            self._closing = True
            thread = self._thread
        self._wake.set()
        if thread is not None:
            thread.join(CLOSE_TIMEOUT)

    def _run(self) -> None:
        connection: Any = None
        last = 0.0
        try:
            while True:
                self._wake.wait()
                pause = last + SPACING - time.monotonic()
                if pause > 0:
                    time.sleep(pause)  # let more commits owe, and share this round
                with self._lock:
                    self._wake.clear()
                    owed, self._owed = self._owed, set()
                    closing = self._closing
                if owed:
                    last = time.monotonic()
                    connection = self._notify(connection, tuple(sorted(owed)))
                if closing:
                    return
        finally:
            if connection is not None:
                connection.close()

    def _notify(self, connection: Any, queues: tuple[str, ...]) -> Any:
        """One NOTIFY round; returns the connection to use next (None after a failure)."""
        try:
            if connection is None:
                connection = psycopg.connect(self._conninfo, autocommit=True, connect_timeout=5)
                # It protects nothing durable: a crash ends every listener too.
                connection.execute("SET synchronous_commit = off")
            result = connection.pgconn.exec_(notify_query(queues))
            if result.status != ExecStatus.TUPLES_OK:
                message = result.error_message.decode(errors="replace").strip()
                raise psycopg.OperationalError(message or f"status {result.status}")
            return connection
        except psycopg.Error as error:
            log.warning("NOTIFY of %s failed (receivers look again): %s", list(queues), error)
            if connection is not None:
                connection.close()
            return None


@lru_cache(maxsize=256)
def notify_query(queues: tuple[str, ...]) -> bytes:
    """One ``pg_notify`` per queue, in one statement of literals."""
    calls = (sql.SQL("pg_notify({}, {})").format(CHANNEL, queue) for queue in queues)
    return sql.SQL("SELECT {}").format(sql.SQL(", ").join(calls)).as_bytes(None)
