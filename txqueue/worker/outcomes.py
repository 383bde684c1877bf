"""Handler outcomes: the exceptions a handler raises to steer its message, and the rule that
turns a handler's result into what happens to the message.

Return → ack. ``Retry`` → release after a delay. ``GiveUp`` → dead letter now. Any other
exception → the handler's ``RetryPolicy``: released with the error while attempts remain,
dead-lettered with it after the last one (Eventarc Advanced's semantics). The rule is
pure (no I/O) so it is unit-tested alone and shared by the worker and ``txqueue.testing``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from txqueue.core.durations import to_duration
from txqueue.core.retry import RetryPolicy

__all__ = [
    "Action",
    "ActionKind",
    "GiveUp",
    "Outcome",
    "OutcomeKind",
    "Retry",
    "decide",
    "exceeded_error",
]


class Retry(Exception):
    """Raise in a handler to try the message again after ``delay`` (policy's delay if None).

    A Retry is an attempt like any failure: after ``max_attempts`` deliveries the message is
    dead-lettered instead, so a handler cannot retry forever by accident.
    """

    def __init__(self, delay: timedelta | str | None = None, reason: str = "retry requested"):
        self.delay = None if delay is None else to_duration(delay, "delay", allow_zero=True)
        self.reason = str(reason)
        super().__init__(self.reason)


class GiveUp(Exception):
    """Raise in a handler to stop retrying: the message moves to the dead letters now.

    (Named GiveUp because ``txqueue.DeadLetter`` is the dead-letter *record* model.)
    """

    def __init__(self, reason: str) -> None:
        self.reason = str(reason)
        super().__init__(self.reason)


class ActionKind(str, Enum):
    """What the worker does with a message after its handler ran."""

    ACK = "ack"
    RELEASE = "release"
    DEAD_LETTER = "dead_letter"


@dataclass(frozen=True)
class Action:
    """An ``ActionKind`` with its delay (release) and error text (release, dead letter)."""

    kind: ActionKind
    delay: timedelta = timedelta(0)
    error: str | None = None


def decide(error: BaseException | None, delivery_count: int, policy: RetryPolicy) -> Action:
    """The action for a handler that returned (``error`` None) or raised ``error``.

    ``delivery_count`` is the attempt number (crashes and expired leases count too); retry k
    waits ``policy.delay(k)``, so the delays between attempts are min, 2·min, … capped at max.
    """
    if error is None:
        return Action(ActionKind.ACK)
    if isinstance(error, GiveUp):
        return Action(ActionKind.DEAD_LETTER, error=f"gave up: {error.reason}")
    text = f"Retry({error.reason})" if isinstance(error, Retry) else repr(error)
    if not policy.should_retry(delivery_count):
        return Action(ActionKind.DEAD_LETTER, error=text)
    delay = error.delay if isinstance(error, Retry) and error.delay is not None else None
    if delay is None:
        delay = policy.delay(max(delivery_count, 1))
    return Action(ActionKind.RELEASE, delay=delay, error=text)


def exceeded_error(delivery_count: int, policy: RetryPolicy) -> str | None:
    """The dead-letter error for a message delivered more often than the policy allows.

    Failures are released with an error and dead-lettered on the last attempt, so a message
    arriving with ``delivery_count > max_attempts`` lost earlier leases (crashes, timeouts).
    """
    if delivery_count <= policy.max_attempts:
        return None
    return (
        f"exceeded max_attempts={policy.max_attempts} (delivery {delivery_count}: "
        f"earlier leases expired or were abandoned without an ack)"
    )


class OutcomeKind(str, Enum):
    """What finally happened to one delivery."""

    ACKED = "acked"
    RETRIED = "retried"
    DEAD_LETTERED = "dead_lettered"
    LEASE_LOST = "lease_lost"
    RELEASED = "released"
    #: a resend_after handler gave up: its copy was acked (no lease, so no dead letter)
    DISCARDED = "discarded"


@dataclass(frozen=True)
class Outcome:
    """One delivery's result: for logs, metrics, the status line and ``txqueue.testing``.

    ``at`` is the time the handler started (the database clock when pinned, else the
    machine's); ``delay`` is the retry delay of a RETRIED outcome; ``exception`` is what a
    failed handler raised (its traceback goes into the log record).
    """

    queue: str
    key: tuple[Any, ...]
    delivery_count: int
    kind: OutcomeKind
    at: datetime
    duration: float = 0.0
    delay: timedelta | None = None
    error: str | None = None
    exception: BaseException | None = field(default=None, compare=False, repr=False)
