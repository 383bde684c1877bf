"""Concurrency primitives of the worker: counted slots, a pool of daemon threads, and
cancelling tasks for good.

Sync handlers run on daemon threads, not asyncio's default executor: a handler still running
when the shutdown grace period ends must not keep the process alive (its lease is released
and the message redelivered), and the default executor joins its threads at exit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import queue
import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from txqueue.drivers._async_compat import done_within

__all__ = ["DaemonThreadPool", "Slots", "cancel_and_wait"]

T = TypeVar("T")


class Slots:
    """A counter of free places (running handlers): take some, give them back, wait for one.

    ``give`` is synchronous, so a place can be given back from any callback of the loop.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.used = 0
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def free(self) -> int:
        """Places not taken right now."""
        return self.size - self.used

    async def wait_free(self) -> None:
        """Wait until at least one place is free (without taking it)."""
        while self.used >= self.size:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    async def take(self, most: int = 1, fill_within: float = 0.0) -> int:
        """Wait until a place is free, then take up to ``most`` of them; returns how many.

        With ``fill_within`` it waits that much longer (at most) for ``most`` places to be
        free while others are still busy, so a busy worker receives fuller batches.
        """
        most = min(most, self.size)  # waiting for more places than exist would be in vain
        await self.wait_free()
        if fill_within > 0 and self.free < most and self.used > 0:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + fill_within
            while self.free < most and self.used > 0:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                waiter = loop.create_future()
                self._waiters.append(waiter)
                try:
                    done = await done_within(waiter, remaining)
                finally:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)
                if not done:
                    break
        taken = min(most, self.size - self.used)
        self.used += taken
        return taken

    def take_now(self) -> bool:
        """Take one place if one is free and no one waits for it; whether it did."""
        if self.used >= self.size or self._waiters:
            return False
        self.used += 1
        return True

    def give(self, count: int = 1) -> None:
        """Give back ``count`` places and wake whoever waits for one."""
        if count <= 0:
            return
        self.used -= count
        # Woken waiters stay listed until they run (they remove themselves), so take_now
        # does not hand the place to a newcomer meanwhile.
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)


class DaemonThreadPool:
    """Runs blocking functions on up to ``size`` daemon threads, started on demand.

    Each call runs in a copy of the caller's context, so context variables (the current
    delivery) are visible to the handler, like ``asyncio.to_thread``.
    """

    def __init__(self, size: int, name: str = "txqueue-handler") -> None:
        self._size = size
        self._name = name
        self._work: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """Run ``function(*args)`` on a pool thread and await its result."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        context = contextvars.copy_context()

        def call() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(context.run(function, *args))
            except BaseException as error:
                future.set_exception(error)

        self._submit(call)
        return await asyncio.wrap_future(future)

    def _submit(self, call: Callable[[], None]) -> None:
        # The submitter claims an idle thread (or starts one) under the lock, so each call
        # has its own thread while the pool is below its size. Counting a thread idle from
        # its own loop instead let two calls claim one new thread, the second then waiting
        # behind the first however long it ran.
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
            elif len(self._threads) < self._size:
                thread = threading.Thread(
                    target=self._loop, name=f"{self._name}-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
            # else every thread is busy: the call waits for the first to finish
        self._work.put(call)

    def _loop(self) -> None:
        while True:
            call = self._work.get()
            if call is None:
                return
            call()
            with self._lock:
                self._idle += 1

    def shutdown(self) -> None:
        """Let idle threads end; busy ones end after their call (they never block exit)."""
        for _ in self._threads:
            self._work.put(None)


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]], nudge: float) -> None:
    """Cancel ``tasks`` and wait until each is done, cancelling again every ``nudge``
    seconds the ones still running; their outcomes are retrieved (as ``gather`` with
    ``return_exceptions`` does).

    One cancel is not always enough: before Python 3.12, ``asyncio.wait_for`` loses a
    cancellation that arrives as the awaitable it waits for completes (psycopg_pool waits
    for a connection so), and the task carries on as if never cancelled. A worker hung at
    shutdown that way, its queue poller back asleep and awaited forever.
    """
    everything = list(tasks)
    pending = {task for task in everything if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=nudge)
    for task in everything:
        if not task.cancelled():
            task.exception()
