"""Blocking SQLite operations on one ``sqlite3.Connection``; both faces' drivers call these.

Transactions are explicit (``isolation_level=None``): ``BEGIN IMMEDIATE`` takes the write lock
up front, so two writers never deadlock on a read-to-write upgrade; the busy timeout makes
them queue instead of failing. Engine errors become ``txqueue.errors`` here, with the original
as ``__cause__``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any

from txqueue.core.durations import from_micros, to_micros
from txqueue.core.lengths import length_refusal
from txqueue.core.schema import Column, ColumnType, Table
from txqueue.core.values import JsonText
from txqueue.drivers.base import (
    AckParams,
    DeleteParams,
    SendParams,
    TranslatedSql,
    WriteKind,
    WriteParams,
    key_taken,
    lease_lost,
    message_missing,
)
from txqueue.drivers.buffered import runs
from txqueue.drivers.sqlite.authorizer import guarded, install
from txqueue.drivers.sqlite.locking import Connection, begin_immediate
from txqueue.drivers.sqlite.statements import queue_statements, quote
from txqueue.errors import (
    Aborted,
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    TxqueueError,
    Unavailable,
)
from txqueue.models import Message, ResultSet, new_message
from txqueue.telemetry import remember

__all__ = [
    "connect",
    "decode",
    "encode",
    "map_errors",
    "now_micros",
]


def connect(path: str, synchronous: str, busy_timeout: timedelta) -> sqlite3.Connection:
    """Open a connection in WAL mode with foreign keys on and explicit transactions."""
    check_directory(path)
    create_owner_only(path)
    try:
        connection = sqlite3.connect(
            path,
            timeout=busy_timeout.total_seconds(),
            isolation_level=None,
            check_same_thread=False,
            factory=Connection,
        )
        connection.busy_ms = int(busy_timeout.total_seconds() * 1000)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(f"PRAGMA synchronous={synchronous}")
        connection.execute("PRAGMA foreign_keys=ON")
        connection.guard = install(connection)
    except sqlite3.Error as error:
        raise Unavailable(f"cannot open SQLite database {path!r}: {error}") from error
    return connection


def check_directory(path: str) -> None:
    """Refuse a path whose directory is missing (NotFound) or not a directory
    (InvalidArgument): txqueue creates the database file, never directories, and no wait
    can mend either (SQLite would say only "unable to open database file")."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.exists(directory):
        raise NotFound(
            f"cannot open SQLite database {path!r}: directory {directory!r} does not exist "
            "(txqueue creates the database file, not its directory)"
        )
    if not os.path.isdir(directory):
        raise InvalidArgument(
            f"cannot open SQLite database {path!r}: {directory!r} is not a directory"
        )


def create_owner_only(path: str) -> None:
    """Create the database file with mode 0600 when it does not exist yet.

    SQLite would create it 0644 under the usual umask, readable by every user, and gives
    its -wal and -shm files the main file's mode. O_EXCL makes this safe against another
    process creating it at the same moment; an existing file keeps the mode it has.
    """
    if path in ("", ":memory:"):
        return
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600)
    except OSError:  # it exists (left alone), or cannot be created: SQLite will say why
        return
    try:
        os.fchmod(descriptor, 0o600)  # whatever the umask took away
    finally:
        os.close(descriptor)


#: SQLite's messages for input it refuses whatever its state: a string or blob over its
#: length limit (SQLITE_TOOBIG, 1 GiB unless lowered) and a name it keeps for itself.
_CALLERS_INPUT = ("string or blob too big", "object name reserved for internal use")


#: How SQLite names a violated CHECK constraint (declared lengths, ``core.lengths``).
_CHECK_FAILED = "CHECK constraint failed: "


