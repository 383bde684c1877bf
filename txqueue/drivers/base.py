"""What every driver is asked to do, one parameter object per operation (River's shape).

The protocols themselves live in ``txqueue.drivers._async_protocol`` (and the generated
``txqueue.drivers._sync_protocol``; ``txqueue.drivers.protocol`` names both); the parameter
objects are shared by both faces. ``now`` is the
pinned database time for tests: None means "the database's clock".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from txqueue.core.failures import Raised, read_history
from txqueue.core.schema import Table
from txqueue.errors import AlreadyExists, FailedPrecondition, NotFound
from txqueue.models import DeadLetter

__all__ = [
    "MESSAGE_STATES",
    "AckParams",
    "BrowseParams",
    "DeadLetterParams",
    "DeleteMessagesParams",
    "DeleteParams",
    "MakeReadyParams",
    "PauseParams",
    "ReceiveParams",
    "ReleaseParams",
    "RenewParams",
    "SendParams",
    "TranslatedSql",
    "WriteKind",
    "WriteParams",
    "begin_sqlalchemy",
    "dead_letter_record",
    "key_taken",
    "lease_lost",
    "message_missing",
    "messages_leased",
    "messages_missing",
]


class TranslatedSql(str):
    """Engine SQL that txqueue's Spanner SQL front end made from a caller's statement.

    Given to a transaction's ``execute_sql`` / ``execute_update`` like any SQL; a driver
    that can check statements at the engine holds these to what the front end emits (SQLite:
    an authorizer), while txqueue's own SQL, a plain ``str``, runs unchecked.
    """

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ReceiveParams:
    """Lease up to ``max_batch_size`` ready messages for ``lease``, oldest deliver time first."""

    queue: Table
    max_batch_size: int
    lease: timedelta
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class RenewParams:
    """Extend the leases named by ``tokens`` by ``extension`` from now, with new tokens."""

    queue: Table
    tokens: Sequence[str]
    extension: timedelta
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class ReleaseParams:
    """Give up the leases named by ``tokens``: receivable again after ``delay``."""

    queue: Table
    tokens: Sequence[str]
    delay: timedelta
    now: datetime | None = None
    #: when set, the release records a failed attempt (kept for the dead-letter record)
    error: str | None = None
    #: what the failed attempt raised, for its failure history (``core.failures``)
    failure: Raised | None = None


@dataclass(frozen=True, slots=True)
class DeadLetterParams:
    """Move a leased message to the dead letters, atomically, while ``lease_token`` holds it."""

    queue: Table
    key: tuple[Any, ...]
    lease_token: str
    error: str
    now: datetime | None = None
    #: what the last attempt raised, added to the failure history that moves with it
    failure: Raised | None = None


@dataclass(frozen=True, slots=True)
class PauseParams:
    """Pause a queue (no receive leases from it; sends are still taken) or resume it.

    The state is a row of the driver's own catalog, which every receive statement reads in
    the same statement; resuming wakes the queue's waiting receivers.
    """

    queue: Table
    paused: bool


@dataclass(frozen=True, slots=True)
class DeleteMessagesParams:
    """Delete (cancel) the messages with ``keys``, all or none, in one transaction.

    A key with no message fails the whole call (``messages_missing``); so does a message under
    a live lease (``messages_leased``) unless ``force``: then its holder's ack gets NotFound.
    """

    queue: Table
    keys: Sequence[tuple[Any, ...]]
    force: bool = False
    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class MakeReadyParams:
    """Set the deliver time of the messages with ``keys`` (None: now), all or none.

    Any release delay or redelivery backoff is dropped, and so is an expired lease; a live
    lease refuses the call as ``DeleteMessagesParams`` does, unless ``force`` (which ends it:
    its holder's ack and renewal then fail).
    """

    queue: Table
    keys: Sequence[tuple[Any, ...]]
    deliver_time: datetime | None = None
    force: bool = False
    now: datetime | None = None


#: The states of a stored message, as ``StoredMessage.state`` and the browse filter name them.
MESSAGE_STATES = ("ready", "leased", "scheduled")


@dataclass(frozen=True, slots=True)
class BrowseParams:
    """Read messages without leasing them, in key order (checked by ``core.browse``).

    ``key_prefix`` holds leading key values, each matched exactly except a final string,
    matched as a string prefix; ``after`` is the last key of the previous page (keyset
    paging). With ``exact`` the prefix is a whole key matched exactly (one message).
    """

    queue: Table
    state: str | None
    key_prefix: tuple[Any, ...]
    after: tuple[Any, ...] | None
    limit: int
    now: datetime | None = None
    exact: bool = False


# Sends and acks are made once per message: not frozen, whose __init__ costs ~3x as much.
@dataclass(slots=True)
class SendParams:
    """Insert one message; ``deliver_time`` None means now."""

    queue: Table
    key: tuple[Any, ...]
    payload: Any
    deliver_time: datetime | None


@dataclass(slots=True)
class AckParams:
    """Delete one message; with ``lease_token`` only while that token holds the lease."""

    queue: Table
    key: tuple[Any, ...]
    lease_token: str | None
    ignore_not_found: bool
    now: datetime | None = None


class WriteKind(str, Enum):
    """Spanner's write mutations."""

    INSERT = "insert"
    UPDATE = "update"
    INSERT_OR_UPDATE = "insert_or_update"
    REPLACE = "replace"


@dataclass(frozen=True, slots=True)
class WriteParams:
    """Write rows (already checked against the table) with one of Spanner's mutations."""

    table: Table
    kind: WriteKind
    columns: tuple[str, ...]
    rows: Sequence[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class DeleteParams:
    """Delete rows by primary key; ``keys`` None deletes every row (Spanner's KeySet all)."""

    table: Table
    keys: Sequence[tuple[Any, ...]] | None


def begin_sqlalchemy(connection: Any) -> None:
    """Make a SQLAlchemy ``Connection`` begin its transaction, so its ``commit()`` commits the
    writes a driver makes on the DBAPI connection underneath (SQLAlchemy does not see them)."""
    in_transaction = getattr(connection, "in_transaction", None)
    if callable(in_transaction) and not in_transaction():
        connection.begin()


# ---- the refusals of sends, acks and dead-letter moves, worded alike on every engine ----


def key_taken(table: Table, key: Any) -> AlreadyExists:
    return AlreadyExists(f"queue {table.name} already has a message with key {key!r}")


def lease_lost(table: Table, key: Any) -> FailedPrecondition:
    return FailedPrecondition(f"lease token no longer holds the lease of {table.name} {key!r}")


def message_missing(table: Table, key: Any) -> NotFound:
    return NotFound(f"queue {table.name} has no message with key {key!r}")


def dead_letter_record(
    table: Table,
    key: tuple[Any, ...],
    payload: Any,
    attempts: int,
    stored: str,
    first_failure: datetime,
    last_failure: datetime,
) -> DeadLetter:
    """A dead letter as every driver reads it: ``stored`` is its failure history
    (``core.failures``; plain text written before histories existed reads as one failure)."""
    last_error, failures = read_history(stored, attempts, last_failure)
    return DeadLetter(
        table.name, key, payload, attempts, last_error or "", first_failure, last_failure, failures
    )


def messages_missing(table: Table, keys: Sequence[Any]) -> NotFound:
    shown = ", ".join(repr(k) for k in keys)
    return NotFound(f"queue {table.name} has no message with key(s) {shown}: nothing was changed")


def messages_leased(table: Table, keys: Sequence[Any]) -> FailedPrecondition:
    shown = ", ".join(repr(k) for k in keys)
    return FailedPrecondition(
        f"queue {table.name} has message(s) under a live lease: {shown}; nothing was changed"
        " (force to act on them anyway: their worker's ack then fails)"
    )
