"""Handling one delivery: run the handler, then ack, retry or dead-letter its message.

Shared by the worker runtime and ``txqueue.testing.drain``. The rules:

- a message delivered more often than ``max_attempts`` is dead-lettered unrun (crashes count);
- plain handlers run while their lease is kept alive; a lost lease is never acked;
- transactional handlers run inside a transaction that first acks the message (fenced by the
  lease token): from then on the row is locked by that transaction, so no one else can take
  it however long the handler runs, and the effects commit with the ack or not at all;
- ``resend_after`` handlers ack on arrival and send a copy due later (at-most-once);
- when the worker abandons a delivery (shutdown), its lease is released at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from txqueue import telemetry
from txqueue.errors import FailedPrecondition, NotFound
from txqueue.models import Message
from txqueue.worker import context, scenarios
from txqueue.worker.app import HandlerSpec
from txqueue.worker.database_access import DatabaseAccess
from txqueue.worker.leases import Lease
from txqueue.worker.operations import Ack, LeaseLostError, Send
from txqueue.worker.outcomes import (
    ActionKind,
    GiveUp,
    Outcome,
    OutcomeKind,
    Retry,
    decide,
    exceeded_error,
)

__all__ = ["Handling", "process"]

_LOST = "lease lost while the handler ran; not acked (the message will be redelivered)"


@dataclass
class Handling:
    """One delivery in progress: what the worker needs to abandon it safely."""

    spec: HandlerSpec
    message: Message
    lease: Lease
    settle: Callable[[], Awaitable[str | None]]
    #: a sync transactional handler is inside its transaction (its row is locked by it)
    in_transaction: bool = False
    #: called once the handler has finished (before its ack): frees its place early
    handler_done: Callable[[], None] = lambda: None


def process(handling: Handling, access: DatabaseAccess) -> Awaitable[Outcome]:
    """Handle one delivery to the end and say what happened to the message.

    With OpenTelemetry tracing on, inside a ``process`` span (``txqueue.telemetry``); without,
    the handling itself (no coroutine around it: this runs once per message).
    """
    span = telemetry.start_process(handling.message, access)
    if span is None:
        return _process(handling, access)
    return _traced(span, handling, access)


async def _traced(span: Any, handling: Handling, access: DatabaseAccess) -> Outcome:
    handling.lease.span = span
    try:
        with telemetry.current(span):
            outcome = await _process(handling, access)
    except BaseException as error:
        telemetry.abandoned(span, error)
        raise
    telemetry.settled(span, outcome)
    return outcome


async def _process(handling: Handling, access: DatabaseAccess) -> Outcome:
    spec, message = handling.spec, handling.message
    started, at = time.monotonic(), access.now()

    def outcome(
        kind: OutcomeKind,
        delay: timedelta | None = None,
        error: str | None = None,
        exception: BaseException | None = None,
    ) -> Outcome:
        duration = time.monotonic() - started
        return Outcome(
            message.queue,
            message.key,
            message.delivery_count,
            kind,
            at,
            duration,
            delay,
            error,
            exception,
        )

    entered = context.enter(context.Delivery(message, handling.lease, access.now))
    try:
        exceeded = exceeded_error(message.delivery_count, spec.retry)
        if exceeded is not None:
            token = await handling.settle()
            if token is None:
                return outcome(OutcomeKind.LEASE_LOST, error=_LOST)
            return await _dead_letter(spec, message, token, exceeded, access, outcome)
        if spec.resend_after is not None:
            return await _resend_later(handling, spec.resend_after, access, outcome)
        if spec.transactional:
            return await _transactional(handling, access, outcome)
        return await _plain(handling, access, outcome)
    finally:
        context.leave(entered)


Make = Callable[..., Outcome]


async def _plain(handling: Handling, access: DatabaseAccess, outcome: Make) -> Outcome:
    spec, message = handling.spec, handling.message
    error = await _run_handler(handling, access)
    handling.handler_done()
    token = await handling.settle()
    if token is None:
        return outcome(OutcomeKind.LEASE_LOST, error=_LOST)
    if error is not None:
        return await _failed(spec, message, token, error, access, outcome)
    try:
        if spec.schedule is not None:
            await access.apply(
                [Ack(message.queue, message.key, token), await _next_run(spec, message, access)]
            )
        else:
            await access.ack(message.queue, message.key, token)
    except (LeaseLostError, FailedPrecondition) as refused:
        return outcome(OutcomeKind.LEASE_LOST, error=f"ack refused: {refused}")
    except NotFound:
        pass  # acked already (by the handler itself, or a commit whose outcome was unknown)
    return outcome(OutcomeKind.ACKED)


async def _run_handler(handling: Handling, access: DatabaseAccess) -> BaseException | None:
    """Run a plain handler; its exception, CancelledError when its lease was lost, or None.

    Cancellation of the caller (shutdown) releases the lease and propagates.
    """
    spec, message = handling.spec, handling.message
    try:
        if spec.is_async:
            return await _run_async_handler(handling)
        await access.call(spec.function, message)
        return None
    except asyncio.CancelledError:
        await _abandon(handling, access)
        raise
    except BaseException as error:  # a handler's SystemExit is its failure, not the worker's
        return error


async def _run_async_handler(handling: Handling) -> BaseException | None:
    """Await an async handler in this task (no task of its own: one fewer per message);
    a lost lease cancels this task while the handler runs, and that is the handler's end."""
    task = asyncio.current_task()
    assert task is not None
    running = True

    def lost() -> None:
        if running:
            task.cancel()

    handling.lease.on_lost(lost)
    try:
        await handling.spec.function(handling.message)
    except asyncio.CancelledError:
        if not handling.lease.lost:
            raise  # shutdown: the caller abandons the delivery
        uncancel = getattr(task, "uncancel", None)  # Python 3.11+
        if uncancel is not None:
            uncancel()
        return asyncio.CancelledError()
    finally:
        running = False
        handling.lease.off_lost(lost)  # the listener holds this task: no cycle past the end
    return None


