"""What the sync deliverer calls where the asyncio one awaits (see ``_async_compat``).

Written by hand, as is ``_async_compat``: the generated sync code calls these in place of
that module's coroutines.
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["within"]

T = TypeVar("T")


def within(result: T, seconds: float) -> T:
    """The call has already run, bounded per phase by httpx's timeouts: its result."""
    return result
