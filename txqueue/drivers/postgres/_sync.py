# Generated from txqueue/drivers/postgres/_async.py by tools/async_to_sync.py: edit that file, then regenerate.
"""The PostgreSQL driver for the sync face (psycopg 3 + psycopg_pool).

``txqueue/drivers/postgres/_sync.py`` is generated from this file. Connections are in
autocommit mode; transactions are explicit BEGIN/COMMIT so one leasing statement is one
short transaction. A committed send NOTIFYs the queue's name on one channel; receivers
LISTEN on their stream's connection and fall back to a slow look when no NOTIFY comes (e.g.
behind PgBouncer's transaction pooling, or for sends made with plain SQL).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from txqueue._sync._compat import monotonic, sleep
from txqueue.core.leases import token_expiration_micros
from txqueue.core.schema import (
    DELIVER_TIME,
    CreateIndex,
    CreateTable,
    DdlStatement,
    Dialect,
    DropIndex,
    DropTable,
    Index,
    Table,
)
from txqueue.drivers.base import (
    AckParams,
    DeadLetterParams,
    DeleteParams,
    ReceiveParams,
    ReleaseParams,
    RenewParams,
    SendParams,
    WriteKind,
    WriteParams,
)
from txqueue.drivers.postgres import _sync_dead_letters as dead_letters
from txqueue.drivers.postgres import writes
from txqueue.drivers.postgres.codec import encode, map_errors, messages_from_rows, utc
from txqueue.drivers.postgres.statements import (
    CATALOG,
    CHANNEL,
    DDL_LOCK,
    create_index,
    create_table,
    ident,
    queue_statements,
)
from txqueue.errors import (
    Aborted,
    AlreadyExists,
    CommitOutcomeUnknown,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    Unavailable,
)
from txqueue.models import DeadLetter, LeaseRenewal, Message, ResultSet

__all__ = ["PostgresDriver"]

T = TypeVar("T")

#: How long a waiting receiver goes without a NOTIFY before it looks again anyway.
FALLBACK_POLL = 1.0
#: How long a dropped COMMIT may stay "in progress" before its backend is terminated.
IN_PROGRESS_BOUND = 2.0
#: How long resolving a dropped COMMIT may take in all before giving up (CommitOutcomeUnknown).
RESOLVE_TIMEOUT = 60.0


class PostgresTransaction:
    """A transaction on a pooled connection, or a savepoint in the caller's own transaction."""

    def __init__(self, driver: PostgresDriver, connection: Any, owned: bool) -> None:
        self._driver = driver
        self._connection = connection
        self._owned = owned
        self._sent: set[str] = set()
        self._finished = False

    def _execute(self, sql: str, params: Any = None) -> Any:
        with map_errors():
            return self._connection.execute(sql, params)

    def write(self, params: WriteParams) -> None:
        table, columns = params.table, params.columns
        schema = [table.column(c) for c in columns]
        rows = [[encode(c, v) for c, v in zip(schema, row)] for row in params.rows]
        with map_errors():
            with self._connection.cursor() as cursor:
                if params.kind is WriteKind.INSERT:
                    cursor.executemany(writes.insert_sql(table, columns), rows)
                elif params.kind is WriteKind.INSERT_OR_UPDATE:
                    cursor.executemany(writes.upsert_sql(table, columns), rows)
                elif params.kind is WriteKind.REPLACE:
                    positions = writes.key_positions(table, columns)
                    keys = [[row[i] for i in positions] for row in rows]
                    cursor.executemany(writes.delete_sql(table), keys)
                    cursor.executemany(writes.insert_sql(table, columns), rows)
                else:
                    self._update(cursor, table, columns, rows)

    def _update(
        self, cursor: Any, table: Table, columns: tuple[str, ...], rows: list[list[Any]]
    ) -> None:
        sql = writes.update_sql(table, columns)
        if sql is None:
            return
        positions = writes.key_positions(table, columns)
        others = [i for i in range(len(columns)) if i not in positions]
        for row in rows:
            cursor.execute(sql, [row[i] for i in others] + [row[i] for i in positions])
            if cursor.rowcount == 0:
                key = tuple(row[i] for i in positions)
                raise NotFound(f"table {table.name} has no row with key {key!r}")

    def delete(self, params: DeleteParams) -> int:
        table = params.table
        if params.keys is None:
            cursor = self._execute(f"DELETE FROM {ident(table.name)}")
            return int(cursor.rowcount)
        total = 0
        sql = writes.delete_sql(table)
        for key in params.keys:
            cursor = self._execute(sql, _encoded_key(table, key))
            total += cursor.rowcount
        return total

    def send(self, params: SendParams) -> None:
        table = params.queue
        statements = queue_statements(table, self._driver.deliver_column)
        values = [
            *_encoded_key(table, params.key),
            encode(table.payload_column, params.payload),
            params.deliver_time,
        ]
        cursor = self._execute(statements.send, values)
        if cursor.rowcount == 0:
            raise AlreadyExists(f"queue {table.name} already has a message with key {params.key!r}")
        self._sent.add(table.name)

    def ack(self, params: AckParams) -> None:
        table = params.queue
        statements = queue_statements(table, self._driver.deliver_column)
        key = _encoded_key(table, params.key)
        if params.lease_token is None:
            cursor = self._execute(statements.ack, key)
        else:
            cursor = self._execute(
                statements.ack_with_token, [*key, params.lease_token, params.now]
            )
            if cursor.rowcount == 0:
                exists = self._execute(statements.exists, key)
                if exists.fetchone() is not None:
                    raise FailedPrecondition(
                        f"lease token no longer holds the lease of {table.name} {params.key!r}"
                    )
        if cursor.rowcount == 0 and not params.ignore_not_found:
            raise NotFound(f"queue {table.name} has no message with key {params.key!r}")

    def execute_sql(self, sql: str, params: Any = None) -> ResultSet:
        cursor = self._execute(sql, params)
        with map_errors():
            rows = [tuple(row) for row in cursor.fetchall()] if cursor.description else []
        return ResultSet([d.name for d in cursor.description or ()], rows)

    def execute_update(self, sql: str, params: Any = None, expected_rows: int | None = None) -> int:
        if expected_rows is None:
            cursor = self._execute(sql, params)
            return int(cursor.rowcount)
        # A savepoint scopes ASSERT_ROWS_MODIFIED to this statement: PostgreSQL would
        # otherwise abort the whole transaction on an error.
        self._execute("SAVEPOINT txqueue_assert")
        try:
            cursor = self._execute(sql, params)
        except BaseException:
            self._execute("ROLLBACK TO SAVEPOINT txqueue_assert")
            raise
        count = int(cursor.rowcount)
        if count != expected_rows:
            self._execute("ROLLBACK TO SAVEPOINT txqueue_assert")
            raise OutOfRange(
                f"ASSERT_ROWS_MODIFIED {expected_rows} failed: {count} row(s) modified"
            )
        self._execute("RELEASE SAVEPOINT txqueue_assert")
        return count

    def record_once(self, key: str) -> bool:
        cursor = self._execute(
            "INSERT INTO txqueue_ledger (key) VALUES (%s) ON CONFLICT DO NOTHING", [key]
        )
        return bool(cursor.rowcount)

    def _prepare_commit(self) -> str | None:
        """NOTIFY the sent queues and learn the transaction id, in one round trip.

        The id lets a commit whose connection drops be resolved with pg_xact_status instead
        of guessed; it is None when the transaction wrote nothing.
        """
        cursor = self._execute(
            "SELECT pg_current_xact_id_if_assigned()::text,"
            " (SELECT count(pg_notify(%s, q)) FROM unnest(%s::text[]) AS q)",
            [CHANNEL, sorted(self._sent)],
        )
        row = cursor.fetchone()
        return None if row is None else row[0]

    def commit(self) -> None:
        if self._finished:
            return
        self._finished = True
        if not self._owned:
            if self._sent:  # NOTIFY is delivered when the application commits
                self._execute(
                    "SELECT count(pg_notify(%s, q)) FROM unnest(%s::text[]) AS q",
                    [CHANNEL, sorted(self._sent)],
                )
            self._execute("RELEASE SAVEPOINT txqueue")
            return
        try:
            xid = self._prepare_commit()
            backend = self._connection.info.backend_pid
            try:
                self._connection.execute("COMMIT")
            except psycopg.OperationalError as error:
                if xid is None:
                    raise Unavailable(
                        f"connection lost at COMMIT of a read-only transaction: {error}"
                    ) from error
                outcome = self._driver.resolve_commit(xid, backend)
                if outcome == "committed":
                    return
                if outcome == "aborted":
                    raise Aborted(
                        f"the connection dropped at COMMIT and the transaction was rolled back: {error}"
                    ) from error
                raise CommitOutcomeUnknown(
                    f"the connection dropped at COMMIT of transaction {xid} and its outcome "
                    f"could not be determined: {error}"
                ) from error
            except psycopg.Error as error:
                with map_errors():
                    raise error
        finally:
            self._driver.put(self._connection)

    def rollback(self) -> None:
        if self._finished:
            return
        self._finished = True
        if self._owned:
            try:
                if not self._connection.closed:
                    with map_errors():
                        self._connection.execute("ROLLBACK")
            finally:
                self._driver.put(self._connection)
        else:
            self._execute("ROLLBACK TO SAVEPOINT txqueue")
            self._execute("RELEASE SAVEPOINT txqueue")


