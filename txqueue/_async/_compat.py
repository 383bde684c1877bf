"""What differs between the faces beyond async/await: threads, sleeping, waiting on sockets.

Hand-written in both ``_async`` and ``_sync``; the code generator leaves these files alone.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = [
    "CancelledError",
    "Lock",
    "acquire",
    "finish",
    "monotonic",
    "run_blocking",
    "sleep",
    "wait_readable",
]

T = TypeVar("T")
Lock = asyncio.Lock
CancelledError = asyncio.CancelledError
monotonic = time.monotonic


async def run_blocking(function: Callable[..., T], *args: Any) -> T:
    """Run blocking driver work (SQLite calls) on a worker thread."""
    return await asyncio.to_thread(function, *args)


async def finish(operation: Awaitable[T]) -> tuple[T, bool]:
    """Await ``operation`` to its end even when this task is cancelled meanwhile.

    For statements that take leases: a cancellation landing while one runs (on a thread, or
    with its result on the wire) would drop the result, and the messages would stay leased by
    no one until the lease expired. Returns the result and whether a cancellation arrived;
    the caller gives back what it took, then raises ``CancelledError``.
    """
    task = asyncio.ensure_future(operation)
    cancelled = False
    while True:
        try:
            return await asyncio.shield(task), cancelled
        except asyncio.CancelledError:
            if task.cancelled():
                raise
            cancelled = True
        except BaseException:
            if cancelled:  # it failed, so it took nothing: the cancellation goes on
                raise asyncio.CancelledError from None
            raise


async def sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


async def wait_readable(sock: socket.socket, timeout: float) -> bool:
    """Wait until ``sock`` is readable or ``timeout`` passes; True when readable."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(sock.fileno(), wake)
    try:
        await asyncio.wait_for(ready, max(timeout, 0.0))
        return True
    except asyncio.TimeoutError:
        return False
    finally:
        loop.remove_reader(sock.fileno())


async def acquire(lock: asyncio.Lock, timeout: float) -> bool:
    """Take ``lock`` within ``timeout`` seconds; False when it could not."""
    try:
        await asyncio.wait_for(lock.acquire(), timeout)
    except asyncio.TimeoutError:
        return False
    return True
