"""How one delivery attempt ends: why it fails before it starts, what its transaction writes
(ack, attempt-log row, a resend for a retry, a forward to a bus or queue), and the counts and
log line once it is committed.

The dispatcher (`dispatcher`) calls these around each attempt; kept apart so that the rules
of an attempt's end read in one place, away from the receiving and the HTTP threads.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any

from txqueue._async.database import AsyncDatabase, AsyncTransaction
from txqueue.core.failures import MAX_MESSAGE
from txqueue.core.schema import ColumnType
from txqueue.core.text import printable
from txqueue.events._async.events import AsyncEvents
from txqueue.events.cloudevent import CloudEvent, to_json
from txqueue.events.delivery import Attempt
from txqueue.events.outcomes import AttemptKind, next_delay
from txqueue.events.payloads import payload_problem
from txqueue.events.recorder import AttemptRecord, Write
from txqueue.events.records import Delivery
from txqueue.events.records import DeliveryAttempt as LogRow
from txqueue.events.resources import Pipeline
from txqueue.models import Message

__all__ = [
    "MAX_HOPS",
    "DispatcherStats",
    "Settled",
    "count",
    "elapsed",
    "forwarding",
    "outcome",
    "problem",
]

logger = logging.getLogger("txqueue.events")

#: A bus-to-bus forward chain longer than this is a loop, failed permanently.
MAX_HOPS = 8


@dataclass
class DispatcherStats:
    """Counts of one dispatcher's attempts since it started."""

    attempts: int = 0
    delivered: int = 0
    retried: int = 0
    failed: int = 0


@dataclass
class Settled:
    """What an attempt's record left behind, for the stats and the log once committed."""

    name: str
    uid: str
    number: int
    state: str
    error: str | None
    delay: timedelta | None


def problem(
    pipeline: Pipeline | None, name: str, event: CloudEvent, delivery: Delivery
) -> str | None:
    """Why the delivery fails before reaching its destination, or None (Eventarc Advanced: permanent)."""
    if pipeline is None:
        return f"pipeline {name!r} does not exist (deleted after the event was routed)"
    if pipeline.destination.kind == "bus" and delivery.hops >= MAX_HOPS:
        return f"routing loop: the event was forwarded between buses {delivery.hops} times"
    return payload_problem(event, pipeline.input_payload_format, pipeline.json_schema)


def elapsed(clock: float) -> timedelta:
    """The time since ``clock`` (a `time.monotonic` reading)."""
    return timedelta(seconds=time.monotonic() - clock)


def forwarding(
    events: AsyncEvents,
    database: AsyncDatabase,
    pipeline: Pipeline,
    event: CloudEvent,
    uid: str,
    delivery: Delivery,
) -> Write:
    """The write that delivers to a bus or a queue, inside the attempt's transaction."""
    target = pipeline.destination.target
    if pipeline.destination.kind == "bus":

        async def to_bus(txn: AsyncTransaction) -> None:
            await events.publish_checked(txn, target, event, hops=delivery.hops + 1)

        return to_bus

    async def to_queue(txn: AsyncTransaction) -> None:
        column = (await database.queue(target)).payload_column
        document = to_json(event, uid)  # messageuid and xgooglemessageuid
        text = json.dumps(document, separators=(",", ":"))
        payload: Any = {
            ColumnType.JSON: document,
            ColumnType.BYTES: text.encode(),
        }.get(column.type, text)
        await txn.send(target, (uid,), payload)

    return to_queue


def outcome(
    message: Message,
    delivery: Delivery,
    pipeline: Pipeline | None,
    attempt: Attempt,
    started: datetime,
    now: Callable[[], datetime | None],
    trace: str | None,
    forward: Write | None = None,
    clock: float | None = None,
) -> tuple[AttemptRecord, Settled]:
    """What the attempt writes (ack, log row, a resend for a retry) and leaves behind.

    ``now`` is the database's pinned clock (None: the machine's), read for a retry's due
    time; ``trace`` is the context the resend carries."""
    name, uid = message.key
    number = delivery.attempts + 1
    delay = None
    error = attempt.error
    if error is not None and len(error) > MAX_MESSAGE:  # as a handler failure's message
        error = f"{error[:MAX_MESSAGE]} […{len(error) - MAX_MESSAGE} characters cut]"
    if attempt.outcome is AttemptKind.SUCCESS:
        state = "delivered"
    elif (
        attempt.outcome is AttemptKind.TRANSIENT
        and pipeline is not None
        and pipeline.retry.should_retry(number)
    ):
        state, delay = "retrying", next_delay(pipeline.retry, number, attempt.retry_after)
    else:
        state = "failed"
        if attempt.outcome is AttemptKind.TRANSIENT:
            error = f"{error} (gave up after {number} attempt(s))"

    row = LogRow(
        uid, name, number, delivery.bus, started, state, attempt.outcome.value,
        attempt.status, error, attempt.latency, delay, attempt.error_type, attempt.traceback,
    )  # fmt: skip
    resend = None
    if delay is not None:
        when = (now() or datetime.now(timezone.utc)) + delay
        resend = (replace(delivery, attempts=number).encode(), when)
    record = AttemptRecord(
        message.key, message.lease_token, row, resend, forward, clock, trace,
    )  # fmt: skip
    return record, Settled(name, uid, number, state, error, delay)


def count(stats: DispatcherStats, settled: Settled) -> None:
    """Count a recorded attempt; log a retry or a failure."""
    stats.attempts += 1
    name, uid, error = settled.name, settled.uid, settled.error
    if settled.state == "delivered":
        stats.delivered += 1
    elif settled.state == "retrying":
        stats.retried += 1
        logger.info(
            "delivery %s/%s attempt %d: %s; retry in %s",
            *map(printable, (name, uid)),
            settled.number,
            printable(error),
            settled.delay,
        )
    else:
        stats.failed += 1
        logger.warning("delivery %s/%s failed for good: %s", *map(printable, (name, uid, error)))