def map_error(error: sqlite3.Error) -> TxqueueError:
    """The most specific txqueue error for a sqlite3 error."""
    text = str(error)
    if any(marker in text for marker in _CALLERS_INPUT):
        return InvalidArgument(f"SQLite refused the input: {text}")
    if isinstance(error, sqlite3.IntegrityError):
        if "UNIQUE" in text or "PRIMARY KEY" in text:
            return AlreadyExists(f"row already exists: {text}")
        if "FOREIGN KEY" in text:
            return FailedPrecondition(
                f"interleaving rule violated (parent row missing or has children): {text}"
            )
        if text.startswith(_CHECK_FAILED):
            return length_refusal(text[len(_CHECK_FAILED) :]) or InvalidArgument(text)
        return InvalidArgument(text)
    if isinstance(error, sqlite3.OperationalError):
        if "locked" in text or "busy" in text:
            return Aborted(f"database is busy: {text}")
        if "no such table" in text:
            return NotFound(text)
        if any(
            marker in text
            for marker in (
                "syntax error",
                "no such column",
                "no such function",
                "wrong number of arguments",
                "misuse of",
                "ambiguous column",
            )
        ):
            return InvalidArgument(text)
        return Unavailable(text)
    if isinstance(error, sqlite3.ProgrammingError):
        return InvalidArgument(text)
    return Unavailable(text)


@contextmanager
def map_errors() -> Iterator[None]:
    """Translate sqlite3 errors raised inside the block.

    OverflowError is what sqlite3 raises, before SQLite sees it, for a blob or string over
    2 GiB or an integer beyond 64 bits: input SQLite cannot take, so InvalidArgument.
    """
    try:
        yield
    except sqlite3.Error as error:
        raise map_error(error) from error
    except OverflowError as error:
        raise InvalidArgument(f"SQLite cannot store the value: {error}") from error


def now_micros(now: datetime | None) -> int:
    """The pinned time, or the wall clock, in µs (SQLite has no server clock of its own)."""
    return to_micros(now if now is not None else datetime.now(timezone.utc))


def encode(column: Column, value: Any) -> Any:
    """A checked Python value as SQLite stores it."""
    if value is None:
        return None
    if column.array:
        return json.dumps([_json_ready(column, item) for item in value])
    kind = column.type
    if kind is ColumnType.TIMESTAMP:
        return to_micros(value)
    if kind is ColumnType.BOOL:
        return int(value)
    if kind is ColumnType.DATE:
        return value.isoformat()
    if kind is ColumnType.NUMERIC:
        return str(value)
    if kind is ColumnType.JSON:
        return value if isinstance(value, JsonText) else json.dumps(value)
    return value


def _json_ready(column: Column, value: Any) -> Any:
    if value is None or column.type in (ColumnType.INT64, ColumnType.STRING, ColumnType.BOOL):
        return value
    if column.type is ColumnType.BYTES:
        return value.hex()
    return encode(Column(column.name, column.type), value)


def decode(column: Column, value: Any) -> Any:
    """A stored SQLite value as the Python value of its column type."""
    if value is None:
        return None
    if column.array:
        return json.loads(value)
    kind = column.type
    if kind is ColumnType.TIMESTAMP:
        return from_micros(value)
    if kind is ColumnType.BOOL:
        return bool(value)
    if kind is ColumnType.DATE:
        return _dt.date.fromisoformat(value)
    if kind is ColumnType.JSON:
        return json.loads(value)
    if kind is ColumnType.BYTES:
        return bytes(value)
    if kind is ColumnType.NUMERIC:
        import decimal

        # an application's NUMERIC column holds REAL: 0.1 reads as 0.1, not its binary value
        return decimal.Decimal(repr(value) if isinstance(value, float) else value)
    if kind in (ColumnType.FLOAT64, ColumnType.FLOAT32) and isinstance(value, str):
        return float(value)  # 'NaN': SQLite has no NaN value (see sql.rewrite)
    return value


_PASS_THROUGH = (ColumnType.INT64, ColumnType.STRING, ColumnType.FLOAT64, ColumnType.FLOAT32)


