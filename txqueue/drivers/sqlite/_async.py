"""The SQLite driver for the asyncio face: blocking work runs on worker threads.

The SQL and the blocking operations live in ``engine``, ``leasing`` and ``catalog``, shared
by both.

The sync twin ``txqueue/drivers/sqlite/_sync.py`` is generated from this file
by ``tools/async_to_sync.py``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from txqueue.core.schema import (
    DELIVER_TIME,
    Catalog,
    DdlStatement,
    Dialect,
    Table,
    check_reserved_names,
)
from txqueue.drivers._async_compat import Lock, acquire, monotonic, run_blocking, wait_readable
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
    begin_sqlalchemy,
)
from txqueue.drivers.buffered import FLUSH_AT
from txqueue.drivers.sqlite import (
    actions,
    application,
    browse,
    catalog,
    dead_letters,
    engine,
    leasing,
)
from txqueue.drivers.sqlite.engine import map_errors
from txqueue.drivers.sqlite.locking import (
    begin_immediate,
    set_busy_timeout,
    without_busy_handler,
)
from txqueue.drivers.sqlite.names import DISPLAY_NAME, RESERVED_PREFIX
from txqueue.drivers.sqlite.pool import SqlitePool
from txqueue.drivers.sqlite.wakeup import WakeupSocket, notify, wakeup_directory
from txqueue.errors import Aborted, InvalidArgument
from txqueue.models import DeadLetter, LeaseRenewal, Message, ResultSet, StoredMessage

__all__ = ["AsyncSqliteDriver"]

T = TypeVar("T")

#: How often a waiting receiver checks for commits made outside txqueue (no wake-up datagram).
FALLBACK_POLL = 0.25
#: Busy timeout of a receiver's connection, in milliseconds.
RECEIVE_BUSY_MS = 100


class AsyncSqliteTransaction:
    """A transaction on a pooled connection, or inside the caller's own open transaction.

    A write transaction of our own begins (BEGIN IMMEDIATE) with its first statement, in the
    same call on the connection's thread; one that holds a single buffered send or ack at
    commit, and ran nothing before, is that one statement, committed by SQLite itself, as raw
    SQL's INSERT or DELETE is.
    """

    def __init__(
        self,
        driver: AsyncSqliteDriver,
        connection: sqlite3.Connection,
        owned: bool,
        writer: Lock | None = None,
        begun: bool = True,
    ):
        self._driver = driver
        self._connection = connection
        self._owned = owned
        self._writer = writer  # held while this write transaction is open
        self._begun = begun  # has BEGIN run (or is this the application's transaction)?
        self._sent: set[str] = set()
        self._pending: list[SendParams | AckParams] = []
        self._finished = False
        self._started = False  # has any statement run in this transaction yet?

    async def _call(self, function: Callable[..., T], *args: Any) -> T:
        """BEGIN if this is the first statement, the buffered sends and acks (in order), then
        ``function``: one call on the connection's thread."""
        pending, self._pending = self._pending, []
        # First in the transaction: undoing them is going back to its start.
        undo = None if self._started else _restart if self._owned else _back_to_start
        if pending or function is not _nothing:
            self._started = True
        begin = not self._begun and self._started
        try:
            result: T = await self._run(
                engine.in_order, begin, pending, self._driver.deliver_column, undo, function, args
            )
            return result
        finally:
            if begin:
                self._begun = self._connection.in_transaction

    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        if self._owned:
            return await run_blocking(function, self._connection, *args)
        return function(self._connection, *args)  # the caller's connection stays on its thread

    async def load_catalog(self) -> Catalog:
        return await self._run(catalog.load_catalog)

    async def application_tables(self, names: Sequence[str] | None) -> dict[str, Table]:
        return await self._run(application.application_tables, names)

    def _release_writer(self) -> None:
        if self._writer is not None:
            self._writer.release()
            self._writer = None

    async def write(self, params: WriteParams) -> None:
        await self._call(engine.write, params)

    async def delete(self, params: DeleteParams) -> int:
        return await self._call(engine.delete, params)

    async def send(self, params: SendParams) -> None:
        """Buffered, like a Spanner mutation: applied with the next statement or at commit."""
        self._pending.append(params)
        self._sent.add(params.queue.name)
        if len(self._pending) >= FLUSH_AT:
            await self._call(_nothing)

    async def store_trace_context(self, params: SendParams, context: str) -> None:
        await self._call(engine.store_trace_context, params, self._driver.deliver_column, context)

    async def ack(self, params: AckParams) -> None:
        """Buffered, like a Spanner mutation: applied with the next statement or at commit."""
        self._pending.append(params)
        if len(self._pending) >= FLUSH_AT:
            await self._call(_nothing)

    async def execute_sql(self, sql: str, params: Any = None) -> ResultSet:
        return await self._call(engine.execute_sql, sql, params)

    async def execute_update(
        self, sql: str, params: Any = None, expected_rows: int | None = None
    ) -> int:
        return await self._call(engine.execute_update, sql, params, expected_rows)

    def note_sent(self, queue: str) -> None:
        self._sent.add(queue)

    async def flush(self) -> None:
        await self._call(_nothing)

    async def record_once(self, key: str) -> bool:
        return await self._call(engine.record_once, key)

    async def commit(self) -> None:
        if self._finished:
            return
        if not self._owned:
            if self._pending:
                try:
                    await self._call(_nothing)
                except BaseException:
                    await self.rollback()
                    raise
            self._finished = True
            # The application commits its own transaction; ours was a savepoint inside it.
            with map_errors():
                self._connection.execute("RELEASE txqueue")
            return
        try:
            if not self._begun and len(self._pending) == 1:
                lone, self._pending = self._pending, []
                await self._run(
                    without_busy_handler,
                    engine.apply_one_by_one,
                    self._connection,
                    lone,
                    self._driver.deliver_column,
                )
            elif self._begun or self._pending:
                await self._call(_commit)
        except BaseException:
            await self.rollback()  # the pool rolls back what is still open
            raise
        self._finished = True
        self._driver.pool.release(self._connection)
        self._release_writer()
        if self._sent:
            notify(self._driver.wakeup_directory, self._sent)

    async def rollback(self) -> None:
        if self._finished:
            return
        self._finished = True
        self._pending = []
        if self._owned:
            self._driver.pool.release(self._connection)
            self._release_writer()
        else:
            with map_errors():
                self._connection.execute("ROLLBACK TO txqueue")
                self._connection.execute("RELEASE txqueue")


