"""Recording attempts: ack the delivery, log the attempt, resend it for a retry — atomically.

Every attempt ends in a transaction that acks the delivery message with its lease token,
inserts the attempt-log row and, for a retry, sends the delivery again with a later deliver
time. The log and the queue therefore never disagree, and a dispatcher that lost its lease
acks nothing (`LeaseLost`); the dispatcher then logs the attempt alone
(`txqueue.events.leases`), so that it counts toward ``max_attempts``.

The recorder commits these transactions in groups: one commit for all the attempts finished
meanwhile, with one multi-row insert. While more answers are on their way (``more_coming``),
it waits up to ``linger`` for a fuller group before it commits: a busy dispatcher then writes
a few large transactions a second instead of hundreds of small ones, whose fixed cost (the
write lock, a commit, the hand-offs to the database's thread) was a fifth of its CPU per
delivery on SQLite. Only the ack waits: the event has been delivered by then, and the lease
outlives the wait by far. A group that fails is redone one attempt per transaction, so each
attempt gets its own outcome. It also keeps one writer per dispatcher, which SQLite needs
anyway.

Tracebacks are bounded as a handler's failure history is (``txqueue.core.failures``): each
is capped when caught, and a delivery keeps those of its newest ``MAX_FAILURES`` attempts
only; the attempt after them clears the oldest in the same transaction (a statement only
past that many attempts).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from txqueue import telemetry
from txqueue._async.database import AsyncDatabase, AsyncTransaction
from txqueue.core.failures import MAX_FAILURES
from txqueue.drivers._async_compat import done_within
from txqueue.errors import FailedPrecondition, NotFound, TxqueueError
from txqueue.events.records import ATTEMPT_COLUMNS, ATTEMPTS, DELIVERIES, DeliveryAttempt

__all__ = ["AttemptRecord", "LeaseLost", "Recorded", "Recorder", "Write"]

logger = logging.getLogger("txqueue.events")

Write = Callable[[AsyncTransaction], Awaitable[None]]

#: Clears the tracebacks of a delivery's attempts older than its newest `MAX_FAILURES`.
_FORGET_TRACEBACKS = (
    f"UPDATE {ATTEMPTS} SET traceback = NULL WHERE message_uid = @uid"
    " AND pipeline = @pipeline AND attempt <= @oldest AND traceback IS NOT NULL"
)


class LeaseLost(TxqueueError):
    """The delivery's lease passed to another dispatcher before this attempt was recorded."""


@dataclass(frozen=True)
class AttemptRecord:
    """What one finished attempt writes.

    ``resend`` is the delivery's next payload and deliver time, for a retry, sent with
    ``trace_context`` (the context the delivery carried: one trace across its attempts).
    ``forward`` is the write that delivers to a bus or a queue; its latency is measured from
    ``clock``.
    """

    key: tuple[str, str]
    lease_token: str
    row: DeliveryAttempt
    resend: tuple[str, datetime] | None = None
    forward: Write | None = None
    clock: float | None = None
    trace_context: str | None = None


#: Called on the event loop once a record is committed (None) or failed (its error).
Recorded = Callable[[BaseException | None], None]


class Recorder:
    """Commits attempt records in groups of up to ``limit``, waiting up to ``linger`` for a
    fuller group while ``more_coming()``; see the module docstring."""

    def __init__(
        self,
        database: AsyncDatabase,
        limit: int = 64,
        linger: timedelta = timedelta(0),
        more_coming: Callable[[], bool] = lambda: False,
    ) -> None:
        self._database = database
        self._limit = limit
        self._linger = linger.total_seconds()
        self._more_coming = more_coming
        self._pending: asyncio.Queue[tuple[AttemptRecord, Recorded]] = asyncio.Queue()
        self._full: asyncio.Future[None] | None = None  # done: the lingering group is whole

    async def record(self, record: AttemptRecord) -> None:
        """Commit ``record`` (with others); raise LeaseLost or the forward's error."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def recorded(error: BaseException | None) -> None:
            if done.done():  # the attempt was cancelled meanwhile
                return
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(error)

        self.submit(record, recorded)
        await done

    def submit(self, record: AttemptRecord, recorded: Recorded) -> None:
        """Commit ``record`` with others, then call ``recorded`` (without waiting)."""
        self._pending.put_nowait((record, recorded))
        full = self._full
        if full is not None and not full.done() and self._whole():
            full.set_result(None)

    async def run(self) -> None:
        """Commit pending records until cancelled."""
        while True:
            group = [await self._pending.get()]
            await self._wait_for_more()
            while len(group) < self._limit and not self._pending.empty():
                group.append(self._pending.get_nowait())
            if len(group) > 1:
                try:
                    await self._database.run_in_transaction(apply, [r for r, _ in group])
                except Exception:
                    pass  # redone one by one below
                else:
                    for _, recorded in group:
                        _tell(recorded, None)
                    continue
            for record, recorded in group:
                try:
                    await self._database.run_in_transaction(apply, [record])
                except Exception as error:
                    _tell(recorded, error)
                else:
                    _tell(recorded, None)

    def _whole(self) -> bool:
        """Do the pending records make a whole group with the one `run` holds?"""
        return self._pending.qsize() + 1 >= self._limit

    async def _wait_for_more(self) -> None:
        """Wait up to ``linger`` for the group's other records while more are coming."""
        if not self._linger or self._whole() or not self._more_coming():
            return
        self._full = asyncio.get_running_loop().create_future()
        try:
            await done_within(self._full, self._linger)
        finally:
            self._full = None


def _tell(recorded: Recorded, error: BaseException | None) -> None:
    """Call ``recorded``; its bug is logged, never ends the recorder."""
    try:
        recorded(error)
    except Exception:
        logger.exception("settling a recorded attempt failed unexpectedly")


async def apply(txn: AsyncTransaction, records: list[AttemptRecord]) -> None:
    """Write ``records`` in ``txn``: forwards, acks, one log insert, resends."""
    rows = []
    for record in records:
        row = record.row
        if record.forward is not None:
            await record.forward(txn)  # NotFound, InvalidArgument: the destination's fault
            if record.clock is not None:
                row = replace(row, latency=timedelta(seconds=time.monotonic() - record.clock))
        rows.append(row.row())
    try:
        for record in records:
            await txn.ack(DELIVERIES, record.key, lease_token=record.lease_token)
        await txn.insert(ATTEMPTS, ATTEMPT_COLUMNS, rows)  # also applies buffered acks
    except (FailedPrecondition, NotFound) as lost:
        raise LeaseLost(str(lost)) from lost
    for record in records:
        if record.row.attempt > MAX_FAILURES:
            row = record.row
            forget = {"uid": row.message_uid, "pipeline": row.pipeline}
            oldest = row.attempt - MAX_FAILURES
            await txn.execute_internal_update(_FORGET_TRACEBACKS, {**forget, "oldest": oldest})
    for record in records:
        if record.resend is not None:
            payload, when = record.resend
            with telemetry.resending(record.trace_context):  # no new trace for a retry
                await txn.send(DELIVERIES, record.key, payload, deliver_time=when)
