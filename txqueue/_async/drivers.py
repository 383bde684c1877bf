"""Choosing and opening the driver for a database URL (asyncio face).

The sync twin ``txqueue/_sync/drivers.py`` is generated from this file
by ``tools/async_to_sync.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from txqueue.core.url import integer_option, parse_url
from txqueue.drivers._async_protocol import AsyncDriver
from txqueue.errors import InvalidArgument

__all__ = ["open_driver"]


async def open_driver(url: str, clock: Callable[[], datetime | None] | None) -> AsyncDriver:
    """The driver for ``url``; PostgreSQL needs the ``postgres`` extra (psycopg)."""
    parsed = parse_url(url)
    if parsed.engine == "sqlite":
        from txqueue.drivers.sqlite._async import AsyncSqliteDriver

        busy = timedelta(milliseconds=integer_option(parsed, "busy_timeout_ms", 5000))
        return AsyncSqliteDriver(
            parsed.target, parsed.options.get("synchronous", "FULL"), busy, clock
        )
    try:
        from txqueue.drivers.postgres._async import AsyncPostgresDriver
    except ImportError as error:  # pragma: no cover - depends on the installed extras
        raise InvalidArgument(
            "PostgreSQL support needs psycopg: pip install 'txqueue[postgres]'"
        ) from error
    driver = AsyncPostgresDriver(
        parsed.target,
        pool_size=integer_option(parsed, "pool_size", 10),
        clock=clock,
    )
    await driver.open()
    return driver
