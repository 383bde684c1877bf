"""What the worker asks of the database, in its own words, for the asyncio and sync faces.

The worker runs on ``AsyncDatabase`` (``AsyncStore``); ``txqueue.testing.drain`` may run on a
plain ``Database`` (``SyncStore``). Transactions are described as data (``Ack``/``Send``
operations around an optional handler call) and applied by one small interpreter per face,
so the rules live once. Acks made in a transaction are remembered per transaction, so a
helper such as ``checkpoint`` never acks a message the worker already acked there.

Errors of sends and acks may surface when they are written or only at the next statement or
at commit (the PostgreSQL driver buffers them like Spanner mutations), so the rules here hold
for either: a refused fenced ack anywhere in the transaction is a lost lease, and a
transaction failing with AlreadyExists is run again without its ``if_absent`` sends.
"""

from __future__ import annotations

import asyncio
import inspect
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol

from txqueue._async.database import AsyncDatabase, AsyncTransaction
from txqueue._sync.database import Database, Transaction
from txqueue.core.schema import Table
from txqueue.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from txqueue.models import LeaseRenewal, Message
from txqueue.worker.acks import AckBatcher
from txqueue.worker.concurrency import DaemonThreadPool

__all__ = ["Ack", "AsyncStore", "LeaseLostError", "Send", "Store", "SyncStore"]


@dataclass(frozen=True)
class Ack:
    """Ack ``key``; fenced by ``lease_token`` when given."""

    queue: str
    key: tuple[Any, ...]
    lease_token: str | None
    ignore_not_found: bool = False


@dataclass(frozen=True)
class Send:
    """Send a message; with ``if_absent`` an existing key is left alone (deduplication)."""

    queue: str
    key: tuple[Any, ...]
    payload: Any
    deliver_time: datetime | None = None
    if_absent: bool = False


Operation = Ack | Send


class LeaseLostError(Exception):
    """The fenced ack opening a transaction was refused: this worker no longer holds it."""


_acked: weakref.WeakKeyDictionary[Any, set[tuple[str, tuple[Any, ...]]]] = (
    weakref.WeakKeyDictionary()
)


def acked_in(transaction: Any, queue: str, key: tuple[Any, ...]) -> bool:
    """Whether ``key`` of ``queue`` was already acked in ``transaction`` by txqueue."""
    return (queue.lower(), tuple(key)) in _acked.get(transaction, ())


def _record_ack(transaction: Any, queue: str, key: tuple[Any, ...]) -> None:
    _acked.setdefault(transaction, set()).add((queue.lower(), tuple(key)))


def _fence(error: Exception, operation: Ack, first: bool) -> None:
    if first and operation.lease_token and isinstance(error, FailedPrecondition | NotFound):
        raise LeaseLostError(str(error)) from error


def _is_duplicate(operation: Operation) -> bool:
    return isinstance(operation, Send) and operation.if_absent


async def run_plan(
    run: Callable[[Sequence[Operation]], Awaitable[None]],
    operations: Sequence[Operation],
    fence: bool = True,
) -> None:
    """Run a transaction built from ``operations``; see the module docstring for the rules.

    With ``fence``, FailedPrecondition/NotFound from anywhere in the transaction is taken as
    the refusal of its opening fenced ack (plans without a handler have no other source).
    """
    try:
        await _fenced(run, operations, fence)
    except AlreadyExists:
        rest = [operation for operation in operations if not _is_duplicate(operation)]
        if len(rest) == len(operations):
            raise
        if rest:
            await _fenced(run, rest, fence)


async def _fenced(
    run: Callable[[Sequence[Operation]], Awaitable[None]],
    operations: Sequence[Operation],
    fence: bool,
) -> None:
    try:
        await run(operations)
    except (FailedPrecondition, NotFound) as error:
        if not fence:
            raise
        first = operations[0] if operations else None
        if isinstance(first, Ack) and first.lease_token is not None:
            raise LeaseLostError(str(error)) from error
        raise


def apply_sync(transaction: Transaction, operations: Sequence[Operation], first: bool) -> None:
    """Apply operations in a sync transaction (``first``: a refused first ack is a lost lease)."""
    for index, operation in enumerate(operations):
        if isinstance(operation, Ack):
            try:
                transaction.ack(
                    operation.queue,
                    operation.key,
                    ignore_not_found=operation.ignore_not_found,
                    lease_token=operation.lease_token,
                )
            except (FailedPrecondition, NotFound) as error:
                _fence(error, operation, first and index == 0)
                raise
            _record_ack(transaction, operation.queue, operation.key)
        else:
            try:
                transaction.send(
                    operation.queue, operation.key, operation.payload, operation.deliver_time
                )
            except AlreadyExists:
                if not operation.if_absent:
                    raise


async def apply_async(
    transaction: AsyncTransaction, operations: Sequence[Operation], first: bool
) -> None:
    """Apply operations in an asyncio transaction; see ``apply_sync``."""
    for index, operation in enumerate(operations):
        if isinstance(operation, Ack):
            try:
                await transaction.ack(
                    operation.queue,
                    operation.key,
                    ignore_not_found=operation.ignore_not_found,
                    lease_token=operation.lease_token,
                )
            except (FailedPrecondition, NotFound) as error:
                _fence(error, operation, first and index == 0)
                raise
            _record_ack(transaction, operation.queue, operation.key)
        else:
            try:
                await transaction.send(
                    operation.queue, operation.key, operation.payload, operation.deliver_time
                )
            except AlreadyExists:
                if not operation.if_absent:
                    raise


