"""Cloud Spanner's own queues (``?queues=native``, or ``auto`` where the database has them).

A native queue is Spanner's ``CREATE QUEUE``: no hidden columns, no indexes of txqueue's.
Sends and acks are the client's ``Send`` / ``Ack`` mutations (google-cloud-spanner 3.71's
``Mutation`` has both: ``batch.send(queue, key, payload, deliver_time)`` /
``batch.ack(queue, key, ignore_not_found)``); receive and renew are Spanner's table-valued
functions ``RECEIVE_<Queue>`` and ``RENEWLEASE_<Queue>``, as its documentation writes them.

What Spanner's queues do not offer, and what txqueue does instead:

- **An ack has no lease token**: Spanner's ``Ack`` deletes the message whoever holds it, so a
  stale worker (its lease expired, the message re-leased to another) would delete the other
  worker's message. txqueue's fenced ack (``ack(..., lease_token=t)``) first renews ``t`` with
  ``RENEWLEASE_<Queue>`` in the same transaction: a NULL new token, or no row (expired or
  unparseable), means ``t`` no longer holds the lease (``FailedPrecondition``, nothing
  written); otherwise the transaction holds the lease and the ``Ack`` follows. An ack without
  a token is Spanner's own, unfenced.
- **No release**: a lease cannot be given back early; the message is received again when its
  lease expires, after Spanner's own backoff (``release`` changes nothing and says so: 0).
- **Lease length** is Spanner's (about ten seconds; renew to keep a message longer):
  ``lease_duration`` and a renewal's extension are not Spanner's to take.
- **Refusals come at the commit**: a taken key (``AlreadyExists``) or a missing message
  (``NotFound``) is Spanner's answer to the mutation, not a read of txqueue's first.

Dead letters, browse, counts, make-ready and delete of chosen messages read txqueue's hidden
lease state, which a native queue does not have: on native queues they raise
``FailedPrecondition``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from google.cloud.spanner_v1 import param_types

from txqueue.core.schema import Column, ColumnType, Dialect, Table
from txqueue.drivers.base import (
    AckParams,
    ReceiveParams,
    ReleaseParams,
    RenewParams,
    SendParams,
    lease_lost,
)
from txqueue.drivers.spanner import outcome
from txqueue.drivers.spanner.codec import encode, encode_key, map_errors
from txqueue.drivers.spanner.spelling import GOOGLESQL, Spelling, spelling_of
from txqueue.errors import FailedPrecondition, InvalidArgument, TxqueueError
from txqueue.models import LeaseRenewal, Message, new_message

__all__ = [
    "apply_messages",
    "create_queue",
    "decide",
    "drop_queue",
    "receive",
    "receive_sql",
    "refuse",
    "release",
    "renew",
    "renew_sql",
]

#: Where the choice is recorded once per database (queues of both kinds cannot be mixed).
SETTING = "queues"
#: The queue ``auto`` creates and drops to learn whether the database has native queues.
PROBE = "txqueue_probe_queue"
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")


def _name(table: Table) -> str:
    """The queue's name as a TVF suffix (validated names: letters, digits, underscores)."""
    if not _NAME.match(table.name):
        raise InvalidArgument(f"queue name {table.name!r} cannot name a Spanner queue function")
    return table.name


# ---- DDL --------------------------------------------------------------------------------


def create_queue(table: Table, spelling: Spelling = GOOGLESQL) -> str:
    """``CREATE QUEUE`` for ``table`` as Spanner documents it, in either dialect: the
    declared columns only."""
    columns = [spelling.column(c) for c in table.columns]
    keys = [spelling.quote(k) for k in table.primary_key]
    return spelling.table(
        table.name, columns, keys, table.parent, table.on_delete_cascade, tail="QUEUE"
    )


def drop_queue(table: Table, indexes: Sequence[str], spelling: Spelling = GOOGLESQL) -> list[str]:
    """DROP the user ``indexes`` on the queue, then ``DROP QUEUE``."""
    quote = spelling.quote
    return [f"DROP INDEX {quote(name)}" for name in indexes] + [f"DROP QUEUE {quote(table.name)}"]


def decide(database: Any, mode: str, dialect: Dialect) -> bool:
    """Whether this database's queues are native, recorded once in ``txqueue_settings``:
    ``native``/``emulated`` as asked (a database keeps one kind), ``auto`` by whether the
    database accepts ``CREATE QUEUE`` (emulated when it already holds emulated queues)."""
    from txqueue.drivers.spanner.engine import query

    _, rows = database.read(
        query,
        "SELECT (SELECT value FROM txqueue_settings WHERE name = @name),"
        " EXISTS (SELECT 1 FROM txqueue_objects WHERE kind = 'queue')",
        {"name": SETTING},
    )
    recorded, has_queues = rows[0]
    if recorded is None:
        probed = mode == "auto" and not has_queues
        recorded = _probe(database) if probed else ("emulated" if mode == "auto" else mode)
        database.read_write(_record, recorded)
    if mode not in ("auto", recorded):
        raise FailedPrecondition(
            f"queues={mode} but this database's queues are {recorded} (a database keeps one"
            f" kind: connect with queues=auto or queues={recorded})"
        )
    return bool(recorded == "native")


def _record(transaction: Any, recorded: str) -> None:
    with map_errors():
        transaction.insert_or_update(
            "txqueue_settings", columns=("name", "value"), values=[(SETTING, recorded)]
        )


