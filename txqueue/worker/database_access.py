"""What the worker asks of the database, in its own words, on the asyncio and sync faces.

The worker runs on ``AsyncDatabase`` (``AsyncDatabaseAccess``); ``txqueue.testing.drain`` may
run on a plain ``Database`` (``SyncDatabaseAccess``). Both build their transactions from
``txqueue.worker.operations`` and apply them with ``txqueue.worker._async_apply`` or its
generated sync twin, so the rules live once.
"""

from __future__ import annotations

import abc
import asyncio
import inspect
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol

from txqueue._async.database import AsyncDatabase, AsyncTransaction
from txqueue._sync.database import Database, Transaction
from txqueue.core.schema import Table
from txqueue.errors import InvalidArgument
from txqueue.models import LeaseRenewal, Message
from txqueue.worker import _async_apply, _sync_apply
from txqueue.worker.acks import AckBatcher
from txqueue.worker.concurrency import DaemonThreadPool
from txqueue.worker.operations import Ack, Operation, run_handler_plan, run_plan

__all__ = ["AsyncDatabaseAccess", "DatabaseAccess", "SyncDatabaseAccess"]


class DatabaseAccess(Protocol):
    """The database operations the worker needs (one implementation per face)."""

    def now(self) -> datetime:
        """The pinned clock's time, else the machine's (UTC)."""

    async def queue(self, name: str) -> Table:
        """The schema of queue ``name``."""

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """Run a sync handler function (on a thread in the worker)."""

    async def apply(self, operations: Sequence[Operation]) -> None:
        """Apply ``operations`` in one transaction."""

    async def transact(
        self,
        function: Callable[..., Any],
        message: Message,
        before: Sequence[Operation],
        after: Sequence[Operation],
    ) -> None:
        """In one transaction: ``before``, then ``function(message, txn)``, then ``after``."""

    async def ack(self, queue: str, key: tuple[Any, ...], token: str) -> None:
        """Ack one message with its lease token (group-committed in the worker)."""

    async def release(
        self,
        queue: str,
        token: str,
        delay: timedelta,
        error: str | None,
        exception: BaseException | None = None,
    ) -> int:
        """Release a lease (receivable after ``delay``); returns 1, or 0 if it was lost.
        ``exception`` (what the attempt raised) joins the message's failure history."""

    async def dead_letter(
        self,
        queue: str,
        key: tuple[Any, ...],
        token: str,
        error: str,
        exception: BaseException | None = None,
    ) -> None:
        """Move a leased message to the dead letters (with ``exception`` as its last failure)."""

    async def renew(
        self, queue: str, tokens: Sequence[str], extension: timedelta
    ) -> list[LeaseRenewal]:
        """Renew leases by token."""


def _now(pinned: datetime | None) -> datetime:
    return pinned if pinned is not None else datetime.now(timezone.utc)


class _FaceAccess(abc.ABC):
    """What both faces ask of their database alike, written once: each face says only how
    it calls a method of its database (``_ask``: awaited, or inline)."""

    database: AsyncDatabase | Database

    @abc.abstractmethod
    async def _ask(self, method: Callable[..., Any], /, *args: Any, **options: Any) -> Any:
        """``method(*args, **options)`` of ``database``, as this face calls it."""

    def now(self) -> datetime:
        return _now(self.database.now())

    async def queue(self, name: str) -> Table:
        table: Table = await self._ask(self.database.queue, name)
        return table

    async def release(
        self,
        queue: str,
        token: str,
        delay: timedelta,
        error: str | None,
        exception: BaseException | None = None,
    ) -> int:
        released: int = await self._ask(
            self.database.release_lease,
            queue,
            [token],
            delay=delay,
            error=error,
            exception=exception,
        )
        return released

    async def dead_letter(
        self,
        queue: str,
        key: tuple[Any, ...],
        token: str,
        error: str,
        exception: BaseException | None = None,
    ) -> None:
        await self._ask(self.database.dead_letter, queue, key, token, error, exception=exception)

    async def renew(
        self, queue: str, tokens: Sequence[str], extension: timedelta
    ) -> list[LeaseRenewal]:
        renewals: list[LeaseRenewal] = await self._ask(
            self.database.renew_lease, queue, tokens, extension
        )
        return renewals


