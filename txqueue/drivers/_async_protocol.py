"""The operation-level contract between the Database face and a driver (asyncio face).

Each method is one domain operation in business words; a driver owns all of its SQL and maps
its engine's errors to ``txqueue.errors`` at this boundary. It sits in ``txqueue.drivers``,
below both faces, so that no driver imports a face; ``txqueue.drivers.protocol`` names this
contract and its sync twin.

The sync twin ``txqueue/drivers/_sync_protocol.py`` is generated from this file
by ``tools/async_to_sync.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Protocol

from txqueue.core.schema import Catalog, DdlStatement, Dialect, Table
from txqueue.drivers.base import (
    AckParams,
    BrowseParams,
    DeadLetterParams,
    DeleteMessagesParams,
    DeleteParams,
    MakeReadyParams,
    PauseParams,
    ReceiveParams,
    ReleaseParams,
    RenewParams,
    SendParams,
    WriteParams,
)
from txqueue.models import DeadLetter, LeaseRenewal, Message, ResultSet, StoredMessage

__all__ = ["AsyncDriver", "AsyncDriverTransaction", "AsyncReceiver"]


class AsyncDriverTransaction(Protocol):
    """One open transaction; on the caller's own connection it never commits or rolls back."""

    async def load_catalog(self) -> Catalog:
        """The catalog, read on this transaction's own connection: a lookup inside the
        transaction must not wait for a second one from the pool."""

    async def application_tables(self, names: Sequence[str] | None) -> dict[str, Table]:
        """The application's own tables and views, those txqueue did not create, as the
        engine's catalog describes them (``ApplicationTable``), by lower-cased name: the ones
        in ``names`` that exist (None: all). Read on this transaction's connection."""

    async def write(self, params: WriteParams) -> None:
        """Apply an insert/update/insert_or_update/replace mutation to checked rows."""

    async def delete(self, params: DeleteParams) -> int:
        """Delete rows by key (or all rows); returns how many were deleted."""

    async def send(self, params: SendParams) -> None:
        """Insert a message; AlreadyExists when its key is taken."""

    async def store_trace_context(self, params: SendParams, context: str) -> None:
        """Keep the sender's W3C trace context with the message ``params`` just sent."""

    async def ack(self, params: AckParams) -> None:
        """Delete a message; NotFound when missing, FailedPrecondition when the token lost it."""

    async def execute_sql(self, sql: str, params: Any = None) -> ResultSet:
        """Run a query in the engine's own SQL and return its rows."""

    async def execute_update(
        self, sql: str, params: Any = None, expected_rows: int | None = None
    ) -> int:
        """Run a DML statement in the engine's own SQL; returns the row count.

        With ``expected_rows`` (ASSERT_ROWS_MODIFIED) a different count undoes that statement
        alone and raises OutOfRange; the transaction stays open with its earlier writes.
        """

    def note_sent(self, queue: str) -> None:
        """Wake receivers of ``queue`` at commit: SQL inserted messages into it."""

    async def flush(self) -> None:
        """Apply buffered sends and acks now."""

    async def record_once(self, key: str) -> bool:
        """Record ``key`` in the idempotency ledger; False when it is there already."""

    async def commit(self) -> None:
        """Commit, then wake receivers of the queues this transaction sent to.

        When the connection drops during COMMIT the driver finds out what happened: it
        returns when the transaction committed, raises Aborted when it did not, and raises
        CommitOutcomeUnknown only when it cannot tell.
        """

    async def rollback(self) -> None:
        """Roll back; a no-op when the transaction is already finished."""


class AsyncReceiver(Protocol):
    """A receive stream's hold on the database: leases batches and waits for wake-ups."""

    async def receive(self, params: ReceiveParams) -> list[Message]:
        """Lease and return up to ``max_batch_size`` ready messages, in one short transaction."""

    async def seconds_until_ready(self, queue: Table) -> float | None:
        """Seconds until the next message of ``queue`` becomes ready; None when it is empty."""

    async def wait(self, timeout: float) -> None:
        """Block up to ``timeout`` seconds, returning early when a send to the queue commits."""

    async def close(self) -> None:
        """Release the connection and the wake-up subscription."""


