"""What the asyncio deliverer awaits where the sync one simply calls (see ``_sync_compat``).

Written by hand, as is ``_sync_compat``: tools/async_to_sync.py maps this module's name to
that one's when it generates a sync twin, so each face gets its own meaning of ``within``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["within"]

T = TypeVar("T")


async def within(operation: Awaitable[T], seconds: float) -> T:
    """Await ``operation`` for at most ``seconds``; TimeoutError after that (a hard deadline)."""
    return await asyncio.wait_for(operation, timeout=seconds)