def messages_from_rows(table: Table, rows: Sequence[Sequence[Any]]) -> list[Message]:
    """Messages from receive's RETURNING rows, oldest deliver time first.

    Rows are ordered by their stored deliver time (integers) before any conversion, and
    columns that SQLite already returns as the right Python type are not converted at all.
    """
    keys = table.key_columns
    payload = table.payload_column
    width = len(keys)
    plain_keys = all(c.type in _PASS_THROUGH and not c.array for c in keys)
    plain_payload = payload.type in (ColumnType.STRING, ColumnType.BYTES)
    name = table.name
    messages = []
    expirations: dict[int, datetime] = {}  # one per receive: every row shares it
    for row in sorted(rows, key=lambda r: r[width + 1]):
        expiration = expirations.get(row[width + 2])
        if expiration is None:
            expiration = expirations[row[width + 2]] = from_micros(row[width + 2])
        messages.append(
            new_message(
                name,
                tuple(row[:width]) if plain_keys else tuple(map(decode, keys, row[:width])),
                row[width] if plain_payload else decode(payload, row[width]),
                from_micros(row[width + 1]),
                expiration,
                row[width + 3],
                row[width + 4],
            )
        )
        if row[width + 5] is not None:
            remember(row[width + 3], row[width + 5])
    return messages


def encode_key(table: Table, key: tuple[Any, ...]) -> list[Any]:
    return [encode(c, v) for c, v in zip(table.key_columns, key)]


@lru_cache(maxsize=512)
def stored_as_given(table: Table) -> bool:
    """True when SQLite stores a message's key and payload exactly as checked (no encoding)."""
    columns = (*table.key_columns, table.payload_column)
    return all(c.type in _STORED_AS_GIVEN and not c.array for c in columns)


_STORED_AS_GIVEN = (*_PASS_THROUGH, ColumnType.BYTES)


def send_row(params: SendParams, as_given: bool = False) -> list[Any]:
    """The INSERT's arguments; ``as_given``: the caller knows ``stored_as_given(queue)``."""
    deliver = None if params.deliver_time is None else to_micros(params.deliver_time)
    if as_given:
        return [*params.key, params.payload, deliver]
    table = params.queue
    return [*encode_key(table, params.key), encode(table.payload_column, params.payload), deliver]


def ack_row(params: AckParams, now: int | None = None, as_given: bool = False) -> list[Any]:
    """The DELETE's arguments; ``as_given``: the caller knows ``stored_as_given(queue)``."""
    token = params.lease_token
    if params.now is not None or now is None:
        now = now_micros(params.now)
    key = params.key if as_given else encode_key(params.queue, params.key)
    return [*key, token, token, now]


def send(connection: sqlite3.Connection, params: SendParams, deliver_column: str) -> None:
    """Insert one message; AlreadyExists when the key is taken."""
    statements = queue_statements(params.queue, deliver_column)
    with map_errors():
        cursor = connection.execute(statements.send, send_row(params))
    if cursor.rowcount == 0:
        raise key_taken(params.queue, params.key)


def store_trace_context(
    connection: sqlite3.Connection, params: SendParams, deliver_column: str, context: str
) -> None:
    """Keep the sender's trace context with a message just sent (in the same transaction)."""
    statements = queue_statements(params.queue, deliver_column)
    connection.execute(statements.trace, [context, *encode_key(params.queue, params.key)])


def ack(connection: sqlite3.Connection, params: AckParams, deliver_column: str) -> None:
    """Delete one message, fenced by its lease token when one is given."""
    table = params.queue
    statements = queue_statements(table, deliver_column)
    with map_errors():
        deleted = connection.execute(statements.ack, ack_row(params)).rowcount
        key = encode_key(table, params.key)
        if (
            deleted == 0
            and params.lease_token is not None
            and connection.execute(statements.exists, key).fetchone()
        ):
            raise lease_lost(table, params.key)
    if deleted == 0 and not params.ignore_not_found:
        raise message_missing(table, params.key)


def flush(
    connection: sqlite3.Connection,
    pending: Sequence[SendParams | AckParams],
    deliver: str,
    undo: Callable[[sqlite3.Connection], None] | None = None,
) -> None:
    """Apply buffered sends and acks: one ``executemany`` per run of the same operation.

    When a row misses (a taken key, a lost lease, a missing message) the runs are undone and
    replayed row by row, which raises the precise error, or lets ``ignore_not_found`` acks
    pass. ``undo`` is given when nothing else has run in the transaction yet: it takes the
    transaction back to its start, so no savepoint is needed. Otherwise each run is wrapped
    in one; its sub-journal copies every page the run touches (~40 % of a 100-row run of
    sends here), which is why the first flush of a transaction — all of it, for a batch of
    sends or a worker's acks — goes without.
    """
    grouped = runs(pending)
    with map_errors():
        if undo is not None:
            if all(_apply_run(connection, items, deliver) for items in grouped):
                return
            undo(connection)
            apply_one_by_one(connection, pending, deliver)
            return
        for items in grouped:
            connection.execute("SAVEPOINT txqueue_many")
            if _apply_run(connection, items, deliver):
                connection.execute("RELEASE txqueue_many")
                continue
            connection.execute("ROLLBACK TO txqueue_many")
            connection.execute("RELEASE txqueue_many")
            apply_one_by_one(connection, items, deliver)


