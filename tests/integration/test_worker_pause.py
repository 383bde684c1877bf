"""A worker running when its queue is paused: the message it holds finishes and is acked, it
leases nothing more while the queue is paused, and it picks the queue up again on resume."""

from __future__ import annotations

import asyncio
import time

import pytest

import txqueue
from txqueue.worker import OutcomeKind, Worker

GOOGLESQL = [
    "CREATE TABLE Handled (Id INT64 NOT NULL) PRIMARY KEY (Id)",
    "CREATE QUEUE Tasks (Id INT64 NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)",
]
POSTGRESQL = [
    "CREATE TABLE handled (id bigint NOT NULL, PRIMARY KEY (id))",
    "CREATE QUEUE tasks (id bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))",
]


async def _send(db: txqueue.AsyncDatabase, keys: range) -> None:
    async with db.batch() as batch:
        for key in keys:
            batch.send("Tasks", (key,), b"{}")


async def _handled(db: txqueue.AsyncDatabase) -> list[int]:
    async with db.snapshot() as snapshot:
        rows = await snapshot.execute_sql("SELECT id FROM handled ORDER BY id")
    return [int(row[0]) for row in rows]


async def test_a_running_worker_finishes_its_lease_then_waits_out_the_pause(
    database_url: str,
) -> None:
    db = await txqueue.connect_async(database_url)
    await db.update_ddl(POSTGRESQL if db.dialect == "postgresql" else GOOGLESQL)
    app = txqueue.App(database_url)
    started: asyncio.Queue[int] = asyncio.Queue()
    finish_first = asyncio.Event()

    @app.handler("Tasks")
    async def handle(message: txqueue.Message) -> None:
        started.put_nowait(message.key[0])
        if message.key[0] == 1:
            await finish_first.wait()  # holds no transaction: the pause is not held up
        async with db.batch() as batch:
            batch.insert("Handled", ("Id",), [(message.key[0],)])

    await _send(db, range(1, 2))
    worker = Worker(app, concurrency=4)
    running = asyncio.create_task(worker.run())
    try:
        assert await asyncio.wait_for(started.get(), 60) == 1  # leased and running
        await db.pause_queue("Tasks")
        await _send(db, range(2, 5))  # sends are taken, and wake the worker's stream
        finish_first.set()
        deadline = time.monotonic() + 30
        while worker.stats.total(OutcomeKind.ACKED) < 1:
            assert time.monotonic() < deadline, "the leased message was not acked"
            await asyncio.sleep(0.01)
        assert await _handled(db) == [1]
        with pytest.raises(TimeoutError):  # nothing more is leased while paused
            await asyncio.wait_for(started.get(), 1.5)
        info = await db.queue_info("Tasks")
        assert (info.paused, info.ready, info.leased) == (True, 3, 0)

        await db.resume_queue("Tasks")
        keys = {await asyncio.wait_for(started.get(), 10) for _ in range(3)}
        assert keys == {2, 3, 4}
        while worker.stats.total(OutcomeKind.ACKED) < 4:
            assert time.monotonic() < deadline + 30, "the resumed messages were not acked"
            await asyncio.sleep(0.01)
        assert await _handled(db) == [1, 2, 3, 4]
    finally:
        worker.stop()
        await running
        await db.close()
