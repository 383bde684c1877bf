"""Dead letters on SQLite: the atomic move out of a queue, listing, replay and purge."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from txqueue.core.codec import dump_key, dump_payload, load_key, load_payload
from txqueue.core.durations import from_micros
from txqueue.core.failures import record_failure
from txqueue.core.schema import Table
from txqueue.drivers.base import (
    DeadLetterParams,
    dead_letter_record,
    lease_lost,
    message_missing,
)
from txqueue.drivers.sqlite.engine import decode, encode, encode_key, map_errors, now_micros
from txqueue.drivers.sqlite.locking import begin_immediate
from txqueue.drivers.sqlite.statements import queue_statements
from txqueue.models import DeadLetter

__all__ = ["dead_letter", "dead_letters", "purge", "replay"]


def dead_letter(connection: sqlite3.Connection, params: DeadLetterParams, deliver: str) -> None:
    """Delete the leased message and record it as a dead letter, in one transaction."""
    table = params.queue
    statements = queue_statements(table, deliver)
    now = now_micros(params.now)
    key = encode_key(table, params.key)
    with map_errors():
        begin_immediate(connection)
        try:
            row = connection.execute(
                statements.dead_letter, [*key, params.lease_token, now]
            ).fetchone()
            if row is None:
                if connection.execute(statements.exists, key).fetchone():
                    raise lease_lost(table, params.key)
                raise message_missing(table, params.key)
            payload = decode(table.payload_column, row[0])
            history = record_failure(row[3], params.error, params.failure, row[1], from_micros(now))
            connection.execute(
                "INSERT OR REPLACE INTO txqueue_dead_letters (queue, key, payload, attempts,"
                " last_error, first_failure, last_failure) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    table.name.lower(),
                    dump_key(table, params.key),
                    dump_payload(table, payload),
                    row[1],
                    history,
                    row[2] if row[2] is not None else now,
                    now,
                ),
            )
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise


def dead_letters(connection: sqlite3.Connection, table: Table, limit: int) -> list[DeadLetter]:
    with map_errors():
        rows = connection.execute(
            "SELECT key, payload, attempts, last_error, first_failure, last_failure"
            " FROM txqueue_dead_letters WHERE queue = ? ORDER BY last_failure, key LIMIT ?",
            (table.name.lower(), limit),
        ).fetchall()
    return [
        dead_letter_record(
            table,
            load_key(table, key),
            load_payload(table, payload),
            attempts,
            stored,
            from_micros(first),
            from_micros(last),
        )
        for key, payload, attempts, stored, first, last in rows
    ]


def _selected(
    connection: sqlite3.Connection, table: Table, keys: Sequence[tuple[Any, ...]] | None
) -> list[tuple[str, str]]:
    rows = connection.execute(
        "SELECT key, payload FROM txqueue_dead_letters WHERE queue = ?", (table.name.lower(),)
    ).fetchall()
    if keys is None:
        return [(k, p) for k, p in rows]
    wanted = {dump_key(table, key) for key in keys}
    return [(k, p) for k, p in rows if k in wanted]


def replay(
    connection: sqlite3.Connection,
    table: Table,
    keys: Sequence[tuple[Any, ...]] | None,
    deliver: str,
) -> int:
    """Send dead letters back as new messages (delivery count 0); skip keys now taken."""
    statements = queue_statements(table, deliver)
    replayed = 0
    with map_errors():
        begin_immediate(connection)
        try:
            for key_text, payload_text in _selected(connection, table, keys):
                key = load_key(table, key_text)
                payload = encode(table.payload_column, load_payload(table, payload_text))
                values = [*encode_key(table, key), payload, None]
                if connection.execute(statements.send, values).rowcount:
                    connection.execute(
                        "DELETE FROM txqueue_dead_letters WHERE queue = ? AND key = ?",
                        (table.name.lower(), key_text),
                    )
                    replayed += 1
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
    return replayed


def purge(
    connection: sqlite3.Connection, table: Table, keys: Sequence[tuple[Any, ...]] | None
) -> int:
    with map_errors():
        if keys is None:
            return connection.execute(
                "DELETE FROM txqueue_dead_letters WHERE queue = ?", (table.name.lower(),)
            ).rowcount
        return sum(
            connection.execute(
                "DELETE FROM txqueue_dead_letters WHERE queue = ? AND key = ?",
                (table.name.lower(), dump_key(table, key)),
            ).rowcount
            for key in keys
        )


def count(connection: sqlite3.Connection, table: Table) -> int:
    with map_errors():
        row = connection.execute(
            "SELECT count(*) FROM txqueue_dead_letters WHERE queue = ?", (table.name.lower(),)
        ).fetchone()
    return int(row[0])
