"""The dispatcher's recorder: attempts committed in groups, lingering for a fuller group only
while more answers are coming, and never longer than its linger."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta, timezone

import pytest

import txqueue
from txqueue.events.recorder import AttemptRecord, Recorder
from txqueue.events.records import DELIVERIES, Delivery, DeliveryAttempt
from txqueue.models import Message

HOUR = timedelta(hours=1)


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[txqueue.AsyncDatabase]:
    adb = await txqueue.connect_async(database_url)
    try:
        await txqueue.AsyncEvents(adb).ensure_tables()
        yield adb
    finally:
        await adb.close()


async def _leased(adb: txqueue.AsyncDatabase, count: int) -> list[Message]:
    """``count`` deliveries sent and received under a lease, as a dispatcher holds them."""
    payload = Delivery("orders", {"id": "e"}).encode()

    async def send(txn: txqueue.AsyncTransaction) -> None:
        for number in range(count):
            await txn.send(DELIVERIES, ("notify", f"uid-{number}"), payload)

    await adb.run_in_transaction(send)
    leased = await adb.receive_now(DELIVERIES, max_batch_size=count, lease_duration=HOUR)
    assert len(leased) == count
    return leased


def _record(message: Message) -> AttemptRecord:
    name, uid = message.key
    now = datetime.now(timezone.utc)
    row = DeliveryAttempt(
        uid, name, 1, "orders", now, "delivered", "success", 204, None, timedelta(0)
    )
    return AttemptRecord(message.key, message.lease_token, row)


async def _logged(adb: txqueue.AsyncDatabase, messages: list[Message]) -> int:
    """How many of ``messages`` have their attempt in the log."""
    events = txqueue.AsyncEvents(adb)
    return sum([len(await events.attempts(m.key[1])) for m in messages])


async def _recording(
    adb: txqueue.AsyncDatabase, limit: int, linger: timedelta, more_coming: Callable[[], bool]
) -> tuple[Recorder, asyncio.Task[None]]:
    recorder = Recorder(adb, limit=limit, linger=linger, more_coming=more_coming)
    return recorder, asyncio.create_task(recorder.run())


def _submit(recorder: Recorder, message: Message) -> asyncio.Future[None]:
    told: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def recorded(error: BaseException | None) -> None:
        if error is None:
            told.set_result(None)
        else:
            told.set_exception(error)

    recorder.submit(_record(message), recorded)
    return told


async def test_a_lingering_group_commits_once_it_is_full(
    database: txqueue.AsyncDatabase,
) -> None:
    messages = await _leased(database, 4)
    recorder, running = await _recording(database, 4, timedelta(minutes=1), lambda: True)
    try:
        first = [_submit(recorder, m) for m in messages[:3]]
        await asyncio.sleep(0.3)  # without the linger these would be committed by now
        assert not any(told.done() for told in first)
        assert await _logged(database, messages) == 0
        last = _submit(recorder, messages[3])  # the group is full: committed at once
        await asyncio.wait_for(asyncio.gather(*first, last), 10)
        assert await _logged(database, messages) == 4
        assert await database.receive_now(DELIVERIES, max_batch_size=10) == []  # all acked
    finally:
        running.cancel()


async def test_no_linger_while_nothing_more_is_coming(database: txqueue.AsyncDatabase) -> None:
    [message] = await _leased(database, 1)
    recorder, running = await _recording(database, 64, timedelta(minutes=1), lambda: False)
    try:
        await asyncio.wait_for(_submit(recorder, message), 10)  # not a minute
        assert await _logged(database, [message]) == 1
    finally:
        running.cancel()


async def test_a_linger_ends_with_its_time_even_when_the_group_is_not_full(
    database: txqueue.AsyncDatabase,
) -> None:
    [message] = await _leased(database, 1)
    recorder, running = await _recording(database, 64, timedelta(milliseconds=50), lambda: True)
    try:
        await asyncio.wait_for(_submit(recorder, message), 10)
        assert await _logged(database, [message]) == 1
    finally:
        running.cancel()
