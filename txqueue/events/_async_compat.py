"""What the event layer's asyncio HTTP code awaits where the sync one calls (see ``_sync_compat``).

Written by hand, as is ``_sync_compat``: tools/async_to_sync.py maps this module's name to
that one's when it generates a sync twin, so each face gets its own meaning of ``within``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio.to_thread
import httpcore

__all__ = ["network_backend", "run_blocking", "within"]

T = TypeVar("T")


async def within(operation: Awaitable[T], seconds: float) -> T:
    """Await ``operation`` for at most ``seconds``; TimeoutError after that (a hard deadline)."""
    return await asyncio.wait_for(operation, timeout=seconds)


async def run_blocking(function: Callable[..., T], *args: Any) -> T:
    """Run blocking work (a DNS lookup) on a worker thread, off the event loop."""
    return await anyio.to_thread.run_sync(function, *args)


def network_backend() -> httpcore.AsyncNetworkBackend:
    """httpcore's own network backend for the asyncio face (anyio's)."""
    return httpcore.AnyIOBackend()
