"""What ``connect`` says while a PostgreSQL server does not answer (both faces).

A server that is down or starting up is waited for; each failed attempt is reported on the
``txqueue.postgres.connect`` logger, naming host:port and the reason: the first as one
WARNING (what an application sees, once), the retries as INFO (what the ``txqueue`` command
prints, a line each). The pool opens only once the server answered, so psycopg_pool's own
retries, and its log line for each, never start for a server that is not there.
"""

from __future__ import annotations

import logging
import re

import psycopg
from psycopg.conninfo import conninfo_to_dict

__all__ = ["connect_failure", "log", "report_retry", "server_name"]

log = logging.getLogger("txqueue.postgres.connect")

_SERVER_PREFIX = re.compile(r'^(connection failed: )?connection to server (at|on) "[^"]*"[^:]*: ')


def server_name(conninfo: str) -> str:
    """``host:port`` of the conninfo (each of several hosts, comma-separated)."""
    try:
        params = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return "the server"
    hosts = str(params.get("host") or params.get("hostaddr") or "localhost").split(",")
    ports = str(params.get("port") or "5432").split(",")
    if len(ports) == 1:
        ports *= len(hosts)
    return ",".join(f"{host}:{port}" for host, port in zip(hosts, ports))


def connect_failure(error: psycopg.OperationalError) -> str:
    """libpq's reason in a few words (``Connection refused``), without the host it names."""
    for line in str(error).splitlines():
        reason = _SERVER_PREFIX.sub("", line.strip()).removeprefix("connection failed: ")
        if reason:
            return reason
    return type(error).__name__


def report_retry(attempt: int, server: str, reason: str, waited: float, limit: float) -> None:
    """Say that attempt ``attempt`` failed and another follows (WARNING once, then INFO)."""
    if attempt == 1:
        log.warning(
            "PostgreSQL at %s is not answering (%s); waiting up to %g s for it",
            server,
            reason,
            limit,
        )
    else:
        log.info(
            "PostgreSQL at %s: attempt %d failed after %.1f s (%s); retrying",
            server,
            attempt,
            waited,
            reason,
        )
