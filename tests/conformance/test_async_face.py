"""The asyncio face (SPEC §4): the same contract through ``await txqueue.connect_async(url)``.

Buffered batch mutations are plain calls (``b.send``), transaction methods are awaited
(``await txn.send``), receive is an async iterator.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import pytest

import txqueue
from txqueue.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound

from .support import SKEW, Names, default_dialect, is_postgres, seconds, utcnow


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

    async def ack(self, key: tuple[Any, ...], lease_token: str | None = None) -> None:
        async with self.db.batch() as b:
            b.ack(queue=self.tasks, key=key, lease_token=lease_token)

    async def task_keys(self) -> list[tuple[Any, ...]]:
        async with self.db.snapshot() as snapshot:
            rows = await snapshot.execute_sql(
                "SELECT userid, messageid FROM usertasks ORDER BY userid, messageid"
            )
            return [tuple(row) for row in rows]

    async def user_ids(self) -> list[int]:
        async with self.db.snapshot() as snapshot:
            rows = await snapshot.execute_sql("SELECT userid FROM users ORDER BY userid")
            return [row[0] for row in rows]

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


class Boom(Exception):
    """An application error raised inside a transaction."""


async def test_connect_async_records_the_default_dialect(database_url: str) -> None:
    db = await txqueue.connect_async(database_url)
    try:
        assert db.dialect == default_dialect(database_url)
    finally:
        await db.close()


async def test_send_and_receive(aenv: AsyncEnv) -> None:
    await aenv.add_users(1)
    before = utcnow()
    await aenv.send(1, "welcome", b"hi")

    m = await aenv.receive_one()

    assert isinstance(m, txqueue.Message)
    assert (m.key, m.payload, m.delivery_count, m.last_in_batch) == ((1, "welcome"), b"hi", 1, True)
    assert isinstance(m.payload, bytes)
    assert m.deliver_time >= before - SKEW
    assert m.lease_expiration.utcoffset() == timedelta(0)
    await aenv.ack(m.key, lease_token=m.lease_token)
    assert await aenv.task_keys() == []


async def test_exception_inside_batch_discards_the_send(aenv: AsyncEnv) -> None:
    await aenv.add_users(1)

    with pytest.raises(Boom):
        async with aenv.db.batch() as b:
            b.send(queue=aenv.tasks, key=(1, "doomed"), payload=b"x")
            raise Boom

    assert await aenv.task_keys() == []
    assert await aenv.receive(max_duration=seconds(1.5)) == []


async def test_run_in_transaction_rolls_back_on_exception(aenv: AsyncEnv) -> None:
    await aenv.add_users(1)
    calls = []

    async def work(txn: Any) -> None:
        calls.append(txn)
        await txn.insert(aenv.names.users, columns=aenv.names.user_columns, values=[(2, "b")])
        await txn.send(queue=aenv.tasks, key=(1, "doomed"), payload=b"x")
        raise Boom

    with pytest.raises(Boom):
        await aenv.db.run_in_transaction(work)

    assert len(calls) == 1
    assert await aenv.user_ids() == [1]
    assert await aenv.receive(max_duration=seconds(1.5)) == []


async def test_run_in_transaction_commits_and_returns(aenv: AsyncEnv) -> None:
    async def work(txn: Any, user_id: int) -> int:
        await txn.insert(
            aenv.names.users, columns=aenv.names.user_columns, values=[(user_id, "new")]
        )
        await txn.send(queue=aenv.tasks, key=(user_id, "welcome"), payload=b"hi")
        rows = await txn.execute_sql("SELECT COUNT(*) FROM usertasks")
        [(count,)] = [tuple(row) for row in rows]
        return int(count)

    assert await aenv.db.run_in_transaction(work, 124) == 1
    assert await aenv.task_keys() == [(124, "welcome")]


async def test_duplicate_send_is_already_exists(aenv: AsyncEnv) -> None:
    await aenv.add_users(1)
    await aenv.send(1, "dup")

    with pytest.raises(AlreadyExists):
        async with aenv.db.batch() as b:
            b.send(queue=aenv.tasks, key=(1, "other"), payload=b"x")
            b.send(queue=aenv.tasks, key=(1, "dup"), payload=b"x")

    assert await aenv.task_keys() == [(1, "dup")]


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


async def test_lease_expiry_redelivers_with_delivery_count_2(aenv: AsyncEnv) -> None:
    await aenv.add_users(1)
    await aenv.send(1, "flaky")
    first = await aenv.receive_one(lease_duration=seconds(1))

    received = await aenv.receive_timed(max_duration=seconds(10), limit=1)

    assert len(received) == 1
    second, arrived = received[0]
    assert second.delivery_count == 2
    assert arrived >= first.lease_expiration + seconds(1) - SKEW
    with pytest.raises(FailedPrecondition):
        await aenv.ack(first.key, lease_token=first.lease_token)
    await aenv.ack(second.key, lease_token=second.lease_token)


async def test_renew_lease_rules(aenv: AsyncEnv) -> None:
    await aenv.add_users(1)
    await aenv.send(1, "a")
    m = await aenv.receive_one(lease_duration=seconds(5))

    [r] = await aenv.db.renew_lease(aenv.tasks, [m.lease_token], extension=seconds(20))
    assert r.old_token == m.lease_token
    assert r.new_token not in (None, m.lease_token)
    assert r.lease_expiration > m.lease_expiration

    stale = await aenv.db.renew_lease(aenv.tasks, [m.lease_token])
    assert all(row.new_token is None for row in stale)
    assert await aenv.db.renew_lease(aenv.tasks, ["garbage"]) == []
    with pytest.raises(FailedPrecondition):
        await aenv.ack(m.key, lease_token=m.lease_token)

    await aenv.ack(m.key, lease_token=r.new_token)
    [gone] = await aenv.db.renew_lease(aenv.tasks, [r.new_token])
    assert gone.new_token is None
    with pytest.raises(NotFound):
        await aenv.ack(m.key, lease_token=r.new_token)
    async with aenv.db.batch() as b:
        b.ack(queue=aenv.tasks, key=m.key, ignore_not_found=True)


async def test_bad_input_is_refused_and_changes_nothing(aenv: AsyncEnv) -> None:
    await aenv.add_users(1)

    with pytest.raises(InvalidArgument):
        async with aenv.db.batch() as b:
            b.send(queue=aenv.tasks, key=(1, "ok"), payload=b"x")
            b.send(
                queue=aenv.tasks, key=(1, "naive"), payload=b"x", deliver_time=datetime(2030, 1, 1)
            )
    with pytest.raises(InvalidArgument):
        async with aenv.db.batch() as b:
            b.send(queue=aenv.tasks, key=(1,), payload=b"x")
    with pytest.raises(InvalidArgument):
        await aenv.receive(lease_duration=timedelta(0))
    with pytest.raises(NotFound):
        async with aenv.db.batch() as b:
            b.send(queue="NoSuchQueue", key=(1, "m"), payload=b"x")

    assert await aenv.task_keys() == []


async def test_parent_delete_cascades(aenv: AsyncEnv) -> None:
    await aenv.add_users(1, 2)
    await aenv.send(1, "a")
    await aenv.send(2, "b")

    async def work(txn: Any) -> None:
        await txn.delete(aenv.names.users, keys=[(1,)])

    await aenv.db.run_in_transaction(work)

    assert await aenv.task_keys() == [(2, "b")]


class TableLock:
    """Another connection holding the queue's table, so a receive statement waits inside the
    database (SQLite: the write lock, for one 100 ms busy wait at a time; PostgreSQL: an
    ACCESS EXCLUSIVE lock, for as long as it is held)."""

    def __init__(self, url: str, table: str) -> None:
        self.url, self.table = url, table
        self._connection: Any = None

    def hold(self) -> None:
        if is_postgres(self.url):
            import psycopg

            self._connection = psycopg.connect(self.url)
            self._connection.execute(f"LOCK TABLE {self.table} IN ACCESS EXCLUSIVE MODE")
        else:
            path = self.url.removeprefix("sqlite:///").split("?")[0]
            self._connection = sqlite3.connect(path, isolation_level=None)
            self._connection.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        self._connection.commit() if is_postgres(self.url) else self._connection.execute("COMMIT")
        self._connection.close()


@pytest.mark.parametrize("face", ["stream", "receive_now"])
async def test_a_receive_cancelled_mid_statement_gives_its_leases_back(
    aenv: AsyncEnv, face: str
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
            if face == "stream":
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
