"""Slots, the daemon thread pool, and cancelling tasks for good."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from txqueue.worker.concurrency import DaemonThreadPool, Slots, cancel_and_wait


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


async def test_take_now_leaves_a_freed_place_to_whoever_waited_for_it() -> None:
    slots = Slots(1)
    assert slots.take_now()
    assert not slots.take_now()
    waiting = asyncio.create_task(slots.take())
    await asyncio.sleep(0)
    slots.give()  # the waiter is woken but has not run yet
    assert not slots.take_now(), "a newcomer overtook the waiter"
    assert await waiting == 1
    slots.give()
    assert slots.take_now()


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


def test_every_call_up_to_the_size_runs_at_once() -> None:
    """Calls submitted together each get a thread while the pool is below its size.

    A thread that counted itself idle before taking its first call once let a second call
    wait behind a long handler (the SIGINT worker test saw two of three handlers start).
    Eight calls submitted back to back, thirty times, make that interleaving likely; the
    barrier breaks unless all eight run at the same time.
    """

    async def submit_all(pool: DaemonThreadPool, barrier: threading.Barrier) -> None:
        await asyncio.gather(*(pool.run(barrier.wait) for _ in range(8)))

    for _ in range(30):
        pool = DaemonThreadPool(8)
        asyncio.run(submit_all(pool, threading.Barrier(8, timeout=5)))
        pool.shutdown()


async def test_a_task_that_lost_its_cancellation_is_cancelled_again() -> None:
    """As a task does whose cancel ``asyncio.wait_for`` swallowed (Python < 3.12): it goes
    on as if never cancelled. A single cancel and ``gather`` would wait for it forever."""
    lost = 0

    async def loses_the_first_cancel() -> None:
        nonlocal lost
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            lost += 1
        await asyncio.sleep(3600)

    async def fails() -> None:
        raise RuntimeError("retrieved, not raised")

    stubborn = asyncio.create_task(loses_the_first_cancel())
    failed = asyncio.create_task(fails())
    await asyncio.sleep(0)
    once = asyncio.ensure_future(asyncio.gather(stubborn, return_exceptions=True))
    stubborn.cancel()
    done, _ = await asyncio.wait({once}, timeout=0.1)
    assert not done and lost == 1, "one cancel was lost: gather still waits"
    await asyncio.wait_for(cancel_and_wait([stubborn, failed], nudge=0.05), 5)
    assert stubborn.cancelled() and lost == 1
    assert isinstance(failed.exception(), RuntimeError)
    await once