def _nothing(connection: sqlite3.Connection) -> None:
    """A no-op statement: calling it flushes the buffered operations."""


def _restart(connection: sqlite3.Connection) -> None:
    """Undo everything in our own transaction and begin it again."""
    connection.execute("ROLLBACK")
    begin_immediate(connection)


def _back_to_start(connection: sqlite3.Connection) -> None:
    """Undo everything in our savepoint inside the application's transaction (it stays open)."""
    connection.execute("ROLLBACK TO txqueue")


def _commit(connection: sqlite3.Connection) -> None:
    with map_errors():
        try:
            connection.execute("COMMIT")
        except sqlite3.Error:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise


def _begin(connection: sqlite3.Connection, read_only: bool) -> None:
    with map_errors():
        if read_only:
            connection.execute("BEGIN")
        else:
            begin_immediate(connection)


def _data_version(connection: sqlite3.Connection) -> int:
    with map_errors():
        return int(connection.execute("PRAGMA data_version").fetchone()[0])


class AsyncSqliteReceiver:
    """A receive stream's connection and wake-up socket."""

    def __init__(self, driver: AsyncSqliteDriver, queue: Table) -> None:
        self._driver = driver
        self._queue = queue
        self._socket = WakeupSocket(driver.wakeup_directory)
        self._connection = driver.pool.acquire()
        # A receive gives way quickly to a long writer (the stream tries again) instead of
        # blocking for the pool's whole busy timeout.
        set_busy_timeout(self._connection, RECEIVE_BUSY_MS)
        self._version: int | None = None

    async def receive(self, params: ReceiveParams) -> list[Message]:
        return await self._driver.lease(self._connection, params)

    async def seconds_until_ready(self, queue: Table) -> float | None:
        deliver = self._driver.deliver_column
        now = self._driver.clock()
        return await run_blocking(leasing.next_ready, self._connection, queue, deliver, now)

    async def wait(self, timeout: float) -> None:
        deadline = monotonic() + timeout
        if self._version is None:
            self._version = await run_blocking(_data_version, self._connection)
        while True:
            remaining = deadline - monotonic()
            if remaining <= 0:
                return
            if await wait_readable(self._socket.socket, min(remaining, FALLBACK_POLL)):
                if self._socket.drain(self._queue.name):
                    return
                continue
            version = await run_blocking(_data_version, self._connection)
            if version != self._version:
                self._version = version  # someone committed outside txqueue: look again
                return

    async def close(self) -> None:
        self._socket.close()
        busy_ms = int(self._driver.pool.busy_timeout.total_seconds() * 1000)
        set_busy_timeout(self._connection, busy_ms)
        self._driver.pool.release(self._connection)


