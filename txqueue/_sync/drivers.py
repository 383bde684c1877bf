# Generated from txqueue/_async/drivers.py by tools/async_to_sync.py; do not edit.
"""Choosing and opening the driver for a database URL (sync face).

Generated from ``txqueue/_async/drivers.py`` by ``tools/async_to_sync.py``; do not edit.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from txqueue.core.url import integer_option, parse_url
from txqueue.drivers._sync_protocol import Driver
from txqueue.errors import InvalidArgument

__all__ = ["open_driver"]


def open_driver(url: str, clock: Callable[[], datetime | None] | None) -> Driver:
    """The driver for ``url``; PostgreSQL needs the ``postgres`` extra (psycopg)."""
    parsed = parse_url(url)
    if parsed.engine == "sqlite":
        from txqueue.drivers.sqlite._sync import SqliteDriver

        busy = timedelta(milliseconds=integer_option(parsed, "busy_timeout_ms", 5000))
        return SqliteDriver(parsed.target, parsed.options.get("synchronous", "FULL"), busy, clock)
    try:
        from txqueue.drivers.postgres._sync import PostgresDriver
    except ImportError as error:  # pragma: no cover - depends on the installed extras
        raise InvalidArgument(
            "PostgreSQL support needs psycopg: pip install 'txqueue[postgres]'"
        ) from error
    driver = PostgresDriver(
        parsed.target,
        pool_size=integer_option(parsed, "pool_size", 10),
        clock=clock,
    )
    driver.open()
    return driver
