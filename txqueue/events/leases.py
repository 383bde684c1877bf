"""The dispatcher's leases on deliveries: renewed after a wait, given back unattempted, and
what happens when one runs out before its attempt is recorded.

A lease that runs out before the attempt's record commits (`recorder.LeaseLost`) leaves the
delivery unacked: it is received again. The attempt was made all the same, so it is logged
alone (`log_lost`) and counts toward ``max_attempts``; whoever receives the delivery next
reads the log first (`resume`) and goes on from that attempt (or stops, if it delivered or
was the last allowed). So a delivery whose leases keep running out is not attempted for ever,
and none with attempts left is dropped. Only a dispatcher killed mid-attempt logs nothing:
its attempt is made again under the same number (at-least-once).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

from txqueue import telemetry
from txqueue._async.database import AsyncDatabase, AsyncTransaction
from txqueue.core.text import printable
from txqueue.errors import AlreadyExists, FailedPrecondition, NotFound, TxqueueError
from txqueue.events.recorder import AttemptRecord, LeaseLost
from txqueue.events.records import ATTEMPT_COLUMNS, ATTEMPTS, DELIVERIES, Delivery, DeliveryAttempt
from txqueue.models import Message

__all__ = ["give_back", "log_lost", "renewed", "resume"]

logger = logging.getLogger("txqueue.events")

#: States of a log row that an attempt (not a replay marker) left behind.
_ATTEMPT_STATES = frozenset({"delivered", "retrying", "failed"})


async def renewed(database: AsyncDatabase, message: Message, lease: timedelta) -> Message | None:
    """``message`` with its lease renewed to ``lease`` from now; None if it was lost."""
    try:
        renewals = await database.renew_lease(DELIVERIES, [message.lease_token], lease)
    except TxqueueError as error:  # the lease left may still do
        logger.warning("renewing a delivery's lease failed: %s", printable(error))
        return message
    if not renewals or renewals[0].new_token is None or renewals[0].lease_expiration is None:
        return None
    renewal = renewals[0]
    assert renewal.new_token is not None and renewal.lease_expiration is not None
    telemetry.renewed(message.lease_token, renewal.new_token)
    return replace(
        message, lease_token=renewal.new_token, lease_expiration=renewal.lease_expiration
    )


async def give_back(
    database: AsyncDatabase, messages: Sequence[Message], delay: timedelta = timedelta(0)
) -> None:
    """Release deliveries received and not attempted: receivable again after ``delay``."""
    if not messages:
        return
    try:
        await database.release_lease(DELIVERIES, [m.lease_token for m in messages], delay)
    except TxqueueError as error:  # their leases run out instead
        logger.warning("giving deliveries back failed: %s", printable(error))


async def log_lost(database: AsyncDatabase, record: AttemptRecord, lost: LeaseLost) -> None:
    """Log the attempt of ``record``, whose lease was lost (``lost``) before it was recorded,
    alone.

    The delivery is not acked (another dispatcher may hold it), so the row says what comes
    next: a retry once the lease has run out, or nothing if the attempt delivered or was the
    last allowed. A forward is not logged: it was rolled back with the ack, so it had no
    effect. A row already logged under this attempt number (the next holder's) is kept.
    """
    logger.warning(
        "delivery %s/%s: lease lost before recording (%s)", *map(printable, (*record.key, lost))
    )
    if record.forward is not None:
        return
    row = record.row
    note = "lease lost before recording"
    if row.state == "retrying":
        error = f"{row.error}; {note}: retried once the lease runs out"
        row = replace(row, error=error, retry_delay=None)
    elif row.state == "failed":
        row = replace(row, error=f"{row.error}; {note}")

    async def insert(txn: AsyncTransaction) -> None:
        await txn.insert(ATTEMPTS, ATTEMPT_COLUMNS, [row.row()])

    try:
        await database.run_in_transaction(insert)
    except AlreadyExists:
        pass
    except TxqueueError as error:  # unlogged: the attempt is made again, as after a crash
        logger.warning(
            "logging attempt %d of %s failed: %s",
            row.attempt,
            printable(row.message_uid),
            printable(error),
        )


async def resume(
    database: AsyncDatabase, message: Message, delivery: Delivery, rows: list[DeliveryAttempt]
) -> Delivery | None:
    """The delivery to attempt after a lost lease, counting the attempts logged (``rows``:
    its log) since its payload was written; None once the log says it is over (acked here).
    """
    later = [r for r in rows if r.attempt > delivery.attempts and r.state in _ATTEMPT_STATES]
    last = max(later, key=lambda r: r.attempt, default=None)
    if last is None:
        return delivery
    if last.state == "retrying":
        return replace(delivery, attempts=last.attempt)

    async def ack(txn: AsyncTransaction) -> None:
        await txn.ack(DELIVERIES, message.key, lease_token=message.lease_token)

    with contextlib.suppress(FailedPrecondition, NotFound):  # lost again: the next holder
        await database.run_in_transaction(ack)  # reads the same log
    logger.info(
        "delivery %s/%s: attempt %d was %s before its lease ran out; not attempted again",
        *map(printable, message.key),
        last.attempt,
        last.state,
    )
    return None
