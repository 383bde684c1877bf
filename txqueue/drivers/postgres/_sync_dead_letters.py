# Generated from txqueue/drivers/postgres/_async_dead_letters.py by tools/async_to_sync.py; do not edit.
"""Dead letters on PostgreSQL: the atomic move out of a queue, listing, replay and purge.

Functions over one pooled connection (autocommit; each opens its own transaction).

Generated from ``txqueue/drivers/postgres/_async_dead_letters.py``
by ``tools/async_to_sync.py``; do not edit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from txqueue.core.codec import dump_key, dump_payload, load_key, load_payload
from txqueue.core.schema import Table
from txqueue.drivers.base import DeadLetterParams, lease_lost, message_missing
from txqueue.drivers.postgres.codec import (
    decode,
    encode,
    map_errors,
    stored_token,
    token_location,
    utc,
)
from txqueue.drivers.postgres.statements import queue_statements
from txqueue.models import DeadLetter

__all__ = ["count", "dead_letter", "dead_letters", "purge", "replay"]

_RECORD = (
    "INSERT INTO txqueue_dead_letters (queue, key, payload, attempts, last_error,"
    " first_failure, last_failure) VALUES (%s, %s, %s, %s, %s, %s, %s)"
    " ON CONFLICT (queue, key) DO UPDATE SET payload = EXCLUDED.payload,"
    " attempts = EXCLUDED.attempts, last_error = EXCLUDED.last_error,"
    " first_failure = EXCLUDED.first_failure, last_failure = EXCLUDED.last_failure"
)


def dead_letter(connection: Any, params: DeadLetterParams, deliver: str) -> None:
    """Delete the leased message and record it as a dead letter, in one transaction."""
    table = params.queue
    statements = queue_statements(table, deliver)
    key = [encode(c, v) for c, v in zip(table.key_columns, params.key)]
    with map_errors():
        with connection.transaction():
            cursor = connection.execute(
                statements.dead_letter,
                [
                    params.now,
                    *key,
                    stored_token(params.lease_token),
                    token_location(params.lease_token),
                ],
            )
            row = cursor.fetchone()
            if row is None:
                exists = connection.execute(statements.exists, key)
                if exists.fetchone() is not None:
                    raise lease_lost(table, params.key)
                raise message_missing(table, params.key)
            payload = decode(table.payload_column, row[0])
            connection.execute(
                _RECORD,
                [
                    table.name.lower(),
                    dump_key(table, params.key),
                    dump_payload(table, payload),
                    row[1],
                    params.error,
                    row[2],
                    row[3],
                ],
            )


def dead_letters(connection: Any, table: Table, limit: int) -> list[DeadLetter]:
    with map_errors():
        cursor = connection.execute(
            "SELECT key, payload, attempts, last_error, first_failure, last_failure"
            " FROM txqueue_dead_letters WHERE queue = %s ORDER BY last_failure, key LIMIT %s",
            [table.name.lower(), limit],
        )
        rows = cursor.fetchall()
    return [
        DeadLetter(
            queue=table.name,
            key=load_key(table, key),
            payload=load_payload(table, payload),
            attempts=attempts,
            last_error=error,
            first_failure=utc(first),
            last_failure=utc(last),
        )
        for key, payload, attempts, error, first, last in rows
    ]


def replay(
    connection: Any, table: Table, keys: Sequence[tuple[Any, ...]] | None, deliver: str
) -> int:
    """Send dead letters back as new messages (delivery count 0); skip keys now taken."""
    statements = queue_statements(table, deliver)
    wanted = None if keys is None else {dump_key(table, key) for key in keys}
    replayed = 0
    with map_errors():
        with connection.transaction():
            cursor = connection.execute(
                "SELECT key, payload FROM txqueue_dead_letters WHERE queue = %s FOR UPDATE",
                [table.name.lower()],
            )
            for key_text, payload_text in cursor.fetchall():
                if wanted is not None and key_text not in wanted:
                    continue
                key = load_key(table, key_text)
                values: list[Any] = [encode(c, v) for c, v in zip(table.key_columns, key)]
                values += [encode(table.payload_column, load_payload(table, payload_text)), None]
                inserted = connection.execute(statements.send, values)
                if inserted.rowcount:
                    connection.execute(
                        "DELETE FROM txqueue_dead_letters WHERE queue = %s AND key = %s",
                        [table.name.lower(), key_text],
                    )
                    replayed += 1
    return replayed


def purge(connection: Any, table: Table, keys: Sequence[tuple[Any, ...]] | None) -> int:
    with map_errors():
        if keys is None:
            cursor = connection.execute(
                "DELETE FROM txqueue_dead_letters WHERE queue = %s", [table.name.lower()]
            )
            return int(cursor.rowcount)
        cursor = connection.execute(
            "DELETE FROM txqueue_dead_letters WHERE queue = %s AND key = ANY(%s)",
            [table.name.lower(), [dump_key(table, key) for key in keys]],
        )
        return int(cursor.rowcount)


def count(connection: Any, table: Table) -> int:
    with map_errors():
        cursor = connection.execute(
            "SELECT count(*) FROM txqueue_dead_letters WHERE queue = %s", [table.name.lower()]
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0
