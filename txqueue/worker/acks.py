"""Group commit for acks (issue #7): acks of many handlers in one transaction.

Acks arriving within ``window`` seconds of each other are applied together, each still fenced
by its own lease token. When one of them is stale (FailedPrecondition, NotFound) the
transaction rolls back and the batch is acked one by one, so a stale ack never fails the
others. While a batch commits the next one gathers, for at least ``window``: a commit costs
the same for 1 ack or 200, so fewer, fuller transactions leave the database more room.
"""

from __future__ import annotations

import asyncio
from typing import Any

from txqueue._async.database import AsyncDatabase, AsyncTransaction
from txqueue.errors import CommitOutcomeUnknown, FailedPrecondition, NotFound

__all__ = ["AckBatcher"]

#: errors of one ack that say nothing about the others: retry the batch one by one
_PER_ACK = (FailedPrecondition, NotFound, CommitOutcomeUnknown)


class _Ack:
    """One pending ack and the future its caller waits on."""

    __slots__ = ("done", "key", "queue", "token")

    def __init__(
        self, queue: str, key: tuple[Any, ...], token: str, done: asyncio.Future[None]
    ) -> None:
        self.queue = queue
        self.key = key
        self.token = token
        self.done = done


class AckBatcher:
    """Coalesces acks into transactions of up to ``max_batch``, ``window`` seconds apart."""

    def __init__(self, database: AsyncDatabase, window: float = 0.005, max_batch: int = 200):
        self._database = database
        self._window = window
        self._max_batch = max_batch
        self._pending: list[_Ack] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.transactions = 0

    def start(self) -> None:
        """Start the background flusher."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="txqueue-acks")

    async def ack(self, queue: str, key: tuple[Any, ...], token: str) -> None:
        """Ack one message with its lease token; returns once committed, raises its error."""
        if self._task is None or self._task.done():
            await _ack_one(self._database, queue, key, token)
            return
        item = _Ack(queue, key, token, asyncio.get_running_loop().create_future())
        self._pending.append(item)
        self._wake.set()
        # Cancelling this wait cancels item.done only: the ack itself still goes out with
        # its batch (_settle skips a done future).
        await item.done

    async def close(self) -> None:
        """Flush what is pending and stop."""
        if self._task is None:
            return
        task, self._closing = self._task, True
        self._wake.set()
        await task
        self._task = None

    async def _run(self) -> None:
        # Each batch gathers for ``window`` (unless it is full already), also right after
        # a commit: that sets a floor on the batch size when commits are quick.
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._closing and len(self._pending) < self._max_batch:
                await asyncio.sleep(self._window)
            while self._pending:
                await self._flush()
                if not self._closing and len(self._pending) < self._max_batch:
                    break
            if self._pending:
                self._wake.set()
            elif self._closing:
                return

    async def _flush(self) -> None:
        batch, self._pending = (
            self._pending[: self._max_batch],
            self._pending[self._max_batch :],
        )
        if len(batch) == 1:
            await self._one_by_one(batch)
            return

        async def ack_all(transaction: AsyncTransaction) -> None:
            for item in batch:
                await transaction.ack(item.queue, item.key, lease_token=item.token)

        try:
            self.transactions += 1
            await self._database.run_in_transaction(ack_all)
        except _PER_ACK:
            await self._one_by_one(batch)
        except Exception as error:
            for item in batch:
                _settle(item, error)
        else:
            for item in batch:
                _settle(item, None)

    async def _one_by_one(self, batch: list[_Ack]) -> None:
        for item in batch:
            try:
                self.transactions += 1
                await _ack_one(self._database, item.queue, item.key, item.token)
            except Exception as error:
                _settle(item, error)
            else:
                _settle(item, None)


async def _ack_one(database: AsyncDatabase, queue: str, key: tuple[Any, ...], token: str) -> None:
    async def ack(transaction: AsyncTransaction) -> None:
        await transaction.ack(queue, key, lease_token=token)

    await database.run_in_transaction(ack)


def _settle(item: _Ack, error: BaseException | None) -> None:
    if item.done.done():
        return
    if error is None:
        item.done.set_result(None)
    else:
        item.done.set_exception(error)
