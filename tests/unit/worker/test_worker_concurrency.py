"""Slots and the daemon thread pool."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from txqueue.worker.concurrency import DaemonThreadPool, Slots


async def test_take_takes_what_is_free_and_waits_when_none_is() -> None:
    slots = Slots(3)
    assert await slots.take(5) == 3
    assert slots.free == 0
    waiting = asyncio.create_task(slots.take(2))
    await asyncio.sleep(0)
    assert not waiting.done()
    slots.give(1)
    assert await waiting == 1
    slots.give(3)
    assert slots.free == 3


async def test_a_cancelled_waiter_takes_nothing() -> None:
    slots = Slots(1)
    await slots.take()
    waiting = asyncio.create_task(slots.take())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    slots.give()
    assert slots.free == 1


async def test_pool_runs_on_daemon_threads_with_the_callers_context() -> None:
    variable: contextvars.ContextVar[str] = contextvars.ContextVar("v", default="unset")
    variable.set("caller")
    pool = DaemonThreadPool(2)

    def probe() -> tuple[str, bool, str]:
        thread = threading.current_thread()
        return variable.get(), thread.daemon, thread.name

    value, daemon, name = await pool.run(probe)
    assert (value, daemon) == ("caller", True) and name.startswith("txqueue-handler")
    with pytest.raises(ZeroDivisionError):
        await pool.run(lambda: 1 / 0)
    pool.shutdown()


async def test_pool_limits_its_threads() -> None:
    pool = DaemonThreadPool(2)
    release = threading.Event()
    running = []

    def block() -> None:
        running.append(threading.current_thread().name)
        release.wait(5)

    tasks = [asyncio.ensure_future(pool.run(block)) for _ in range(4)]
    while len(running) < 2:
        await asyncio.sleep(0.01)
    assert len(set(running)) == 2
    release.set()
    await asyncio.gather(*tasks)
    assert len(set(running)) == 2
    pool.shutdown()