async def _abandon(handling: Handling, access: DatabaseAccess) -> None:
    """Give the message back at once (shutdown grace ran out), unless a transaction holds it."""
    token = await handling.settle()
    if token is None or handling.in_transaction:
        return
    with contextlib.suppress(Exception):  # else the lease expires on its own: nothing is lost
        await access.release(handling.message.queue, token, timedelta(0), None)


async def _transactional(handling: Handling, access: DatabaseAccess, outcome: Make) -> Outcome:
    spec, message = handling.spec, handling.message
    token = await handling.settle()
    if token is None:
        return outcome(OutcomeKind.LEASE_LOST, error=_LOST)
    after = [await _next_run(spec, message, access)] if spec.schedule is not None else []
    handling.in_transaction = not spec.is_async
    try:
        await access.transact(
            spec.function, message, [Ack(message.queue, message.key, token)], after
        )
    except LeaseLostError as refused:
        return outcome(OutcomeKind.LEASE_LOST, error=f"ack refused: {refused}")
    except asyncio.CancelledError:
        await _abandon(handling, access)
        raise
    except BaseException as error:
        handling.in_transaction = False
        handling.handler_done()
        return await _failed(spec, message, token, error, access, outcome)
    return outcome(OutcomeKind.ACKED)


async def _resend_later(
    handling: Handling, after: timedelta, access: DatabaseAccess, outcome: Make
) -> Outcome:
    spec, message = handling.spec, handling.message
    token = await handling.settle()
    if token is None:
        return outcome(OutcomeKind.LEASE_LOST, error=_LOST)
    copy = Send(message.queue, message.key, message.payload, access.now() + after)
    try:
        await access.apply([Ack(message.queue, message.key, token), copy])
    except LeaseLostError as refused:
        return outcome(OutcomeKind.LEASE_LOST, error=f"ack refused: {refused}")
    try:
        if spec.is_async:
            await spec.function(message)
        else:
            await access.call(spec.function, message)
    except asyncio.CancelledError:
        raise  # the copy comes back when due
    except BaseException as error:
        handling.handler_done()
        if not isinstance(error, GiveUp):
            return outcome(OutcomeKind.RETRIED, delay=after, error=repr(error), exception=error)
        await access.apply([Ack(message.queue, message.key, None, ignore_not_found=True)])
        return outcome(OutcomeKind.DISCARDED, error=f"gave up: {error.reason}")
    handling.handler_done()
    await access.apply([Ack(message.queue, message.key, None, ignore_not_found=True)])
    return outcome(OutcomeKind.ACKED)


async def _failed(
    spec: HandlerSpec,
    message: Message,
    token: str,
    error: BaseException,
    access: DatabaseAccess,
    outcome: Make,
) -> Outcome:
    telemetry.handler_failed(error)
    action = decide(error, message.delivery_count, spec.retry)
    text = action.error or repr(error)
    if action.kind is ActionKind.DEAD_LETTER:
        return await _dead_letter(spec, message, token, text, access, outcome, error)
    released = await access.release(message.queue, token, action.delay, text, error)
    if not released:
        return outcome(OutcomeKind.LEASE_LOST, error=f"release refused after: {text}")
    # a Retry the handler asked for is no failure to log a traceback of (its history keeps it)
    logged = None if isinstance(error, Retry) else error
    return outcome(OutcomeKind.RETRIED, delay=action.delay, error=text, exception=logged)


async def _dead_letter(
    spec: HandlerSpec,
    message: Message,
    token: str,
    error: str,
    access: DatabaseAccess,
    outcome: Make,
    exception: BaseException | None = None,
) -> Outcome:
    if spec.schedule is not None:  # the chain goes on without the failed run
        await access.apply([await _next_run(spec, message, access)])
    try:
        await access.dead_letter(message.queue, message.key, token, error, exception)
    except (FailedPrecondition, NotFound) as refused:
        return outcome(OutcomeKind.LEASE_LOST, error=f"dead letter refused: {refused}")
    logged = None if isinstance(exception, GiveUp | Retry) else exception
    return outcome(OutcomeKind.DEAD_LETTERED, error=error, exception=logged)


async def _next_run(spec: HandlerSpec, message: Message, access: DatabaseAccess) -> Send:
    assert spec.schedule is not None
    table = await access.queue(message.queue)
    current = scenarios.slot_of(table, message.key)
    slot = scenarios.next_run(spec.schedule, access.now(), current)
    return scenarios.schedule_send(table, spec.schedule, slot)