def _probe(database: Any) -> str:
    """``native`` when the database accepts ``CREATE QUEUE`` (the probe queue is dropped
    again), else ``emulated``."""
    spelling: Spelling = database.spelling
    columns = [
        spelling.column(Column("id", ColumnType.STRING, nullable=False, length=36)),
        spelling.column(Column("payload", ColumnType.BYTES, nullable=False)),
    ]
    try:
        database.update_ddl(
            [spelling.table(PROBE, columns, [spelling.quote("id")], None, False, tail="QUEUE")]
        )
    except TxqueueError as error:
        if "QUEUE" not in str(error).upper():
            raise
        return "emulated"
    database.update_ddl([f"DROP QUEUE {spelling.quote(PROBE)}"])
    return "native"


# ---- sends and acks -----------------------------------------------------------------------


def apply_messages(transaction: Any, pending: Sequence[SendParams | AckParams]) -> None:
    """The buffered sends and acks as Send / Ack mutations, in order; a fenced ack renews its
    token first in the same transaction (see the module's doc)."""
    for item in pending:
        table = item.queue
        key = encode_key(table, item.key)
        if isinstance(item, SendParams):
            with map_errors():
                transaction.send(
                    queue=table.name,
                    key=key,
                    payload=encode(table.payload_column, item.payload),
                    deliver_time=item.deliver_time,
                )
            continue
        if item.lease_token is not None:
            renewed = _renew(transaction, table, [item.lease_token])
            if not renewed or renewed[0].new_token is None:
                raise lease_lost(table, item.key)
        with map_errors():
            transaction.ack(queue=table.name, key=key, ignore_not_found=item.ignore_not_found)


# ---- receive and renew --------------------------------------------------------------------


def receive_sql(table: Table, max_batch_size: int, spelling: Spelling = GOOGLESQL) -> str:
    """``RECEIVE_<Queue>`` (PostgreSQL: ``spanner.receive_<queue>(max_batch_size, priority,
    max_duration)``) for what is ready now (no waiting: ``max_duration`` of 0 s)."""
    keys = ", ".join(spelling.quote(k) for k in table.primary_key)
    payload = spelling.quote(table.payload_column.name)
    if spelling.postgresql:
        return (
            f"SELECT {keys}, {payload}, deliver_time, spanner_lease_expiration_timestamp,"
            f" spanner_lease_token FROM spanner.receive_{_name(table)}"
            f"({int(max_batch_size)}, NULL, '0s')"
        )
    return (
        f"SELECT {keys}, {payload}, DeliverTime, SpannerLeaseExpirationTimestamp,"
        f" SpannerLeaseToken FROM RECEIVE_{_name(table)}(max_duration=>'0s',"
        f" max_batch_size=>{int(max_batch_size)})"
    )


def renew_sql(table: Table, spelling: Spelling = GOOGLESQL) -> str:
    """``RENEWLEASE_<Queue>`` (PostgreSQL: ``spanner.renewlease_<queue>(lease_tokens)``)."""
    if spelling.postgresql:
        return (
            "SELECT spanner_old_lease_token, spanner_new_lease_token,"
            f" spanner_lease_expiration_timestamp FROM spanner.renewlease_{_name(table)}(@tokens)"
        )
    return (
        "SELECT SpannerOldLeaseToken, SpannerNewLeaseToken, SpannerLeaseExpirationTimestamp"
        f" FROM RENEWLEASE_{_name(table)}(lease_tokens=>@tokens)"
    )


def receive(transaction: Any, params: ReceiveParams) -> list[Message]:
    """Lease what ``RECEIVE_<Queue>`` hands out (the caller commits). A paused queue leases
    nothing: Spanner's function knows no pause, so its row in ``txqueue_paused`` is read
    first, in the same transaction (a pause committed meanwhile conflicts with it)."""
    from txqueue.drivers.spanner.catalog import is_paused
    from txqueue.drivers.spanner.engine import query

    table = params.queue
    if is_paused(transaction, table):
        return []
    outcome.note_writes(transaction)  # the leases it takes: a marker resolves a lost commit
    spelling = spelling_of(transaction)
    _, rows = query(transaction, receive_sql(table, params.max_batch_size, spelling))
    width = len(table.primary_key)
    messages = []
    for row in rows:
        payload, deliver_time, expiration, token = row[width : width + 4]
        # Spanner keeps the delivery count to itself: 1 stands for "at least once"
        key = tuple(row[:width])
        messages.append(new_message(table.name, key, payload, deliver_time, expiration, token, 1))
    return messages


def _renew(transaction: Any, table: Table, tokens: Sequence[str]) -> list[LeaseRenewal]:
    from txqueue.drivers.spanner.engine import query

    outcome.note_writes(transaction)
    _, rows = query(
        transaction,
        renew_sql(table, spelling_of(transaction)),
        {"tokens": list(tokens)},
        {"tokens": param_types.Array(param_types.STRING)},
    )
    return [LeaseRenewal(old, new, expiration) for old, new, expiration in rows]


def renew(transaction: Any, params: RenewParams) -> list[LeaseRenewal]:
    """``RENEWLEASE_<Queue>``: a row per token it could parse and that had not expired."""
    return _renew(transaction, params.queue, params.tokens)


def release(params: ReleaseParams) -> int:
    """A native lease cannot be given back early: nothing changes (see the module's doc)."""
    return 0


def refuse(operation: str) -> FailedPrecondition:
    """The error of an operation native queues do not support."""
    return FailedPrecondition(
        f"{operation} reads txqueue's lease state, which native Cloud Spanner queues do not"
        " have: connect with ?queues=emulated for it"
    )
