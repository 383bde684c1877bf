"""Dead letters on Spanner: the atomic move out of a queue, listing, replay and purge; and
the idempotency ledger's expiry."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from google.cloud.spanner_v1 import KeySet, param_types

from txqueue.core.codec import dump_key, dump_payload, load_key, load_payload
from txqueue.core.failures import record_failure
from txqueue.core.schema import Table
from txqueue.drivers.base import (
    DeadLetterParams,
    dead_letter_record,
    lease_lost,
    message_missing,
)
from txqueue.drivers.spanner.codec import encode, encode_key, key_params, map_errors
from txqueue.drivers.spanner.engine import current_time, query, update
from txqueue.drivers.spanner.spelling import spelling_of
from txqueue.drivers.spanner.statements import key_matches, queue_statements
from txqueue.models import DeadLetter

__all__ = ["count", "dead_letter", "dead_letters", "expire_ledger", "purge", "replay"]

_COLUMNS = ("queue", "key", "payload", "attempts", "last_error", "first_failure", "last_failure")


def dead_letter(transaction: Any, params: DeadLetterParams, deliver: str) -> None:
    """Delete the leased message and record it as a dead letter (the caller commits)."""
    table = params.queue
    now = current_time(transaction, params.now)
    values, types = key_params(table, params.key)
    _, rows = query(
        transaction,
        queue_statements(table, deliver, spelling_of(transaction)).dead_letter,
        values,
        types,
    )
    if not rows:
        raise message_missing(table, params.key)
    payload, attempts, first, token, expiration, stored = rows[0]
    if token != params.lease_token or expiration is None or expiration <= now:
        raise lease_lost(table, params.key)
    record = (
        table.name.lower(),
        dump_key(table, params.key),
        dump_payload(table, payload),
        attempts,
        record_failure(stored, params.error, params.failure, attempts, now),
        first if first is not None else now,
        now,
    )
    with map_errors():
        transaction.delete(table.name, KeySet(keys=[encode_key(table, params.key)]))
        transaction.insert_or_update("txqueue_dead_letters", columns=_COLUMNS, values=[record])


def dead_letters(snapshot: Any, table: Table, limit: int) -> list[DeadLetter]:
    _, rows = query(
        snapshot,
        "SELECT key, payload, attempts, last_error, first_failure, last_failure"
        " FROM txqueue_dead_letters WHERE queue = @queue ORDER BY last_failure, key LIMIT @limit",
        {"queue": table.name.lower(), "limit": limit},
    )
    return [
        dead_letter_record(
            table, load_key(table, key), load_payload(table, payload), attempts, stored, first, last
        )
        for key, payload, attempts, stored, first, last in rows
    ]


def _selected(
    transaction: Any, table: Table, keys: Sequence[tuple[Any, ...]] | None
) -> list[tuple[str, str]]:
    _, rows = query(
        transaction,
        "SELECT key, payload FROM txqueue_dead_letters WHERE queue = @queue",
        {"queue": table.name.lower()},
    )
    if keys is None:
        return [(k, p) for k, p in rows]
    wanted = {dump_key(table, key) for key in keys}
    return [(k, p) for k, p in rows if k in wanted]


def replay(
    transaction: Any, table: Table, keys: Sequence[tuple[Any, ...]] | None, deliver: str
) -> int:
    """Send dead letters back as new messages (delivery count 0); skip keys now taken."""
    selected = _selected(transaction, table, keys)
    if not selected:
        return 0
    loaded = [(text, load_key(table, text), payload) for text, payload in selected]
    spelling = spelling_of(transaction)
    match = key_matches(table, len(loaded), spelling)
    values: dict[str, Any] = {}
    types: dict[str, Any] = {}
    for n, (_, key, _) in enumerate(loaded):
        one, kinds = key_params(table, key)
        values.update({f"{name}_{n}": v for name, v in one.items()})
        types.update({f"{name}_{n}": t for name, t in kinds.items()})
    width = len(table.primary_key)
    _, taken_rows = query(
        transaction,
        f"SELECT {', '.join(spelling.quote(k) for k in table.primary_key)}"
        f" FROM {spelling.quote(table.name)}"
        f" WHERE {match}",
        values,
        types,
    )
    taken = {dump_key(table, row[:width]) for row in taken_rows}
    columns = (*table.primary_key, table.payload_column.name)
    replayed = 0
    with map_errors():
        for text, key, payload in loaded:
            if text in taken:
                continue
            value = encode(table.payload_column, load_payload(table, payload))
            transaction.insert(
                table.name, columns=columns, values=[[*encode_key(table, key), value]]
            )
            transaction.delete("txqueue_dead_letters", KeySet(keys=[[table.name.lower(), text]]))
            replayed += 1
    return replayed


def purge(transaction: Any, table: Table, keys: Sequence[tuple[Any, ...]] | None) -> int:
    selected = _selected(transaction, table, keys)
    if selected:
        with map_errors():
            transaction.delete(
                "txqueue_dead_letters",
                KeySet(keys=[[table.name.lower(), text] for text, _ in selected]),
            )
    return len(selected)


def count(snapshot: Any, table: Table) -> int:
    _, rows = query(
        snapshot,
        "SELECT COUNT(*) FROM txqueue_dead_letters WHERE queue = @queue",
        {"queue": table.name.lower()},
    )
    return int(rows[0][0])


def expire_ledger(transaction: Any, retention: timedelta) -> int:
    """Forget ledger entries older than ``retention``."""
    cutoff = current_time(transaction, None) - retention
    return update(
        transaction,
        "DELETE FROM txqueue_ledger WHERE recorded_at <= @cutoff",
        {"cutoff": cutoff},
        {"cutoff": param_types.TIMESTAMP},
    )
