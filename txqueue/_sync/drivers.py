# Generated from txqueue/_async/drivers.py by tools/async_to_sync.py; do not edit.
"""Choosing and opening the driver for a database URL (sync face).

Generated from ``txqueue/_async/drivers.py`` by ``tools/async_to_sync.py``; do not edit.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from txqueue.drivers._sync_protocol import Driver
from txqueue.drivers.engines import parse_url, traits_named

__all__ = ["open_driver"]


def open_driver(url: str, clock: Callable[[], datetime | None] | None) -> Driver:
    """The driver for ``url``, opened by the engine the URL's scheme names (its traits)."""
    parsed = parse_url(url)
    return traits_named(parsed.engine).open_driver(parsed, clock)