class AsyncSqliteDriver:
    """SQLite behind the operation-level protocol."""

    engine = "sqlite"
    sql_engine = "sqlite"

    def __init__(
        self,
        path: str,
        synchronous: str = "FULL",
        busy_timeout: timedelta = timedelta(seconds=5),
        clock: Callable[[], Any] | None = None,
    ) -> None:
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise InvalidArgument(
                f"synchronous must be one of OFF, NORMAL, FULL, EXTRA, got {synchronous!r}"
            )
        self.pool = SqlitePool(path, synchronous.upper(), busy_timeout)
        self._writer = Lock()
        self.wakeup_directory = wakeup_directory(path)
        self.dialect = Dialect.GOOGLESQL  # until initialize
        self.deliver_column = DELIVER_TIME[self.dialect]
        self.clock: Callable[[], Any] = clock or (lambda: None)

    async def _with_connection(self, function: Callable[..., T], *args: Any) -> T:
        connection = await run_blocking(self.pool.acquire)
        try:
            return await run_blocking(function, connection, *args)
        finally:
            self.pool.release(connection)

    async def initialize(self, dialect: Dialect | None) -> Dialect:
        self.dialect = await self._with_connection(catalog.initialize, dialect)
        self.deliver_column = DELIVER_TIME[self.dialect]
        return self.dialect

    async def load_catalog(self) -> Catalog:
        return await self._with_connection(catalog.load_catalog)

    async def apply_ddl(self, statements: Sequence[DdlStatement]) -> None:
        check_reserved_names(statements, RESERVED_PREFIX, DISPLAY_NAME)
        await self._with_connection(
            catalog.apply_ddl, statements, self.deliver_column, self.dialect
        )

    async def begin(
        self, connection: Any = None, read_only: bool = False
    ) -> AsyncSqliteTransaction:
        if connection is not None:
            own = _own_connection(connection)
            with map_errors():
                if not own.in_transaction:
                    own.execute("BEGIN")  # the application's transaction; it commits it
                own.execute("SAVEPOINT txqueue")
            return AsyncSqliteTransaction(self, own, owned=False)
        # SQLite admits one writer. Queue this process's write transactions here instead of
        # in BEGIN IMMEDIATE: a transaction waiting there holds a worker thread, and enough of
        # them starve the one holding the lock of the thread it needs to commit.
        writer = None
        if not read_only:
            if not await acquire(self._writer, self.pool.busy_timeout.total_seconds()):
                raise Aborted("database is busy: another write transaction is still open")
            writer = self._writer
        try:
            pooled = await run_blocking(self.pool.acquire)
        except BaseException:
            if writer is not None:
                writer.release()
            raise
        if not read_only:  # a write transaction begins with its first statement
            return AsyncSqliteTransaction(self, pooled, owned=True, writer=writer, begun=False)
        try:
            await run_blocking(_begin, pooled, read_only)
        except BaseException:
            self.pool.release(pooled)
            raise
        return AsyncSqliteTransaction(self, pooled, owned=True)

    async def open_receiver(self, queue: Table) -> AsyncSqliteReceiver:
        return AsyncSqliteReceiver(self, queue)

    async def receive_now(self, params: ReceiveParams) -> list[Message]:
        connection = await run_blocking(self.pool.acquire)
        try:
            return await self.lease(connection, params)
        finally:
            self.pool.release(connection)

    async def lease(self, connection: sqlite3.Connection, params: ReceiveParams) -> list[Message]:
        """Receive under this process's writer lock (held by its write transactions).

        Waiting there, a receive starts the moment this process's transaction ends; waiting
        in SQLite's busy handler, it would sleep 1, 2, 5, 10 … ms between tries (a worker's
        receives and its ack commits take turns, so those sleeps were its p99 latency).
        """
        if not await acquire(self._writer, RECEIVE_BUSY_MS / 1000):
            raise Aborted("database is busy: a write transaction of this process is open")
        try:
            return await run_blocking(leasing.receive, connection, params, self.deliver_column)
        finally:
            self._writer.release()

    async def renew(self, params: RenewParams) -> list[LeaseRenewal]:
        return await self._with_connection(leasing.renew, params, self.deliver_column)

    async def release(self, params: ReleaseParams) -> int:
        released = await self._with_connection(leasing.release, params, self.deliver_column)
        if released:
            notify(self.wakeup_directory, [params.queue.name])
        return released

    async def dead_letter(self, params: DeadLetterParams) -> None:
        await self._with_connection(dead_letters.dead_letter, params, self.deliver_column)

    async def dead_letters(self, queue: Table, limit: int) -> list[DeadLetter]:
        return await self._with_connection(dead_letters.dead_letters, queue, limit)

    async def replay_dead_letters(
        self, queue: Table, keys: Sequence[tuple[Any, ...]] | None
    ) -> int:
        replayed = await self._with_connection(
            dead_letters.replay, queue, keys, self.deliver_column
        )
        if replayed:
            notify(self.wakeup_directory, [queue.name])
        return replayed

    async def purge_dead_letters(self, queue: Table, keys: Sequence[tuple[Any, ...]] | None) -> int:
        return await self._with_connection(dead_letters.purge, queue, keys)

    async def delete_messages(self, params: DeleteMessagesParams) -> int:
        return await self._with_connection(actions.delete_messages, params, self.deliver_column)

    async def make_ready(self, params: MakeReadyParams) -> int:
        changed = await self._with_connection(actions.make_ready, params, self.deliver_column)
        if changed:
            notify(self.wakeup_directory, [params.queue.name])
        return changed

    async def set_paused(self, params: PauseParams) -> None:
        await self._with_connection(catalog.set_paused, params)
        if not params.paused:
            notify(self.wakeup_directory, [params.queue.name])

    async def is_paused(self, queue: Table) -> bool:
        return await self._with_connection(catalog.is_paused, queue)

    async def queue_counts(self, queue: Table) -> Mapping[str, Any]:
        counts = await self._with_connection(
            leasing.counts, queue, self.deliver_column, self.clock()
        )
        counts["dead_letters"] = await self._with_connection(dead_letters.count, queue)
        return counts

    async def estimate_counts(self, queue: Table) -> Mapping[str, Any]:
        return await self._with_connection(
            browse.estimate_counts, queue, self.deliver_column, self.clock()
        )

    async def list_messages(self, params: BrowseParams) -> list[StoredMessage]:
        return await self._with_connection(browse.list_messages, params, self.deliver_column)

    async def expire_ledger(self, retention: timedelta) -> int:
        return await self._with_connection(engine.expire_ledger, retention)

    async def close(self) -> None:
        self.pool.close()


def _own_connection(connection: Any) -> sqlite3.Connection:
    """The sqlite3 connection behind the caller's connection (sqlite3 or SQLAlchemy)."""
    raw = connection
    if not isinstance(raw, sqlite3.Connection):
        begin_sqlalchemy(connection)
        raw = getattr(getattr(connection, "connection", None), "driver_connection", None)
    if not isinstance(raw, sqlite3.Connection):
        raise InvalidArgument(
            "connection must be a sqlite3.Connection or a SQLAlchemy Connection on SQLite, "
            f"got {type(connection).__name__}"
        )
    if raw.isolation_level is None and not raw.in_transaction:
        raise InvalidArgument(
            "connection is in autocommit mode with no open transaction: BEGIN first, so the "
            "send commits with your writes"
        )
    return raw
