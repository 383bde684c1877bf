"""The PostgreSQL driver for the asyncio face (psycopg 3 + psycopg_pool).

``txqueue/drivers/postgres/_sync.py`` is generated from this file. Connections are in
autocommit mode; transactions are explicit BEGIN/COMMIT so one leasing statement is one
short transaction. A committed send NOTIFYs the queue's name on one channel; receivers
LISTEN on their stream's connection and fall back to a slow look when no NOTIFY comes (e.g.
behind PgBouncer's transaction pooling, or for sends made with plain SQL).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool

from txqueue._async._compat import monotonic, sleep
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
from txqueue.drivers.postgres import _async_dead_letters as dead_letters
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

__all__ = ["AsyncPostgresDriver"]

T = TypeVar("T")

#: How long a waiting receiver goes without a NOTIFY before it looks again anyway.
FALLBACK_POLL = 1.0
#: How long a dropped COMMIT may stay "in progress" before its backend is terminated.
IN_PROGRESS_BOUND = 2.0
#: How long resolving a dropped COMMIT may take in all before giving up (CommitOutcomeUnknown).
RESOLVE_TIMEOUT = 60.0


class AsyncPostgresTransaction:
    """A transaction on a pooled connection, or a savepoint in the caller's own transaction."""

    def __init__(self, driver: AsyncPostgresDriver, connection: Any, owned: bool) -> None:
        self._driver = driver
        self._connection = connection
        self._owned = owned
        self._sent: set[str] = set()
        self._finished = False

    async def _execute(self, sql: str, params: Any = None) -> Any:
        with map_errors():
            return await self._connection.execute(sql, params)

    async def write(self, params: WriteParams) -> None:
        table, columns = params.table, params.columns
        schema = [table.column(c) for c in columns]
        rows = [[encode(c, v) for c, v in zip(schema, row)] for row in params.rows]
        with map_errors():
            async with self._connection.cursor() as cursor:
                if params.kind is WriteKind.INSERT:
                    await cursor.executemany(writes.insert_sql(table, columns), rows)
                elif params.kind is WriteKind.INSERT_OR_UPDATE:
                    await cursor.executemany(writes.upsert_sql(table, columns), rows)
                elif params.kind is WriteKind.REPLACE:
                    positions = writes.key_positions(table, columns)
                    keys = [[row[i] for i in positions] for row in rows]
                    await cursor.executemany(writes.delete_sql(table), keys)
                    await cursor.executemany(writes.insert_sql(table, columns), rows)
                else:
                    await self._update(cursor, table, columns, rows)

    async def _update(
        self, cursor: Any, table: Table, columns: tuple[str, ...], rows: list[list[Any]]
    ) -> None:
        sql = writes.update_sql(table, columns)
        if sql is None:
            return
        positions = writes.key_positions(table, columns)
        others = [i for i in range(len(columns)) if i not in positions]
        for row in rows:
            await cursor.execute(sql, [row[i] for i in others] + [row[i] for i in positions])
            if cursor.rowcount == 0:
                key = tuple(row[i] for i in positions)
                raise NotFound(f"table {table.name} has no row with key {key!r}")

    async def delete(self, params: DeleteParams) -> int:
        table = params.table
        if params.keys is None:
            cursor = await self._execute(f"DELETE FROM {ident(table.name)}")
            return int(cursor.rowcount)
        total = 0
        sql = writes.delete_sql(table)
        for key in params.keys:
            cursor = await self._execute(sql, _encoded_key(table, key))
            total += cursor.rowcount
        return total

    async def send(self, params: SendParams) -> None:
        table = params.queue
        statements = queue_statements(table, self._driver.deliver_column)
        values = [
            *_encoded_key(table, params.key),
            encode(table.payload_column, params.payload),
            params.deliver_time,
        ]
        cursor = await self._execute(statements.send, values)
        if cursor.rowcount == 0:
            raise AlreadyExists(f"queue {table.name} already has a message with key {params.key!r}")
        self._sent.add(table.name)

    async def ack(self, params: AckParams) -> None:
        table = params.queue
        statements = queue_statements(table, self._driver.deliver_column)
        key = _encoded_key(table, params.key)
        if params.lease_token is None:
            cursor = await self._execute(statements.ack, key)
        else:
            cursor = await self._execute(
                statements.ack_with_token, [*key, params.lease_token, params.now]
            )
            if cursor.rowcount == 0:
                exists = await self._execute(statements.exists, key)
                if await exists.fetchone() is not None:
                    raise FailedPrecondition(
                        f"lease token no longer holds the lease of {table.name} {params.key!r}"
                    )
        if cursor.rowcount == 0 and not params.ignore_not_found:
            raise NotFound(f"queue {table.name} has no message with key {params.key!r}")

    async def execute_sql(self, sql: str, params: Any = None) -> ResultSet:
        cursor = await self._execute(sql, params)
        with map_errors():
            rows = [tuple(row) for row in await cursor.fetchall()] if cursor.description else []
        return ResultSet([d.name for d in cursor.description or ()], rows)

    async def execute_update(
        self, sql: str, params: Any = None, expected_rows: int | None = None
    ) -> int:
        if expected_rows is None:
            cursor = await self._execute(sql, params)
            return int(cursor.rowcount)
        # A savepoint scopes ASSERT_ROWS_MODIFIED to this statement: PostgreSQL would
        # otherwise abort the whole transaction on an error.
        await self._execute("SAVEPOINT txqueue_assert")
        try:
            cursor = await self._execute(sql, params)
        except BaseException:
            await self._execute("ROLLBACK TO SAVEPOINT txqueue_assert")
            raise
        count = int(cursor.rowcount)
        if count != expected_rows:
            await self._execute("ROLLBACK TO SAVEPOINT txqueue_assert")
            raise OutOfRange(
                f"ASSERT_ROWS_MODIFIED {expected_rows} failed: {count} row(s) modified"
            )
        await self._execute("RELEASE SAVEPOINT txqueue_assert")
        return count

    async def record_once(self, key: str) -> bool:
        cursor = await self._execute(
            "INSERT INTO txqueue_ledger (key) VALUES (%s) ON CONFLICT DO NOTHING", [key]
        )
        return bool(cursor.rowcount)

    async def _prepare_commit(self) -> str | None:
        """NOTIFY the sent queues and learn the transaction id, in one round trip.

        The id lets a commit whose connection drops be resolved with pg_xact_status instead
        of guessed; it is None when the transaction wrote nothing.
        """
        cursor = await self._execute(
            "SELECT pg_current_xact_id_if_assigned()::text,"
            " (SELECT count(pg_notify(%s, q)) FROM unnest(%s::text[]) AS q)",
            [CHANNEL, sorted(self._sent)],
        )
        row = await cursor.fetchone()
        return None if row is None else row[0]

    async def commit(self) -> None:
        if self._finished:
            return
        self._finished = True
        if not self._owned:
            if self._sent:  # NOTIFY is delivered when the application commits
                await self._execute(
                    "SELECT count(pg_notify(%s, q)) FROM unnest(%s::text[]) AS q",
                    [CHANNEL, sorted(self._sent)],
                )
            await self._execute("RELEASE SAVEPOINT txqueue")
            return
        try:
            xid = await self._prepare_commit()
            backend = self._connection.info.backend_pid
            try:
                await self._connection.execute("COMMIT")
            except psycopg.OperationalError as error:
                if xid is None:
                    raise Unavailable(
                        f"connection lost at COMMIT of a read-only transaction: {error}"
                    ) from error
                outcome = await self._driver.resolve_commit(xid, backend)
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
            await self._driver.put(self._connection)

    async def rollback(self) -> None:
        if self._finished:
            return
        self._finished = True
        if self._owned:
            try:
                if not self._connection.closed:
                    with map_errors():
                        await self._connection.execute("ROLLBACK")
            finally:
                await self._driver.put(self._connection)
        else:
            await self._execute("ROLLBACK TO SAVEPOINT txqueue")
            await self._execute("RELEASE SAVEPOINT txqueue")


