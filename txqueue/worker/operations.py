"""The worker's transactions described as data, and the rules for running them on either face.

A transaction is a list of ``Ack``/``Send`` operations (around an optional handler call),
applied by ``apply`` in ``txqueue.worker._async_apply`` (asyncio) or its generated sync twin,
so the rules live once. Acks made in a transaction are remembered per transaction, so a
helper such as ``checkpoint`` never acks a message the worker already acked there.

Errors of sends and acks may surface when they are written or only at the next statement or
at commit (the PostgreSQL driver buffers them like Spanner mutations), so the rules here hold
for either: a refused fenced ack anywhere in the transaction is a lost lease, and a
transaction failing with AlreadyExists is run again without its ``if_absent`` sends.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from txqueue.core.durations import require_aware, to_duration
from txqueue.errors import AlreadyExists, FailedPrecondition, NotFound
from txqueue.models import Message
from txqueue.worker import context

__all__ = [
    "Ack",
    "LeaseLostError",
    "Operation",
    "Send",
    "acked_in",
    "continuation",
    "record_ack",
    "refuse_lost_lease",
    "run_handler_plan",
    "run_plan",
]


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


def record_ack(transaction: Any, queue: str, key: tuple[Any, ...]) -> None:
    """Remember that txqueue acked ``key`` of ``queue`` in ``transaction`` (see ``acked_in``)."""
    _acked.setdefault(transaction, set()).add((queue.lower(), tuple(key)))


def refuse_lost_lease(error: Exception, operation: Ack, first: bool) -> None:
    """Raise LeaseLostError when ``error`` refused the transaction's opening fenced ack."""
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


async def run_handler_plan(
    once: Callable[[Sequence[Operation]], Awaitable[None]],
    before: Sequence[Operation],
    after: Sequence[Operation],
) -> None:
    """Run a handler transaction (``once(after)``), with ``run_plan``'s rules for ``before``."""

    async def run(operations: Sequence[Operation]) -> None:
        await once(operations[len(before) :])

    await run_plan(run, [*before, *after], fence=False)


def continuation(
    message: Message, delay: timedelta | str, key: Any, deliver_time: datetime | None
) -> tuple[Any, datetime]:
    """The key and due time of ``message``'s continuation (``checkpoint``'s send)."""
    if deliver_time is None:
        deliver_time = context.now() + to_duration(delay, "delay", allow_zero=True)
    return (message.key if key is None else key), require_aware(deliver_time, "deliver_time")
