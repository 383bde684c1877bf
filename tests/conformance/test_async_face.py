"""What only the asyncio face has: tasks. A stream receiving while another task sends,
receivers gathered on one loop, and a receive cancelled while its statement runs.

The rest of the contract runs on this face through the whole conformance suite (the ``face``
fixture, ids ``[async-...]``); these tests await the face directly.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import pytest
import spannerserver

import txqueue

from .support import SKEW, Names, is_postgres, is_spanner, seconds, utcnow


class AsyncEnv:
    """An async database with the shared schema, plus short-hands."""

    def __init__(self, db: Any, url: str) -> None:
        self.db = db
        self.url = url
        self.names = Names.for_dialect(db.dialect)
        self.tasks = self.names.tasks

    async def add_users(self, *user_ids: int) -> None:
        async with self.db.batch() as b:
            b.insert(
                self.names.users,
                columns=self.names.user_columns,
                values=[(user_id, f"user {user_id}") for user_id in user_ids],
            )

    async def send(self, user_id: int, message_id: str, payload: bytes = b"payload") -> None:
        async with self.db.batch() as b:
            b.send(queue=self.tasks, key=(user_id, message_id), payload=payload)

    async def receive_timed(
        self,
        *,
        max_duration: timedelta = timedelta(seconds=5),
        max_batch_size: int = 1,
        lease_duration: timedelta = timedelta(seconds=10),
        limit: int | None = None,
    ) -> list[tuple[txqueue.Message, datetime]]:
        got: list[tuple[txqueue.Message, datetime]] = []
        stream = self.db.receive(
            self.tasks,
            max_duration=max_duration,
            max_batch_size=max_batch_size,
            lease_duration=lease_duration,
        )
        try:
            async for message in stream:
                got.append((message, utcnow()))
                if limit is not None and len(got) >= limit:
                    break
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        return got

    async def receive(self, **kwargs: Any) -> list[txqueue.Message]:
        return [message for message, _ in await self.receive_timed(**kwargs)]

    async def receive_one(self, **kwargs: Any) -> txqueue.Message:
        got = await self.receive(limit=1, **kwargs)
        assert len(got) == 1, "expected a message within max_duration"
        return got[0]


@pytest.fixture
async def aenv(database_url: str) -> AsyncIterator[AsyncEnv]:
    db = await txqueue.connect_async(database_url)
    try:
        await db.update_ddl(list(Names.for_dialect(db.dialect).ddl))
        yield AsyncEnv(db, database_url)
    finally:
        await db.close()


async def test_receive_stream_gets_a_later_send(aenv: AsyncEnv) -> None:
    await aenv.add_users(1)
    started = time.monotonic()
    receiving = asyncio.create_task(aenv.receive_timed(max_duration=seconds(6)))
    await asyncio.sleep(1.0)  # pacing: let the stream reach its wait before the send
    assert not receiving.done()

    await aenv.send(1, "streamed", b"ping")
    sent_at = utcnow()
    received = await asyncio.wait_for(receiving, timeout=30)
    ended = time.monotonic()

    assert [m.key for m, _ in received] == [(1, "streamed")]
    assert received[0][1] - sent_at < seconds(4)
    assert ended - started >= 6 - SKEW.total_seconds(), "the stream ended before max_duration"


async def test_concurrent_receivers_split_messages(aenv: AsyncEnv) -> None:
    await aenv.add_users(1)
    async with aenv.db.batch() as b:
        for i in range(20):
            b.send(queue=aenv.tasks, key=(1, f"m{i:02}"), payload=b"x")

    results = await asyncio.gather(
        *(aenv.receive(max_duration=seconds(2), max_batch_size=3) for _ in range(3))
    )

    keys = [m.key for result in results for m in result]
    assert sorted(keys) == [(1, f"m{i:02}") for i in range(20)], "each message leased once"


class TableLock:
    """Another connection holding the queue's table, so a receive statement waits inside the
    database (SQLite: the write lock, for one 100 ms busy wait at a time; PostgreSQL: an
    ACCESS EXCLUSIVE lock, for as long as it is held; Spanner's emulator: stopped, as long
    as it is held)."""

    def __init__(self, url: str, table: str) -> None:
        self.url, self.table = url, table
        self._connection: Any = None

    def hold(self) -> None:
        if is_spanner(self.url):
            # The emulator does not make a transaction wait for another's locks (it aborts
            # one of them): the emulator stopped for a moment stands for a held lock.
            [self._connection] = spannerserver.running()
            self._connection.pause()
        elif is_postgres(self.url):
            import psycopg

            self._connection = psycopg.connect(self.url)
            self._connection.execute(f"LOCK TABLE {self.table} IN ACCESS EXCLUSIVE MODE")
        else:
            path = self.url.removeprefix("sqlite:///").split("?")[0]
            self._connection = sqlite3.connect(path, isolation_level=None)
            self._connection.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        if is_spanner(self.url):
            self._connection.resume()
            return
        if is_postgres(self.url):
            self._connection.commit()
        else:
            self._connection.execute("COMMIT")
        self._connection.close()


@pytest.mark.parametrize("consumer_kind", ["stream", "receive_now"])
async def test_a_receive_cancelled_mid_statement_gives_its_leases_back(
    aenv: AsyncEnv, consumer_kind: str
) -> None:
    """A cancellation that lands while the lease statement runs (a worker stopping, a
    timeout) must not leave the messages leased by no one until the lease expires: the
    statement is let finish and what it leased is released at once. The loop retries until
    the cancellation did land mid-statement (the message's delivery count shows it)."""
    await aenv.add_users(1)
    await aenv.send(1, "tick")
    lock = TableLock(aenv.url, aenv.tasks.lower())
    landed_mid_statement = 0
    for _ in range(10):
        lock.hold()
        try:
            if consumer_kind == "stream":
                consumer = asyncio.create_task(aenv.receive(max_duration=seconds(5), limit=1))
            else:
                consumer = asyncio.create_task(aenv.db.receive_now(aenv.tasks))
            await asyncio.sleep(0.05)  # pacing: let the statement reach the held lock
            consumer.cancel()
        finally:
            lock.release()
        with pytest.raises(asyncio.CancelledError):
            await consumer
        info = await aenv.db.queue_info(aenv.tasks)
        assert (info.ready, info.leased) == (1, 0), "a cancelled receive kept its lease"
        async with aenv.db.snapshot() as snapshot:
            rows = await snapshot.execute_sql("SELECT COUNT(*) FROM usertasks")
            assert [tuple(row) for row in rows] == [(1,)]
        message = await aenv.receive_one(max_duration=seconds(5))
        landed_mid_statement = message.delivery_count - 1
        await aenv.db.release_lease(aenv.tasks, [message.lease_token])
        if landed_mid_statement:
            break
    assert landed_mid_statement, "no cancellation landed while the statement ran"
