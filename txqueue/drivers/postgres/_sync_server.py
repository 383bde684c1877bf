# Generated from txqueue/drivers/postgres/_async_server.py by tools/async_to_sync.py; do not edit.
"""The PostgreSQL server as the driver meets it: waiting for one that is down at connect,
checking a pooled connection before it is lent, and waiting for a commit to be replicated.

Generated from ``txqueue/drivers/postgres/_async_server.py``
by ``tools/async_to_sync.py``; do not edit.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import psycopg
from psycopg.pq import ExecStatus
from psycopg_pool import ConnectionPool

from txqueue.drivers._sync_compat import monotonic, sleep, wait_readable
from txqueue.drivers.postgres.codec import refused_for_good
from txqueue.drivers.postgres.connections import has_input
from txqueue.drivers.postgres.reachability import connect_failure, report_retry, server_name
from txqueue.drivers.postgres.statements import RESOLVER_BARRIER
from txqueue.errors import Unavailable

__all__ = ["check_lent", "replicated", "wait_for_server"]


def replicated(connection: Any, timeout: float) -> bool:
    """Commit one small write with ``synchronous_commit = on`` and wait up to ``timeout``
    for the reply: it comes once the server's synchronous standbys (at once when it has
    none) hold its WAL, so every commit before it too. False without a reply in time, and
    the connection is closed: cancelling the wait would let this commit through
    unreplicated with no more than a warning. COMMIT is sent by libpq directly, and waited
    for on its socket, because a blocking execute could not be given up."""
    # No statement_timeout: one firing during the wait would cancel it, the same way.
    connection.execute("BEGIN; SET LOCAL synchronous_commit = on; SET LOCAL statement_timeout = 0")
    connection.execute(RESOLVER_BARRIER)
    pgconn = connection.pgconn
    deadline = monotonic() + timeout
    pgconn.send_query(b"COMMIT")
    with socket.socket(fileno=os.dup(pgconn.socket)) as sock:
        while pgconn.flush() or pgconn.is_busy():  # a few bytes: sent at once
            remaining = deadline - monotonic()
            if remaining <= 0 or not wait_readable(sock, remaining):
                connection.close()
                return False
            pgconn.consume_input()
    replied = True
    while (result := pgconn.get_result()) is not None:
        replied = replied and result.status == ExecStatus.COMMAND_OK
    return replied


def check_lent(connection: Any) -> None:
    """Before the pool lends an idle connection: one whose server ended it (a failover
    restarts the old primary; an administrator terminated it) has something to read on its
    socket, and only then is it checked with a round trip, which fails for an ended one:
    the pool then discards it and lends another."""
    if has_input(connection):
        ConnectionPool.check_connection(connection)


def wait_for_server(conninfo: str, timeout: float) -> None:
    """Connect directly until the server answers, for up to ``timeout`` seconds: a refusal for
    good (no such database or role, a wrong password) fails at once; a server that is down or
    starting up is tried again with growing pauses, each failure reported (``reachability``),
    and the final Unavailable carries the last reason. The pool opens only after this."""
    server = server_name(conninfo)
    started = monotonic()
    attempt = 0
    while True:
        attempt += 1
        remaining = timeout - (monotonic() - started)
        try:
            probe = psycopg.Connection.connect(conninfo, connect_timeout=max(2, int(remaining)))
        except psycopg.OperationalError as error:
            if refused_for_good(error):
                raise
            reason = connect_failure(error)
            waited = monotonic() - started
            if waited >= timeout:
                raise Unavailable(
                    f"PostgreSQL at {server} did not answer within {timeout:g} s: {reason}"
                ) from error
            report_retry(attempt, server, reason, waited, timeout)
            sleep(min(0.5 * 2 ** (attempt - 1), 5.0, timeout - waited))
            continue
        probe.close()
        return
