"""What the event layer's sync HTTP code calls where the asyncio one awaits (see ``_async_compat``).

Written by hand, as is ``_async_compat``: the generated sync code calls these in place of
that module's coroutines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import httpcore

__all__ = ["network_backend", "run_blocking", "within"]

T = TypeVar("T")


def within(result: T, seconds: float) -> T:
    """The call has already run, bounded by the attempt's deadline (`attempts.time_left`)."""
    return result


def run_blocking(function: Callable[..., T], *args: Any) -> T:
    """Run blocking work; the sync face simply calls it."""
    return function(*args)


def network_backend() -> httpcore.NetworkBackend:
    """httpcore's own network backend for the sync face (blocking sockets)."""
    return httpcore.SyncBackend()