class AsyncDatabaseAccess(_FaceAccess):
    """The worker's database access: ``AsyncDatabase``, plus a sync ``Database`` for sync transactional
    handlers (they are given a ``txqueue.Transaction``), opened on first use."""

    database: AsyncDatabase

    def __init__(
        self,
        database: AsyncDatabase,
        pool: DaemonThreadPool,
        open_sync: Callable[[], Database] | None = None,
        acks: AckBatcher | None = None,
    ) -> None:
        self.database = database
        self._pool = pool
        self._open_sync = open_sync
        self._sync: Database | None = None
        self._opening = asyncio.Lock()
        self._acks = acks

    async def _ask(self, method: Callable[..., Any], /, *args: Any, **options: Any) -> Any:
        return await method(*args, **options)

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        return await self._pool.run(function, *args)

    async def apply(self, operations: Sequence[Operation]) -> None:
        async def once(plan: Sequence[Operation]) -> None:
            async def run(transaction: AsyncTransaction) -> None:
                await _async_apply.apply(transaction, plan, first=True)

            await self.database.run_in_transaction(run)

        await run_plan(once, operations)

    async def transact(
        self,
        function: Callable[..., Any],
        message: Message,
        before: Sequence[Operation],
        after: Sequence[Operation],
    ) -> None:

        if inspect.iscoroutinefunction(function):

            async def once_async(plan: Sequence[Operation]) -> None:
                async def run(transaction: AsyncTransaction) -> None:
                    await _async_apply.run_handler(transaction, function, message, before, plan)

                await self.database.run_in_transaction(run)

            await run_handler_plan(once_async, before, after)
            return
        database = await self._sync_database()

        async def once_sync(plan: Sequence[Operation]) -> None:
            def run(transaction: Transaction) -> None:
                _sync_apply.run_handler(transaction, function, message, before, plan)

            await self._pool.run(database.run_in_transaction, run)

        await run_handler_plan(once_sync, before, after)

    async def _sync_database(self) -> Database:
        async with self._opening:
            if self._sync is None:
                if self._open_sync is None:
                    raise InvalidArgument(
                        "sync transactional handlers need the database URL: run them from an App"
                    )
                self._sync = await self._pool.run(self._open_sync)
        return self._sync

    async def ack(self, queue: str, key: tuple[Any, ...], token: str) -> None:
        if self._acks is not None:
            await self._acks.ack(queue, key, token)
        else:
            await self.apply([Ack(queue, key, token)])

    def close_sync(self) -> None:
        """Close the sync database, if it was opened."""
        if self._sync is not None:
            self._sync.close()
            self._sync = None


class SyncDatabaseAccess(_FaceAccess):
    """Database access over a sync ``Database``, for ``txqueue.testing.drain``: calls block (the
    drain runs on its own loop), sync handlers run inline, async handlers on that loop."""

    database: Database

    def __init__(self, database: Database) -> None:
        self.database = database

    async def _ask(self, method: Callable[..., Any], /, *args: Any, **options: Any) -> Any:
        return method(*args, **options)

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        return function(*args)

    async def apply(self, operations: Sequence[Operation]) -> None:
        async def once(plan: Sequence[Operation]) -> None:
            self.database.run_in_transaction(lambda txn: _sync_apply.apply(txn, plan, first=True))

        await run_plan(once, operations)

    async def transact(
        self,
        function: Callable[..., Any],
        message: Message,
        before: Sequence[Operation],
        after: Sequence[Operation],
    ) -> None:

        if inspect.iscoroutinefunction(function):
            raise InvalidArgument(
                "async transactional handlers need an asyncio transaction: drain the App "
                "(or use drain_async with an AsyncDatabase) instead of a sync Database"
            )

        async def once(plan: Sequence[Operation]) -> None:
            def run(transaction: Transaction) -> None:
                _sync_apply.run_handler(transaction, function, message, before, plan)

            self.database.run_in_transaction(run)

        await run_handler_plan(once, before, after)

    async def ack(self, queue: str, key: tuple[Any, ...], token: str) -> None:
        await self.apply([Ack(queue, key, token)])