def _encoded_key(table: Table, key: tuple[Any, ...]) -> list[Any]:
    return [encode(c, v) for c, v in zip(table.key_columns, key)]


class AsyncPostgresReceiver:
    """A receive stream's connection, LISTENing on the channel for the stream's lifetime."""

    def __init__(self, driver: AsyncPostgresDriver, connection: Any, queue: Table) -> None:
        self._driver = driver
        self._connection = connection
        self._queue = queue

    async def receive(self, params: ReceiveParams) -> list[Message]:
        statements = queue_statements(params.queue, self._driver.deliver_column)
        arguments = {"now": params.now, "lease": params.lease, "limit": params.max_batch_size}
        with map_errors():
            cursor = await self._connection.execute(statements.receive, arguments)
            rows = await cursor.fetchall()
        return messages_from_rows(params.queue, rows)

    async def seconds_until_ready(self, queue: Table) -> float | None:
        statements = queue_statements(queue, self._driver.deliver_column)
        with map_errors():
            cursor = await self._connection.execute(
                statements.next_ready, {"now": self._driver.clock()}
            )
            row = await cursor.fetchone()
        return None if row is None or row[0] is None else float(row[0])

    async def wait(self, timeout: float) -> None:
        deadline = monotonic() + timeout
        while True:
            remaining = min(deadline - monotonic(), FALLBACK_POLL)
            if remaining <= 0:
                return
            with map_errors():
                async for notify in self._connection.notifies(timeout=remaining, stop_after=1):
                    if notify.payload == self._queue.name:
                        return
            if monotonic() >= deadline:
                return

    async def close(self) -> None:
        try:
            if not self._connection.closed:
                with map_errors():
                    await self._connection.execute(f"UNLISTEN {CHANNEL}")
        finally:
            await self._driver.put(self._connection)


