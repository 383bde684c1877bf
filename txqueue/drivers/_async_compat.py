"""What differs between the faces beyond async/await: threads, sleeping, waiting on sockets.

Written by hand in both ``_async_compat`` and ``_sync_compat`` (the code generator maps one
name to the other and leaves both files alone). They sit in ``txqueue.drivers``, below both
faces, because the drivers need them and no driver imports a face.
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


async def done_within(future: asyncio.Future[Any], timeout: float | None) -> bool:
    """Wait up to ``timeout`` seconds for ``future``; True when it is done. ``future`` is left
    as it is (not cancelled on timeout).

    txqueue's timed waits go through here rather than ``asyncio.wait_for`` (but the HTTP
    deliverer's two, each bounded by its timeout): before Python 3.12, ``wait_for`` returns
    the result of an awaitable that completes in the same turn of the loop as the caller's
    cancellation, and the cancellation is lost (a cancelled receive stream went on until its
    max_duration). ``asyncio.wait`` raises it either way.
    """
    done, _ = await asyncio.wait({future}, timeout=timeout)
    return bool(done)


async def wait_readable(sock: socket.socket, timeout: float) -> bool:
    """Wait until ``sock`` is readable or ``timeout`` passes; True when readable."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(sock.fileno(), wake)
    try:
        return await done_within(ready, max(timeout, 0.0))
    finally:
        loop.remove_reader(sock.fileno())


async def acquire(lock: asyncio.Lock, timeout: float) -> bool:
    """Take ``lock`` within ``timeout`` seconds; False when it could not. When the wait ends
    (timeout, or this task cancelled) just as the lock was granted, the lock is given back."""
    taking: asyncio.Future[bool] = asyncio.ensure_future(lock.acquire())
    try:
        done = await done_within(taking, timeout)
    except BaseException:
        _abandon(taking, lock)
        raise
    if done:
        return taking.result()
    _abandon(taking, lock)
    return False


def _abandon(taking: asyncio.Future[bool], lock: asyncio.Lock) -> None:
    """Stop waiting for ``lock``: cancel the acquisition, or release what it took."""

    def release_if_taken(task: asyncio.Future[bool]) -> None:
        if not task.cancelled() and task.exception() is None:
            lock.release()

    if taking.done():
        release_if_taken(taking)
    else:
        taking.cancel()  # asyncio.Lock gives a granted lock back when its taker is cancelled
        taking.add_done_callback(release_if_taken)
