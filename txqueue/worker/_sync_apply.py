# Generated from txqueue/worker/_async_apply.py by tools/async_to_sync.py; do not edit.
"""The worker's operations applied in one transaction (sync face), and ``checkpoint``.

Generated from ``txqueue/worker/_async_apply.py`` by ``tools/async_to_sync.py``; do not edit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from txqueue._sync.database import Transaction
from txqueue.errors import AlreadyExists, FailedPrecondition, NotFound
from txqueue.models import Message
from txqueue.worker.operations import (
    Ack,
    LeaseLostError,
    Operation,
    acked_in,
    continuation,
    record_ack,
    refuse_lost_lease,
)

__all__ = ["apply", "checkpoint", "flush", "run_handler"]


def apply(transaction: Transaction, operations: Sequence[Operation], first: bool) -> None:
    """Apply ``operations`` in ``transaction`` (``first``: a refused first ack is a lost lease)."""
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
                refuse_lost_lease(error, operation, first and index == 0)
                raise
            record_ack(transaction, operation.queue, operation.key)
        else:
            try:
                transaction.send(
                    operation.queue, operation.key, operation.payload, operation.deliver_time
                )
            except AlreadyExists:
                if not operation.if_absent:
                    raise


def flush(transaction: Transaction) -> None:
    """Apply the opening ack now: a refused one surfaces here, as a lost lease, and the
    message's row is locked by the transaction from then on."""
    try:
        transaction.flush()
    except (FailedPrecondition, NotFound) as error:
        raise LeaseLostError(str(error)) from error


def run_handler(
    transaction: Transaction,
    function: Callable[..., Any],
    message: Message,
    before: Sequence[Operation],
    after: Sequence[Operation],
) -> None:
    """A transactional handler's transaction: ``before`` (its opening ack fenced and applied
    at once), then ``function(message, transaction)``, then ``after``."""
    apply(transaction, before, first=True)
    flush(transaction)
    function(message, transaction)
    apply(transaction, after, first=False)


def checkpoint(
    txn: Transaction,
    message: Message,
    payload: Any,
    *,
    delay: timedelta | str = timedelta(0),
    key: Any = None,
    deliver_time: datetime | None = None,
) -> None:
    """Ack ``message`` and send its continuation carrying ``payload``, in ``txn``: both or neither.

    The continuation has the same key (or ``key``) and is due after ``delay`` (or at
    ``deliver_time``). The ack is fenced by the message's lease token; inside a transactional
    handler the worker has already acked the message in this transaction, so only the
    continuation is sent. (In a plain handler the worker may have renewed the lease, which
    replaces the token: checkpoint from a transactional handler.)
    """
    new_key, due = continuation(message, delay, key, deliver_time)
    if not acked_in(txn, message.queue, message.key):
        txn.ack(message.queue, message.key, lease_token=message.lease_token)
    txn.send(message.queue, new_key, payload, deliver_time=due)
