"""txqueue's own timed waits on the asyncio face never lose a cancellation.

Before Python 3.12, ``asyncio.wait_for`` returns the result of an awaitable that completes in
the same turn of the loop as the caller's cancellation, and the cancellation is lost: a
cancelled receive stream on SQLite went on waiting and receiving until its max_duration. Each
test cancels 0–7 turns of the loop after the awaited event, so that some cancellation lands
in that window whatever the scheduling of the Python version, and every one must raise.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from txqueue.drivers._async_compat import acquire, wait_readable
from txqueue.worker.concurrency import Slots

TURNS = range(8)


async def _turns(count: int) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


async def test_a_wait_for_a_socket_cancelled_as_the_socket_becomes_readable_raises() -> None:
    cancelled_while_pending = []
    for turns in TURNS:
        left, right = socket.socketpair()
        try:
            left.setblocking(False)
            waiting = asyncio.ensure_future(wait_readable(left, 10.0))
            await _turns(2)
            right.send(b"x")
            await _turns(turns)
            if waiting.done():  # it returned before the cancellation: nothing to lose
                assert waiting.result() is True
                continue
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            cancelled_while_pending.append(turns)
        finally:
            left.close()
            right.close()
    assert len(cancelled_while_pending) >= 2, cancelled_while_pending


async def test_an_acquire_cancelled_as_the_lock_is_granted_raises_and_leaves_it_free() -> None:
    cancelled_while_pending = []
    for turns in TURNS:
        lock = asyncio.Lock()
        await lock.acquire()
        taking = asyncio.ensure_future(acquire(lock, 10.0))
        await _turns(2)
        lock.release()  # granted to the waiting acquisition
        await _turns(turns)
        if taking.done():
            assert taking.result() is True
            lock.release()
            continue
        taking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await taking
        cancelled_while_pending.append(turns)
        await _turns(3)  # the abandoned acquisition ends
        assert not lock.locked(), f"cancelled {turns} turns after the grant: the lock is held"
    assert len(cancelled_while_pending) >= 2, cancelled_while_pending


async def test_an_acquire_that_times_out_does_not_take_the_lock_later() -> None:
    lock = asyncio.Lock()
    await lock.acquire()
    assert await acquire(lock, 0.01) is False
    lock.release()
    await _turns(3)
    assert not lock.locked()
    assert await acquire(lock, 0.01) is True


async def test_a_fill_wait_cancelled_as_a_place_frees_raises_and_takes_nothing() -> None:
    cancelled_while_pending = []
    for turns in TURNS:
        slots = Slots(2)
        assert await slots.take(1) == 1
        filling = asyncio.ensure_future(slots.take(2, fill_within=10.0))
        await _turns(2)
        slots.give(1)  # both places free: the filling wait is over
        await _turns(turns)
        if filling.done():
            assert filling.result() == 2
            continue
        filling.cancel()
        with pytest.raises(asyncio.CancelledError):
            await filling
        cancelled_while_pending.append(turns)
        assert slots.used == 0
    assert len(cancelled_while_pending) >= 2, cancelled_while_pending