def _encoded_key(table: Table, key: tuple[Any, ...]) -> list[Any]:
    return [encode(c, v) for c, v in zip(table.key_columns, key)]


class PostgresReceiver:
    """A receive stream's connection, LISTENing on the channel for the stream's lifetime."""

    def __init__(self, driver: PostgresDriver, connection: Any, queue: Table) -> None:
        self._driver = driver
        self._connection = connection
        self._queue = queue

    def receive(self, params: ReceiveParams) -> list[Message]:
        statements = queue_statements(params.queue, self._driver.deliver_column)
        arguments = {"now": params.now, "lease": params.lease, "limit": params.max_batch_size}
        with map_errors():
            cursor = self._connection.execute(statements.receive, arguments)
            rows = cursor.fetchall()
        return messages_from_rows(params.queue, rows)

    def seconds_until_ready(self, queue: Table) -> float | None:
        statements = queue_statements(queue, self._driver.deliver_column)
        with map_errors():
            cursor = self._connection.execute(statements.next_ready, {"now": self._driver.clock()})
            row = cursor.fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def wait(self, timeout: float) -> None:
        deadline = monotonic() + timeout
        while True:
            remaining = min(deadline - monotonic(), FALLBACK_POLL)
            if remaining <= 0:
                return
            with map_errors():
                for notify in self._connection.notifies(timeout=remaining, stop_after=1):
                    if notify.payload == self._queue.name:
                        return
            if monotonic() >= deadline:
                return

    def close(self) -> None:
        try:
            if not self._connection.closed:
                with map_errors():
                    self._connection.execute(f"UNLISTEN {CHANNEL}")
        finally:
            self._driver.put(self._connection)


