# Generated from txqueue/drivers/postgres/_async_dead_letters.py by tools/async_to_sync.py; do not edit.
"""Dead letters on PostgreSQL: the atomic move out of a queue, listing, replay and purge;
and the release of a failed attempt, which extends its message's failure history.

Functions over one pooled connection (autocommit; each opens its own transaction).

Generated from ``txqueue/drivers/postgres/_async_dead_letters.py``
by ``tools/async_to_sync.py``; do not edit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from txqueue.core.codec import dump_key, dump_payload, load_key, load_payload
from txqueue.core.failures import record_failure
from txqueue.core.schema import Table
from txqueue.drivers.base import (
    DeadLetterParams,
    ReleaseParams,
    dead_letter_record,
    lease_lost,
    message_missing,
)
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

__all__ = ["count", "dead_letter", "dead_letters", "purge", "release_failed", "replay"]

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
            history = record_failure(row[4], params.error, params.failure, row[1], utc(row[3]))
            connection.execute(
                _RECORD,
                [
                    table.name.lower(),
                    dump_key(table, params.key),
                    dump_payload(table, payload),
                    row[1],
                    history,
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
        dead_letter_record(
            table,
            load_key(table, key),
            load_payload(table, payload),
            attempts,
            stored,
            utc(first),
            utc(last),
        )
        for key, payload, attempts, stored, first, last in rows
    ]


def release_failed(connection: Any, params: ReleaseParams, deliver: str) -> int:
    """Release leases recording a failed attempt: each message's failure history is read
    under a row lock and written back one entry longer, in one transaction."""
    statements = queue_statements(params.queue, deliver)
    assert params.error is not None
    released = 0
    with map_errors():
        with connection.transaction():
            for token in dict.fromkeys(params.tokens):
                location = token_location(token)
                if location is None:
                    continue  # not one of ours: it holds no lease
                stored = stored_token(token)
                cursor = connection.execute(
                    statements.failures,
                    {"now": params.now, "stored": stored, "location": location},
                )
                row = cursor.fetchone()
                if row is None:
                    continue
                now = utc(row[2])
                history = record_failure(row[0], params.error, params.failure, row[1], now)
                cursor = connection.execute(
                    statements.release,
                    {
                        "now": now,
                        "stored": [stored],
                        "locations": [location],
                        "delay": params.delay,
                        "error": history,
                    },
                )
                released += int(cursor.rowcount)
    return released


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