class AsyncPostgresDriver:
    """PostgreSQL behind the operation-level protocol."""

    engine = "postgres"

    def __init__(
        self,
        conninfo: str,
        pool_size: int = 10,
        clock: Callable[[], datetime | None] | None = None,
    ) -> None:
        self._conninfo = conninfo
        self._pool = AsyncConnectionPool(
            conninfo,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            open=False,
            timeout=30.0,
        )
        self.deliver_column = DELIVER_TIME[Dialect.POSTGRESQL]
        self.clock: Callable[[], datetime | None] = clock or (lambda: None)

    async def open(self) -> None:
        with map_errors():
            await self._pool.open(wait=True, timeout=30.0)

    async def get(self) -> Any:
        with map_errors():
            return await self._pool.getconn()

    async def put(self, connection: Any) -> None:
        await self._pool.putconn(connection)

    async def _run(self, sql: str, params: Any = None, fetch: bool = True) -> list[tuple[Any, ...]]:
        connection = await self.get()
        try:
            with map_errors():
                cursor = await connection.execute(sql, params)
                return list(await cursor.fetchall()) if fetch and cursor.description else []
        finally:
            await self.put(connection)

    async def initialize(self, dialect: Dialect | None) -> Dialect:
        connection = await self.get()
        try:
            with map_errors():
                async with connection.transaction():
                    await connection.execute("SELECT pg_advisory_xact_lock(%s)", [DDL_LOCK])
                    for statement in CATALOG:
                        await connection.execute(statement)
                    cursor = await connection.execute(
                        "SELECT value FROM txqueue_settings WHERE name = 'dialect'"
                    )
                    row = await cursor.fetchone()
                    if row is None:
                        recorded = dialect or Dialect.POSTGRESQL
                        await connection.execute(
                            "INSERT INTO txqueue_settings (name, value) VALUES ('dialect', %s)",
                            [recorded.value],
                        )
                    else:
                        recorded = Dialect(row[0])
        finally:
            await self.put(connection)
        if dialect is not None and dialect is not recorded:
            raise InvalidArgument(
                f"dialect {dialect.value!r} differs from the database's recorded dialect "
                f"{recorded.value!r}"
            )
        self.deliver_column = DELIVER_TIME[recorded]
        return recorded

    async def load_catalog(self) -> tuple[dict[str, Table], dict[str, Index]]:
        rows = await self._run("SELECT kind, definition FROM txqueue_objects")
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

    async def apply_ddl(self, statements: Sequence[DdlStatement]) -> None:
        connection = await self.get()
        try:
            with map_errors():
                async with connection.transaction():
                    await connection.execute("SELECT pg_advisory_xact_lock(%s)", [DDL_LOCK])
                    tables, _ = await self.load_catalog()  # under the DDL lock: current
                    for statement in statements:
                        await self._apply(connection, statement, tables)
        finally:
            await self.put(connection)

    async def _apply(
        self, connection: Any, statement: DdlStatement, tables: dict[str, Table]
    ) -> None:
        record = "INSERT INTO txqueue_objects (name, kind, definition) VALUES (%s, %s, %s)"
        forget = "DELETE FROM txqueue_objects WHERE name = %s AND kind = %s"
        if isinstance(statement, CreateTable):
            table = statement.table
            if statement.if_not_exists and table.name.lower() in tables:
                return
            parent = tables[table.parent.lower()] if table.parent else None
            for sql in create_table(table, self.deliver_column, parent):
                await connection.execute(sql)
            kind = "queue" if table.is_queue else "table"
            await connection.execute(
                record, [table.name.lower(), kind, json.dumps(table.to_json())]
            )
            tables[table.name.lower()] = table
        elif isinstance(statement, DropTable):
            dropped = tables.pop(statement.name.lower(), None)
            if dropped is None:
                return
            await connection.execute(f"DROP TABLE {ident(dropped.name)}")
            await connection.execute(
                "DELETE FROM txqueue_dead_letters WHERE queue = %s", [dropped.name.lower()]
            )
            await connection.execute(
                forget, [dropped.name.lower(), "queue" if dropped.is_queue else "table"]
            )
        elif isinstance(statement, CreateIndex):
            index = statement.index
            cursor = await connection.execute(
                "SELECT 1 FROM txqueue_objects WHERE name = %s AND kind = 'index'",
                [index.name.lower()],
            )
            if await cursor.fetchone() is not None and statement.if_not_exists:
                return
            await connection.execute(create_index(index))
            await connection.execute(
                record, [index.name.lower(), "index", json.dumps(index.to_json())]
            )
        elif isinstance(statement, DropIndex):
            cursor = await connection.execute(
                "DELETE FROM txqueue_objects WHERE name = %s AND kind = 'index' RETURNING definition",
                [statement.name.lower()],
            )
            if await cursor.fetchone() is not None:
                await connection.execute(f"DROP INDEX {ident(statement.name)}")

    async def begin(
        self, connection: Any = None, read_only: bool = False
    ) -> AsyncPostgresTransaction:
        if connection is not None:
            own = _own_connection(connection)
            with map_errors():
                await own.execute("SAVEPOINT txqueue")
            return AsyncPostgresTransaction(self, own, owned=False)
        pooled = await self.get()
        try:
            with map_errors():
                await pooled.execute("BEGIN READ ONLY" if read_only else "BEGIN")
        except BaseException:
            await self.put(pooled)
            raise
        return AsyncPostgresTransaction(self, pooled, owned=True)

    async def open_receiver(self, queue: Table) -> AsyncPostgresReceiver:
        connection = await self.get()
        try:
            with map_errors():
                await connection.execute(f"LISTEN {CHANNEL}")
        except BaseException:
            await self.put(connection)
            raise
        return AsyncPostgresReceiver(self, connection, queue)

    async def renew(self, params: RenewParams) -> list[LeaseRenewal]:
        statements = queue_statements(params.queue, self.deliver_column)
        tokens = list(params.tokens)
        if not tokens:
            return []
        rows = await self._run(
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

    async def release(self, params: ReleaseParams) -> int:
        statements = queue_statements(params.queue, self.deliver_column)
        connection = await self.get()
        try:
            with map_errors():
                cursor = await connection.execute(
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
                    await connection.execute(
                        "SELECT pg_notify(%s, %s)", [CHANNEL, params.queue.name]
                    )
        finally:
            await self.put(connection)
        return released

    async def _with_connection(self, function: Callable[..., Awaitable[T]], *args: Any) -> T:
        connection = await self.get()
        try:
            return await function(connection, *args)
        finally:
            await self.put(connection)

    async def dead_letter(self, params: DeadLetterParams) -> None:
        await self._with_connection(dead_letters.dead_letter, params, self.deliver_column)

    async def dead_letters(self, queue: Table, limit: int) -> list[DeadLetter]:
        return await self._with_connection(dead_letters.dead_letters, queue, limit)

    async def replay_dead_letters(
        self, queue: Table, keys: Sequence[tuple[Any, ...]] | None
    ) -> int:
        return await self._with_connection(dead_letters.replay, queue, keys, self.deliver_column)

    async def purge_dead_letters(self, queue: Table, keys: Sequence[tuple[Any, ...]] | None) -> int:
        return await self._with_connection(dead_letters.purge, queue, keys)

    async def queue_counts(self, queue: Table) -> Mapping[str, Any]:
        statements = queue_statements(queue, self.deliver_column)
        rows = await self._run(statements.counts, {"now": self.clock()})
        ready, leased, scheduled, oldest = rows[0] if rows else (0, 0, 0, None)
        return {
            "ready": ready,
            "leased": leased,
            "scheduled": scheduled,
            "oldest_ready_age_seconds": oldest,
            "dead_letters": await self._with_connection(dead_letters.count, queue),
        }

    async def resolve_commit(self, xid: str, backend: int) -> str:
        """Find out whether transaction ``xid`` committed: "committed", "aborted" or "unknown".

        Asks ``pg_xact_status`` on a fresh connection. "in progress" is not "aborted": the old
        backend may still be finishing the COMMIT, so keep asking; past a bound, terminate that
        backend (its outcome is then settled) and ask again. Never guesses.
        """
        started = monotonic()
        terminated = False
        while monotonic() - started < RESOLVE_TIMEOUT:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True, connect_timeout=5
                ) as connection:
                    while monotonic() - started < RESOLVE_TIMEOUT:
                        cursor = await connection.execute("SELECT pg_xact_status(%s::xid8)", [xid])
                        row = await cursor.fetchone()
                        status = None if row is None else row[0]
                        if status in ("committed", "aborted"):
                            return str(status)
                        if status is None:
                            return "unknown"  # too old to tell (wrapped around)
                        if not terminated and monotonic() - started > IN_PROGRESS_BOUND:
                            await connection.execute("SELECT pg_terminate_backend(%s)", [backend])
                            terminated = True
                        await sleep(0.02)
            except psycopg.OperationalError:
                await sleep(0.2)  # the server may be restarting: try again until the bound
        return "unknown"

    async def expire_ledger(self, retention: timedelta) -> int:
        connection = await self.get()
        try:
            with map_errors():
                cursor = await connection.execute(
                    "DELETE FROM txqueue_ledger WHERE recorded_at < now() - %s", [retention]
                )
                return int(cursor.rowcount)
        finally:
            await self.put(connection)

    async def close(self) -> None:
        await self._pool.close()


def _own_connection(connection: Any) -> Any:
    """The psycopg connection behind the caller's connection (psycopg or SQLAlchemy)."""
    raw = connection
    if not isinstance(raw, psycopg.AsyncConnection):
        raw = getattr(getattr(connection, "connection", None), "driver_connection", None)
    if not isinstance(raw, psycopg.AsyncConnection):
        raise InvalidArgument(
            "connection must be a psycopg.AsyncConnection (or a SQLAlchemy Connection on "
            f"psycopg), got {type(connection).__name__}"
        )
    if raw.autocommit and raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        raise InvalidArgument(
            "connection is in autocommit mode with no open transaction: BEGIN first, so the "
            "send commits with your writes"
        )
    return raw