class PostgresDriver:
    """PostgreSQL behind the operation-level protocol."""

    engine = "postgres"

    def __init__(
        self,
        conninfo: str,
        pool_size: int = 10,
        clock: Callable[[], datetime | None] | None = None,
    ) -> None:
        self._conninfo = conninfo
        self._pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            open=False,
            timeout=30.0,
        )
        self.deliver_column = DELIVER_TIME[Dialect.POSTGRESQL]
        self.clock: Callable[[], datetime | None] = clock or (lambda: None)

    def open(self) -> None:
        with map_errors():
            self._pool.open(wait=True, timeout=30.0)

    def get(self) -> Any:
        with map_errors():
            return self._pool.getconn()

    def put(self, connection: Any) -> None:
        self._pool.putconn(connection)

    def _run(self, sql: str, params: Any = None, fetch: bool = True) -> list[tuple[Any, ...]]:
        connection = self.get()
        try:
            with map_errors():
                cursor = connection.execute(sql, params)
                return list(cursor.fetchall()) if fetch and cursor.description else []
        finally:
            self.put(connection)

    def initialize(self, dialect: Dialect | None) -> Dialect:
        connection = self.get()
        try:
            with map_errors():
                with connection.transaction():
                    connection.execute("SELECT pg_advisory_xact_lock(%s)", [DDL_LOCK])
                    for statement in CATALOG:
                        connection.execute(statement)
                    cursor = connection.execute(
                        "SELECT value FROM txqueue_settings WHERE name = 'dialect'"
                    )
                    row = cursor.fetchone()
                    if row is None:
                        recorded = dialect or Dialect.POSTGRESQL
                        connection.execute(
                            "INSERT INTO txqueue_settings (name, value) VALUES ('dialect', %s)",
                            [recorded.value],
                        )
                    else:
                        recorded = Dialect(row[0])
        finally:
            self.put(connection)
        if dialect is not None and dialect is not recorded:
            raise InvalidArgument(
                f"dialect {dialect.value!r} differs from the database's recorded dialect "
                f"{recorded.value!r}"
            )
        self.deliver_column = DELIVER_TIME[recorded]
        return recorded

    def load_catalog(self) -> tuple[dict[str, Table], dict[str, Index]]:
        rows = self._run("SELECT kind, definition FROM txqueue_objects")
        tables: dict[str, Table] = {}
        indexes: dict[str, Index] = {}
        for kind, definition in rows:
            data = json.loads(definition)
            if kind == "index":
                index = Index.from_json(data)
                indexes[index.name.lower()] = index
            else:
                table = Table.from_json(data)
                tables[table.name.lower()] = table
        return tables, indexes

    def apply_ddl(self, statements: Sequence[DdlStatement]) -> None:
        connection = self.get()
        try:
            with map_errors():
                with connection.transaction():
                    connection.execute("SELECT pg_advisory_xact_lock(%s)", [DDL_LOCK])
                    tables, _ = self.load_catalog()  # under the DDL lock: current
                    for statement in statements:
                        self._apply(connection, statement, tables)
        finally:
            self.put(connection)

    def _apply(self, connection: Any, statement: DdlStatement, tables: dict[str, Table]) -> None:
        record = "INSERT INTO txqueue_objects (name, kind, definition) VALUES (%s, %s, %s)"
        forget = "DELETE FROM txqueue_objects WHERE name = %s AND kind = %s"
        if isinstance(statement, CreateTable):
            table = statement.table
            if statement.if_not_exists and table.name.lower() in tables:
                return
            parent = tables[table.parent.lower()] if table.parent else None
            for sql in create_table(table, self.deliver_column, parent):
                connection.execute(sql)
            kind = "queue" if table.is_queue else "table"
            connection.execute(record, [table.name.lower(), kind, json.dumps(table.to_json())])
            tables[table.name.lower()] = table
        elif isinstance(statement, DropTable):
            dropped = tables.pop(statement.name.lower(), None)
            if dropped is None:
                return
            connection.execute(f"DROP TABLE {ident(dropped.name)}")
            connection.execute(
                "DELETE FROM txqueue_dead_letters WHERE queue = %s", [dropped.name.lower()]
            )
            connection.execute(
                forget, [dropped.name.lower(), "queue" if dropped.is_queue else "table"]
            )
        elif isinstance(statement, CreateIndex):
            index = statement.index
            cursor = connection.execute(
                "SELECT 1 FROM txqueue_objects WHERE name = %s AND kind = 'index'",
                [index.name.lower()],
            )
            if cursor.fetchone() is not None and statement.if_not_exists:
                return
            connection.execute(create_index(index))
            connection.execute(record, [index.name.lower(), "index", json.dumps(index.to_json())])
        elif isinstance(statement, DropIndex):
            cursor = connection.execute(
                "DELETE FROM txqueue_objects WHERE name = %s AND kind = 'index' RETURNING definition",
                [statement.name.lower()],
            )
            if cursor.fetchone() is not None:
                connection.execute(f"DROP INDEX {ident(statement.name)}")

    def begin(self, connection: Any = None, read_only: bool = False) -> PostgresTransaction:
        if connection is not None:
            own = _own_connection(connection)
            with map_errors():
                own.execute("SAVEPOINT txqueue")
            return PostgresTransaction(self, own, owned=False)
        pooled = self.get()
        try:
            with map_errors():
                pooled.execute("BEGIN READ ONLY" if read_only else "BEGIN")
        except BaseException:
            self.put(pooled)
            raise
        return PostgresTransaction(self, pooled, owned=True)

    def open_receiver(self, queue: Table) -> PostgresReceiver:
        connection = self.get()
        try:
            with map_errors():
                connection.execute(f"LISTEN {CHANNEL}")
        except BaseException:
            self.put(connection)
            raise
        return PostgresReceiver(self, connection, queue)

    def renew(self, params: RenewParams) -> list[LeaseRenewal]:
        statements = queue_statements(params.queue, self.deliver_column)
        tokens = list(params.tokens)
        if not tokens:
            return []
        rows = self._run(
            statements.renew, {"now": params.now, "tokens": tokens, "extension": params.extension}
        )
        by_token = {row[0]: row for row in rows}
        renewals = []
        for token in dict.fromkeys(tokens):
            carried = token_expiration_micros(token)
            row = by_token.get(token)
            if carried is None or row is None or carried <= row[3]:
                continue  # unparseable or expired: no row
            new_token, expiration = row[1], row[2]
            renewals.append(
                LeaseRenewal(token, new_token, None if expiration is None else utc(expiration))
            )
        return renewals

    def release(self, params: ReleaseParams) -> int:
        statements = queue_statements(params.queue, self.deliver_column)
        connection = self.get()
        try:
            with map_errors():
                cursor = connection.execute(
                    statements.release,
                    {
                        "now": params.now,
                        "tokens": list(params.tokens),
                        "delay": params.delay,
                        "error": params.error,
                    },
                )
                released = int(cursor.rowcount)
                if released:
                    connection.execute("SELECT pg_notify(%s, %s)", [CHANNEL, params.queue.name])
        finally:
            self.put(connection)
        return released

    def _with_connection(self, function: Callable[..., T], *args: Any) -> T:
        connection = self.get()
        try:
            return function(connection, *args)
        finally:
            self.put(connection)

    def dead_letter(self, params: DeadLetterParams) -> None:
        self._with_connection(dead_letters.dead_letter, params, self.deliver_column)

    def dead_letters(self, queue: Table, limit: int) -> list[DeadLetter]:
        return self._with_connection(dead_letters.dead_letters, queue, limit)

    def replay_dead_letters(self, queue: Table, keys: Sequence[tuple[Any, ...]] | None) -> int:
        return self._with_connection(dead_letters.replay, queue, keys, self.deliver_column)

    def purge_dead_letters(self, queue: Table, keys: Sequence[tuple[Any, ...]] | None) -> int:
        return self._with_connection(dead_letters.purge, queue, keys)

    def queue_counts(self, queue: Table) -> Mapping[str, Any]:
        statements = queue_statements(queue, self.deliver_column)
        rows = self._run(statements.counts, {"now": self.clock()})
        ready, leased, scheduled, oldest = rows[0] if rows else (0, 0, 0, None)
        return {
            "ready": ready,
            "leased": leased,
            "scheduled": scheduled,
            "oldest_ready_age_seconds": oldest,
            "dead_letters": self._with_connection(dead_letters.count, queue),
        }

    def resolve_commit(self, xid: str, backend: int) -> str:
        """Find out whether transaction ``xid`` committed: "committed", "aborted" or "unknown".

        Asks ``pg_xact_status`` on a fresh connection. "in progress" is not "aborted": the old
        backend may still be finishing the COMMIT, so keep asking; past a bound, terminate that
        backend (its outcome is then settled) and ask again. Never guesses.
        """
        started = monotonic()
        terminated = False
        while monotonic() - started < RESOLVE_TIMEOUT:
            try:
                with psycopg.Connection.connect(
                    self._conninfo, autocommit=True, connect_timeout=5
                ) as connection:
                    while monotonic() - started < RESOLVE_TIMEOUT:
                        cursor = connection.execute("SELECT pg_xact_status(%s::xid8)", [xid])
                        row = cursor.fetchone()
                        status = None if row is None else row[0]
                        if status in ("committed", "aborted"):
                            return str(status)
                        if status is None:
                            return "unknown"  # too old to tell (wrapped around)
                        if not terminated and monotonic() - started > IN_PROGRESS_BOUND:
                            connection.execute("SELECT pg_terminate_backend(%s)", [backend])
                            terminated = True
                        sleep(0.02)
            except psycopg.OperationalError:
                sleep(0.2)  # the server may be restarting: try again until the bound
        return "unknown"

    def expire_ledger(self, retention: timedelta) -> int:
        connection = self.get()
        try:
            with map_errors():
                cursor = connection.execute(
                    "DELETE FROM txqueue_ledger WHERE recorded_at < now() - %s", [retention]
                )
                return int(cursor.rowcount)
        finally:
            self.put(connection)

    def close(self) -> None:
        self._pool.close()


def _own_connection(connection: Any) -> Any:
    """The psycopg connection behind the caller's connection (psycopg or SQLAlchemy)."""
    raw = connection
    if not isinstance(raw, psycopg.Connection):
        raw = getattr(getattr(connection, "connection", None), "driver_connection", None)
    if not isinstance(raw, psycopg.Connection):
        raise InvalidArgument(
            "connection must be a psycopg.Connection (or a SQLAlchemy Connection on "
            f"psycopg), got {type(connection).__name__}"
        )
    if raw.autocommit and raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        raise InvalidArgument(
            "connection is in autocommit mode with no open transaction: BEGIN first, so the "
            "send commits with your writes"
        )
    return raw