def apply_one_by_one(
    connection: sqlite3.Connection, items: Sequence[SendParams | AckParams], deliver: str
) -> None:
    """Apply sends and acks one by one: the first that misses raises its precise error.

    Outside BEGIN, a lone send or ack is a statement SQLite commits by itself (a write
    statement takes the write lock as it starts, as BEGIN IMMEDIATE would); one that misses
    writes nothing.
    """
    for item in items:
        if isinstance(item, SendParams):
            send(connection, item, deliver)
        else:
            ack(connection, item, deliver)


def in_order(
    connection: sqlite3.Connection,
    begin: bool,
    pending: list[SendParams | AckParams],
    deliver: str,
    undo: Callable[[sqlite3.Connection], None] | None,
    function: Callable[..., Any],
    args: tuple[Any, ...],
) -> Any:
    """One call on a transaction's connection: BEGIN IMMEDIATE when ``begin`` (the first
    statement of a write transaction), the buffered sends and acks, then ``function``."""
    if begin:
        with map_errors():
            begin_immediate(connection)
    if pending:
        flush(connection, pending, deliver, undo)
    return function(connection, *args)


def _apply_run(
    connection: sqlite3.Connection, items: Sequence[SendParams | AckParams], deliver: str
) -> bool:
    """One ``executemany`` for a run of sends or acks of one queue; False when a row missed."""
    statements = queue_statements(items[0].queue, deliver)
    as_given = stored_as_given(items[0].queue)
    if isinstance(items[0], SendParams):
        rows = [send_row(i, as_given) for i in items]  # type: ignore[arg-type]
        sql = statements.send
    else:
        now = now_micros(None)  # one clock reading for the run (pinned times still win)
        rows = [ack_row(i, now, as_given) for i in items]  # type: ignore[arg-type]
        sql = statements.ack
    return bool(connection.executemany(sql, rows).rowcount == len(rows))


def write(connection: sqlite3.Connection, params: WriteParams) -> None:
    """Apply one of Spanner's write mutations to already-checked rows."""
    table = params.table
    name = quote(table.name)
    columns = [table.column(c) for c in params.columns]
    column_list = ", ".join(quote(c.name) for c in columns)
    marks = ", ".join("?" * len(columns))
    rows = [[encode(c, v) for c, v in zip(columns, row)] for row in params.rows]
    key_names = {k.lower() for k in table.primary_key}
    with map_errors():
        if params.kind is WriteKind.INSERT:
            connection.executemany(f"INSERT INTO {name} ({column_list}) VALUES ({marks})", rows)
        elif params.kind is WriteKind.INSERT_OR_UPDATE:
            others = [c for c in columns if c.name.lower() not in key_names]
            keys = ", ".join(quote(k) for k in table.primary_key)
            action = (
                "DO UPDATE SET "
                + ", ".join(f"{quote(c.name)} = excluded.{quote(c.name)}" for c in others)
                if others
                else "DO NOTHING"
            )
            connection.executemany(
                f"INSERT INTO {name} ({column_list}) VALUES ({marks}) ON CONFLICT ({keys}) {action}",
                rows,
            )
        elif params.kind is WriteKind.REPLACE:
            positions = [
                params.columns.index(_declared(params.columns, k)) for k in table.primary_key
            ]
            match = " AND ".join(f"{quote(k)} = ?" for k in table.primary_key)
            for row in rows:
                connection.execute(f"DELETE FROM {name} WHERE {match}", [row[i] for i in positions])
            connection.executemany(f"INSERT INTO {name} ({column_list}) VALUES ({marks})", rows)
        else:
            _update(connection, params, rows)