class AsyncDriver(Protocol):
    """A database engine behind txqueue."""

    engine: str
    #: The traits (`txqueue.drivers.engines.traits_named`) the SQL front end writes this
    #: driver's SQL for: ``engine``, or a target of its own (Spanner's PostgreSQL dialect),
    #: known once `initialize` has read the database's dialect.
    sql_engine: str

    async def initialize(self, dialect: Dialect | None) -> Dialect:
        """Create txqueue's catalog when missing; record or check the database's dialect."""

    async def load_catalog(self) -> Catalog:
        """Tables (queues included) and indexes by lower-cased name."""

    async def apply_ddl(self, statements: Sequence[DdlStatement]) -> None:
        """Apply checked DDL statements, all or none, and record them in the catalog."""

    async def begin(
        self, connection: Any = None, read_only: bool = False
    ) -> AsyncDriverTransaction:
        """Start a transaction, or join the caller's open one on ``connection``."""

    async def open_receiver(self, queue: Table) -> AsyncReceiver:
        """Subscribe to wake-ups for ``queue`` before the first receive, so none is missed."""

    async def receive_now(self, params: ReceiveParams) -> list[Message]:
        """Lease what is ready now (maybe nothing), on a pooled connection, without waiting."""

    async def renew(self, params: RenewParams) -> list[LeaseRenewal]:
        """Renew leases by token; expired or unparseable tokens yield no row (as Spanner's RENEWLEASE)."""

    async def release(self, params: ReleaseParams) -> int:
        """Give up live leases by token; returns how many were released."""

    async def dead_letter(self, params: DeadLetterParams) -> None:
        """Move a message to the dead letters with its failure record, all or nothing."""

    async def dead_letters(self, queue: Table, limit: int) -> list[DeadLetter]:
        """The dead letters of ``queue``, oldest failure first."""

    async def replay_dead_letters(
        self, queue: Table, keys: Sequence[tuple[Any, ...]] | None
    ) -> int:
        """Send dead letters back to their queue as new messages; returns how many."""

    async def purge_dead_letters(self, queue: Table, keys: Sequence[tuple[Any, ...]] | None) -> int:
        """Delete dead letters for good; returns how many."""

    async def delete_messages(self, params: DeleteMessagesParams) -> int:
        """Delete the messages by key, all or none, checking their leases in the same
        transaction; returns how many were deleted."""

    async def make_ready(self, params: MakeReadyParams) -> int:
        """Set the messages' deliver time and drop their backoff, all or none, checking their
        leases in the same transaction; wakes the queue's receivers; returns how many."""

    async def set_paused(self, params: PauseParams) -> None:
        """Pause or resume a queue (idempotent); resuming wakes the queue's receivers."""

    async def is_paused(self, queue: Table) -> bool:
        """Whether ``queue`` is paused: its receives lease nothing."""

    async def queue_counts(self, queue: Table) -> Mapping[str, Any]:
        """ready / leased / scheduled counts and the oldest ready message's age in seconds."""

    async def estimate_counts(self, queue: Table) -> Mapping[str, Any]:
        """``queue_counts`` (and "estimated": False) for a small queue; for a large one,
        counts from a sample or engine statistics ("estimated": True) and the age of the
        message at the head of the ready index."""

    async def list_messages(self, params: BrowseParams) -> list[StoredMessage]:
        """Messages in key order, without leasing them (see ``BrowseParams``)."""

    async def expire_ledger(self, retention: timedelta) -> int:
        """Forget idempotency-ledger entries older than ``retention``; returns how many."""

    async def close(self) -> None:
        """Close every connection the driver opened."""