def flush_sync(transaction: Transaction) -> None:
    """Apply the opening ack now: a refused one surfaces here, as a lost lease, and the
    message's row is locked by the transaction from then on."""
    try:
        transaction.flush()
    except (FailedPrecondition, NotFound) as error:
        raise LeaseLostError(str(error)) from error


async def flush_async(transaction: AsyncTransaction) -> None:
    """``flush_sync`` for an asyncio transaction."""
    try:
        await transaction.flush()
    except (FailedPrecondition, NotFound) as error:
        raise LeaseLostError(str(error)) from error


async def _transact(
    once: Callable[[Sequence[Operation]], Awaitable[None]],
    before: Sequence[Operation],
    after: Sequence[Operation],
) -> None:
    """Run a handler transaction (``once(after)``), with ``run_plan``'s rules for ``before``."""

    async def run(operations: Sequence[Operation]) -> None:
        await once(operations[len(before) :])

    await run_plan(run, [*before, *after], fence=False)


class Store(Protocol):
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

    async def release(self, queue: str, token: str, delay: timedelta, error: str | None) -> int:
        """Release a lease (receivable after ``delay``); returns 1, or 0 if it was lost."""

    async def dead_letter(self, queue: str, key: tuple[Any, ...], token: str, error: str) -> None:
        """Move a leased message to the dead letters."""

    async def renew(
        self, queue: str, tokens: Sequence[str], extension: timedelta
    ) -> list[LeaseRenewal]:
        """Renew leases by token."""


def _now(pinned: datetime | None) -> datetime:
    return pinned if pinned is not None else datetime.now(timezone.utc)


class AsyncStore:
    """The worker's store: ``AsyncDatabase``, plus a sync ``Database`` for sync transactional
    handlers (they are given a ``txqueue.Transaction``), opened on first use."""

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

    def now(self) -> datetime:
        return _now(self.database.now())

    async def queue(self, name: str) -> Table:
        return await self.database.queue(name)

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        return await self._pool.run(function, *args)

    async def apply(self, operations: Sequence[Operation]) -> None:
        async def once(plan: Sequence[Operation]) -> None:
            async def run(transaction: AsyncTransaction) -> None:
                await apply_async(transaction, plan, first=True)

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
                    await apply_async(transaction, before, first=True)
                    await flush_async(transaction)
                    await function(message, transaction)
                    await apply_async(transaction, plan, first=False)

                await self.database.run_in_transaction(run)

            await _transact(once_async, before, after)
            return
        database = await self._sync_database()

        async def once_sync(plan: Sequence[Operation]) -> None:
            def run(transaction: Transaction) -> None:
                apply_sync(transaction, before, first=True)
                flush_sync(transaction)
                function(message, transaction)
                apply_sync(transaction, plan, first=False)

            await self._pool.run(database.run_in_transaction, run)

        await _transact(once_sync, before, after)

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

    async def release(self, queue: str, token: str, delay: timedelta, error: str | None) -> int:
        return await self.database.release_lease(queue, [token], delay=delay, error=error)

    async def dead_letter(self, queue: str, key: tuple[Any, ...], token: str, error: str) -> None:
        await self.database.dead_letter(queue, key, token, error)

    async def renew(
        self, queue: str, tokens: Sequence[str], extension: timedelta
    ) -> list[LeaseRenewal]:
        return await self.database.renew_lease(queue, tokens, extension)

    def close_sync(self) -> None:
        """Close the sync database, if it was opened."""
        if self._sync is not None:
            self._sync.close()
            self._sync = None


class SyncStore:
    """A store over a sync ``Database``, for ``txqueue.testing.drain``: calls block (the
    drain runs on its own loop), sync handlers run inline, async handlers on that loop."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def now(self) -> datetime:
        return _now(self.database.now())

    async def queue(self, name: str) -> Table:
        return self.database.queue(name)

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        return function(*args)

    async def apply(self, operations: Sequence[Operation]) -> None:
        async def once(plan: Sequence[Operation]) -> None:
            self.database.run_in_transaction(lambda txn: apply_sync(txn, plan, first=True))

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
                apply_sync(transaction, before, first=True)
                flush_sync(transaction)
                function(message, transaction)
                apply_sync(transaction, plan, first=False)

            self.database.run_in_transaction(run)

        await _transact(once, before, after)

    async def ack(self, queue: str, key: tuple[Any, ...], token: str) -> None:
        await self.apply([Ack(queue, key, token)])

    async def release(self, queue: str, token: str, delay: timedelta, error: str | None) -> int:
        return self.database.release_lease(queue, [token], delay=delay, error=error)

    async def dead_letter(self, queue: str, key: tuple[Any, ...], token: str, error: str) -> None:
        self.database.dead_letter(queue, key, token, error)

    async def renew(
        self, queue: str, tokens: Sequence[str], extension: timedelta
    ) -> list[LeaseRenewal]:
        return self.database.renew_lease(queue, tokens, extension)
