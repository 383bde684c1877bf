"""Choosing and opening the driver for a database URL (asyncio face).

The sync twin ``txqueue/_sync/drivers.py`` is generated from this file
by ``tools/async_to_sync.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from txqueue.drivers._async_protocol import AsyncDriver
from txqueue.drivers.engines import parse_url, traits_named

__all__ = ["open_driver"]


async def open_driver(url: str, clock: Callable[[], datetime | None] | None) -> AsyncDriver:
    """The driver for ``url``, opened by the engine the URL's scheme names (its traits)."""
    parsed = parse_url(url)
    return await traits_named(parsed.engine).open_async_driver(parsed, clock)
