"""On the emulator, a process's read-write transactions take turns (drivers/spanner/turns.py).

The emulator runs one read-write transaction at a time and aborts any other that reads or
writes meanwhile. Without turns, a process's concurrent transactions aborted each other and
each ran its function about three times (16 threads x 3 transactions: ~140 runs for 48);
with turns each runs once. The rules of the turns themselves (first come first served, a
nested transaction does not wait for its own holder, a bounded wait, a cancelled waiter
leaves the queue) are tested without the emulator.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter

import pytest

import txqueue
from txqueue.drivers.spanner.turns import AsyncTurn, Turn, Turns

THREADS = 16
EACH = 3
SCHEMA = "CREATE TABLE Counted (Id INT64 NOT NULL, Worker INT64 NOT NULL) PRIMARY KEY (Id)"


def test_concurrent_transactions_of_one_process_are_not_aborted(spanner_url: str) -> None:
    runs: Counter[int] = Counter()
    errors: list[BaseException] = []
    with txqueue.connect(spanner_url) as db:
        db.update_ddl([SCHEMA])

        def work(worker: int) -> None:
            try:
                for n in range(EACH):
                    key = worker * 100 + n

                    def write(txn: txqueue.Transaction, key: int = key) -> None:
                        runs[key] += 1
                        list(txn.execute_sql("SELECT COUNT(*) FROM Counted"))  # takes the lock
                        txn.insert("Counted", ("Id", "Worker"), [(key, worker)])

                    db.run_in_transaction(write)
            except BaseException as error:
                errors.append(error)

        threads = [threading.Thread(target=work, args=(w,)) for w in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors, errors
        with db.snapshot() as snapshot:
            [[count]] = snapshot.execute_sql("SELECT COUNT(*) FROM Counted")
    assert count == THREADS * EACH
    assert sum(runs.values()) == THREADS * EACH, f"re-runs after aborts: {runs}"


async def test_concurrent_async_transactions_of_one_process_are_not_aborted(
    spanner_url: str,
) -> None:
    runs: Counter[int] = Counter()
    db = await txqueue.connect_async(spanner_url)
    try:
        await db.update_ddl([SCHEMA])

        async def work(worker: int) -> None:
            for n in range(EACH):
                key = worker * 100 + n

                async def write(txn: txqueue.AsyncTransaction, key: int = key) -> None:
                    runs[key] += 1
                    await txn.execute_sql("SELECT COUNT(*) FROM Counted")
                    await txn.insert("Counted", ("Id", "Worker"), [(key, worker)])

                await db.run_in_transaction(write)

        await asyncio.wait_for(asyncio.gather(*(work(w) for w in range(THREADS))), 60)
        async with db.snapshot() as snapshot:
            [[count]] = await snapshot.execute_sql("SELECT COUNT(*) FROM Counted")
    finally:
        await db.close()
    assert count == THREADS * EACH
    assert sum(runs.values()) == THREADS * EACH, f"re-runs after aborts: {runs}"


def test_turns_go_first_come_first_served_and_nested_ones_do_not_wait() -> None:
    turns = Turns()
    holder = Turn(turns)
    holder.take()
    assert holder.held
    nested = Turn(turns)
    nested.take(wait=0)  # the same thread again: goes ahead without waiting
    assert not nested.held
    order: list[int] = []
    started: list[threading.Event] = []

    def waiter(number: int) -> None:
        turn = Turn(turns)
        started[number].set()
        turn.take(wait=30)
        order.append(number)
        turn.give_back()

    threads = []
    for number in range(3):
        started.append(threading.Event())
        threads.append(threading.Thread(target=waiter, args=(number,)))
        threads[-1].start()
        assert started[number].wait(5)
        time.sleep(0.05)  # so that it has asked before the next one does
    assert order == []
    holder.give_back()
    for thread in threads:
        thread.join(10)
    assert order == [0, 1, 2]
    last = Turn(turns)
    last.take(wait=0)
    assert last.held  # free again
    last.give_back()


def test_a_turn_waited_for_too_long_goes_ahead_without_it() -> None:
    turns = Turns()
    holder = Turn(turns)
    threading.Thread(target=holder.take).start()
    deadline = time.monotonic() + 5
    while not holder.held:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    late = Turn(turns)
    started = time.monotonic()
    late.take(wait=0.1)
    assert not late.held and time.monotonic() - started >= 0.1
    holder.give_back()
    after = Turn(turns)
    after.take(wait=0)
    assert after.held  # the late one left the queue: the turn was not given to it
    after.give_back()


async def test_async_turns_wait_without_blocking_and_a_cancelled_waiter_leaves() -> None:
    turns = Turns()
    holder = AsyncTurn(turns)
    await holder.take()

    async def take(turn: AsyncTurn, wait: float) -> None:
        await turn.take(wait)

    cancelled = AsyncTurn(turns)
    waiting = asyncio.create_task(take(cancelled, 30))
    second = AsyncTurn(turns)
    waiting_second = asyncio.create_task(take(second, 30))
    await asyncio.sleep(0.05)  # the loop runs meanwhile: both are queued
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    holder.give_back()
    await asyncio.wait_for(waiting_second, 5)
    assert second.held and not cancelled.held
    second.give_back()
    timed_out = AsyncTurn(turns)
    await timed_out.take(0)
    assert timed_out.held
    timed_out.give_back()