def _declared(columns: Sequence[str], key: str) -> str:
    for column in columns:
        if column.lower() == key.lower():
            return column
    raise InvalidArgument(f"columns must include the primary-key column {key}")


def _update(connection: sqlite3.Connection, params: WriteParams, rows: list[list[Any]]) -> None:
    table = params.table
    key_names = {k.lower() for k in table.primary_key}
    positions = [params.columns.index(_declared(params.columns, k)) for k in table.primary_key]
    others = [i for i, c in enumerate(params.columns) if c.lower() not in key_names]
    if not others:
        return
    assignments = ", ".join(f"{quote(params.columns[i])} = ?" for i in others)
    match = " AND ".join(f"{quote(k)} = ?" for k in table.primary_key)
    sql = f"UPDATE {quote(table.name)} SET {assignments} WHERE {match}"
    for row in rows:
        count = connection.execute(
            sql, [row[i] for i in others] + [row[i] for i in positions]
        ).rowcount
        if count == 0:
            key = tuple(row[i] for i in positions)
            raise NotFound(f"table {table.name} has no row with key {key!r}")


def delete(connection: sqlite3.Connection, params: DeleteParams) -> int:
    """Delete rows by key, or every row when ``keys`` is None."""
    table = params.table
    name = quote(table.name)
    with map_errors():
        if params.keys is None:
            return connection.execute(f"DELETE FROM {name}").rowcount
        match = " AND ".join(f"{quote(k)} = ?" for k in table.primary_key)
        total = 0
        for key in params.keys:
            total += connection.execute(
                f"DELETE FROM {name} WHERE {match}", encode_key(table, key)
            ).rowcount
        return total


def execute_sql(connection: sqlite3.Connection, sql: str, params: Any) -> ResultSet:
    """Run a query in SQLite's SQL."""
    with map_errors():
        cursor = _execute(connection, sql, params if params is not None else ())
        rows = [tuple(row) for row in cursor.fetchall()]
    fields = [d[0] for d in cursor.description or ()]
    return ResultSet(fields, rows)


def execute_update(
    connection: sqlite3.Connection, sql: str, params: Any, expected_rows: int | None = None
) -> int:
    """Run a DML statement in SQLite's SQL; returns its row count.

    With ``expected_rows`` the statement runs inside a savepoint, so a different count undoes
    exactly that statement (OutOfRange) and leaves the transaction's earlier writes pending.
    """
    arguments = params if params is not None else ()
    with map_errors():
        if expected_rows is None:
            return _execute(connection, sql, arguments).rowcount
        connection.execute("SAVEPOINT txqueue_assert")
        try:
            count = _execute(connection, sql, arguments).rowcount
        except BaseException:
            connection.execute("ROLLBACK TO txqueue_assert")
            connection.execute("RELEASE txqueue_assert")
            raise
        if count != expected_rows:
            connection.execute("ROLLBACK TO txqueue_assert")
        connection.execute("RELEASE txqueue_assert")
    if count != expected_rows:
        raise OutOfRange(f"ASSERT_ROWS_MODIFIED {expected_rows} failed: {count} row(s) modified")
    return count


def _execute(connection: sqlite3.Connection, sql: str, arguments: Any) -> sqlite3.Cursor:
    """Run one statement; a translated one under the authorizer (``authorizer.py``)."""
    if not isinstance(sql, TranslatedSql):
        return connection.execute(sql, arguments)
    guard = connection.guard if isinstance(connection, Connection) else None
    return guarded(connection, guard, lambda: connection.execute(sql, arguments))


def record_once(connection: sqlite3.Connection, key: str) -> bool:
    """Record ``key`` in the idempotency ledger; False when it was recorded before."""
    with map_errors():
        cursor = connection.execute(
            "INSERT INTO txqueue_ledger (key) VALUES (?) ON CONFLICT DO NOTHING", (key,)
        )
    return bool(cursor.rowcount)


def expire_ledger(connection: sqlite3.Connection, retention: timedelta) -> int:
    """Forget ledger entries older than ``retention``."""
    cutoff = now_micros(None) - int(retention.total_seconds() * 1_000_000)
    with map_errors():
        return connection.execute(
            "DELETE FROM txqueue_ledger WHERE recorded_at < ?", (cutoff,)
        ).rowcount
