"""Value objects returned by the public API: frozen, comparable, cheap."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, cast

__all__ = [
    "DeadLetter",
    "Failure",
    "LeaseRenewal",
    "Message",
    "QueueInfo",
    "ResultSet",
    "StoredMessage",
]


@dataclass(frozen=True, slots=True)
class Message:
    """One received message, leased to the receiver until ``lease_expiration``.

    ``lease_token`` names this lease; renewing returns a new token and invalidates this one.
    ``delivery_count`` counts the leases taken on the message, this one included.
    """

    queue: str
    key: tuple[Any, ...]
    payload: Any
    deliver_time: datetime
    lease_expiration: datetime
    lease_token: str
    delivery_count: int
    last_in_batch: bool = False


# One slot setter per field, in order: a field added to Message fails this unpacking at
# import until new_message sets it too.
_NEW = object.__new__
_QUEUE, _KEY, _PAYLOAD, _DELIVER, _EXPIRATION, _TOKEN, _COUNT, _LAST = (
    cast(Any, Message.__dict__[field.name]).__set__ for field in fields(Message)
)


def new_message(
    queue: str,
    key: tuple[Any, ...],
    payload: Any,
    deliver_time: datetime,
    lease_expiration: datetime,
    lease_token: str,
    delivery_count: int,
) -> Message:
    """``Message(...)`` for drivers building a batch of them: the same object, built through
    its slots rather than the frozen dataclass's ``object.__setattr__`` per field (half the
    time, ~0.4 µs a message)."""
    message = _NEW(Message)
    _QUEUE(message, queue)
    _KEY(message, key)
    _PAYLOAD(message, payload)
    _DELIVER(message, deliver_time)
    _EXPIRATION(message, lease_expiration)
    _TOKEN(message, lease_token)
    _COUNT(message, delivery_count)
    _LAST(message, False)
    return message


@dataclass(frozen=True, slots=True)
class LeaseRenewal:
    """The outcome of renewing one lease; ``new_token`` is None when it cannot be renewed."""

    old_token: str
    new_token: str | None
    lease_expiration: datetime | None


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed attempt of a message: its number, when, and what it raised.

    ``error_type`` is the exception's qualified name (empty when only a text was recorded);
    ``traceback`` is None when there was none, and keeps its end when it was long.
    """

    attempt: int
    failed_at: datetime
    error_type: str
    message: str
    traceback: str | None = None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A message that failed for good, kept with what is known about its failures.

    ``failures`` are its last failed attempts (at most ten), oldest first.
    """

    queue: str
    key: tuple[Any, ...]
    payload: Any
    attempts: int
    last_error: str
    first_failure: datetime
    last_failure: datetime
    failures: tuple[Failure, ...] = ()


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as it sits in its queue, read without leasing it (browsing, dashboards).

    ``state`` is "ready" (receivable now), "leased" (under a live lease) or "scheduled"
    (receivable later: its deliver time, a release's delay or a lost lease's backoff is
    still ahead). ``lease_expiration`` is None when no live lease holds the message.
    """

    queue: str
    key: tuple[Any, ...]
    payload: Any
    deliver_time: datetime
    state: str
    lease_expiration: datetime | None
    delivery_count: int
    last_error: str | None
    #: its failed attempts so far (at most the last ten), oldest first
    failures: tuple[Failure, ...] = ()


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """Counts describing one queue at one moment.

    ``estimated`` is True when the counts come from engine statistics or a sample rather
    than from counting every row (``Database.queue_info(..., estimate=True)`` on a large
    queue). ``paused`` is True while the queue is paused (``Database.pause_queue``): it
    accepts sends, and no receive leases from it.
    """

    name: str
    ready: int
    leased: int
    scheduled: int
    dead_letters: int
    oldest_ready_age_seconds: float | None
    estimated: bool = False
    paused: bool = False


class ResultSet:
    """Rows of a query: iterate for tuples; ``fields`` names the columns."""

    __slots__ = ("fields", "rows")

    def __init__(self, fields: list[str], rows: list[tuple[Any, ...]]) -> None:
        self.fields = fields
        self.rows = rows

    def __iter__(self) -> Any:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def one(self) -> tuple[Any, ...]:
        """The single row of a query that must return exactly one."""
        if len(self.rows) != 1:
            from txqueue.errors import FailedPrecondition

            raise FailedPrecondition(f"expected exactly one row, got {len(self.rows)}")
        return self.rows[0]
