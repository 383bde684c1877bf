# Generated from txqueue/drivers/postgres/_async.py by tools/async_to_sync.py; do not edit.
"""The PostgreSQL driver for the sync face (psycopg 3 + psycopg_pool).

Connections are in autocommit mode; transactions are explicit BEGIN/COMMIT so one leasing
statement is one short transaction. A committed send NOTIFYs the queue's name on one channel
(after COMMIT, from the driver's ``Notifier`` thread, off the commit's path); receivers LISTEN
on their stream's connection and fall back to a slow look when no NOTIFY comes (e.g. behind
PgBouncer's transaction pooling, or for sends made with plain SQL).

Generated from ``txqueue/drivers/postgres/_async.py`` by ``tools/async_to_sync.py``; do not edit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from txqueue.core.leases import token_expiration_micros
from txqueue.core.schema import (
    DELIVER_TIME,
    AddColumn,
    Catalog,
    CreateIndex,
    CreateTable,
    DdlStatement,
    Dialect,
    DropIndex,
    DropTable,
    Table,
    check_dialect,
    check_reserved_names,
)
from txqueue.drivers._sync_compat import monotonic, run_blocking, sleep
from txqueue.drivers.base import (
    BrowseParams,
    DeadLetterParams,
    DeleteMessagesParams,
    MakeReadyParams,
    PauseParams,
    ReceiveParams,
    ReleaseParams,
    RenewParams,
    begin_sqlalchemy,
)
from txqueue.drivers.postgres import _sync_actions as actions
from txqueue.drivers.postgres import _sync_browse as browse
from txqueue.drivers.postgres import _sync_dead_letters as dead_letters
from txqueue.drivers.postgres import _sync_server as server
from txqueue.drivers.postgres._sync_transaction import PostgresTransaction, read_catalog
from txqueue.drivers.postgres.codec import (
    map_errors,
    messages_from_rows,
    stored_token,
    token_location,
    utc,
)
from txqueue.drivers.postgres.connections import PooledConnection, check_encoding
from txqueue.drivers.postgres.floors import ReceiveFloors
from txqueue.drivers.postgres.names import DISPLAY_NAME, RESERVED_PREFIX
from txqueue.drivers.postgres.notifier import Notifier
from txqueue.drivers.postgres.statements import (
    ADD_TRACE_COLUMNS,
    CATALOG,
    CHANNEL,
    DDL_LOCK,
    FORGET_COMMITS,
    PAUSE,
    PAUSED,
    RECORD_DIALECT,
    RECORDED_DIALECT,
    RESUME,
    STATISTICS_STALE,
    add_column,
    create_index,
    create_table,
    ident,
    queue_statements,
)
from txqueue.drivers.postgres.statistics import StatisticsWatch
from txqueue.errors import InvalidArgument, TxqueueError
from txqueue.models import DeadLetter, LeaseRenewal, Message, StoredMessage

__all__ = ["PostgresDriver"]

T = TypeVar("T")
#: Rows of one statement, as psycopg fetches them.
Rows = list[tuple[Any, ...]]

#: How long opening a database waits for the server (a refusal for good fails at once).
OPEN_TIMEOUT = 30.0
#: How long a waiting receiver goes without a NOTIFY before it looks again anyway.
FALLBACK_POLL = 1.0
#: How long a dropped COMMIT may stay "in progress" before its backend is terminated.
IN_PROGRESS_BOUND = 2.0
#: How long resolving a dropped COMMIT may take in all before giving up (CommitOutcomeUnknown).
RESOLVE_TIMEOUT = 60.0
#: How long the resolver waits for its own synchronous commit before it asks again, on a
#: fresh connection (a failover may have moved the primary meanwhile).
BARRIER_TIMEOUT = 5.0


class PostgresReceiver:
    """A receive stream's connection, LISTENing on the channel for the stream's lifetime."""

    def __init__(self, driver: PostgresDriver, connection: Any, queue: Table) -> None:
        self._driver = driver
        self._connection = connection
        self._queue = queue

    def receive(self, params: ReceiveParams) -> list[Message]:
        # A stream looks again itself: after a short batch its next receive starts from the
        # oldest (the floor is gone), at once or once ``seconds_until_ready`` says so.
        return self._driver.lease(self._fetch, params, look_again=False)

    def _fetch(self, sql: str, arguments: Any) -> Rows:
        with map_errors():
            cursor = self._connection.execute(sql, arguments, binary=True)
            return _rows(cursor)

    def seconds_until_ready(self, queue: Table) -> float | None:
        statements = queue_statements(queue, self._driver.deliver_column)
        with map_errors():
            cursor = self._connection.execute_kept(
                statements.next_ready, {"now": self._driver.clock()}
            )
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
    sql_engine = "postgres"

    def __init__(
        self,
        conninfo: str,
        pool_size: int = 10,
        clock: Callable[[], datetime | None] | None = None,
    ) -> None:
        self._conninfo = conninfo
        self._pool = ConnectionPool(
            conninfo,
            connection_class=PooledConnection,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            configure=self._configure,
            open=False,
            timeout=30.0,
            check=server.check_lent,
        )
        self.dialect = Dialect.POSTGRESQL  # until initialize
        self.deliver_column = DELIVER_TIME[self.dialect]
        self.clock: Callable[[], datetime | None] = clock or (lambda: None)
        self._notifier = Notifier(conninfo)
        self.floors = ReceiveFloors()
        self.statistics = StatisticsWatch()

    def _configure(self, connection: Any) -> None:
        """Every pooled connection reads and writes timestamps in UTC (as Spanner does) and
        learns its commit slot: its backend's pid and start time, unique on the server."""
        cursor = connection.execute(
            "SET TIME ZONE 'UTC';"
            " SELECT pid || '@' || extract(epoch FROM backend_start) FROM pg_stat_activity"
            " WHERE pid = pg_backend_pid()"
        )
        cursor.nextset()
        row = cursor.fetchone()
        connection.commit_slot = str(row[0]) if row else f"{connection.info.backend_pid}@"

    def notify(self, queues: Iterable[str]) -> None:
        """Wake receivers of ``queues``: their committed sends are there (no I/O here). This
        process's next receives of them start from the oldest (its sends may lie below a
        floor)."""
        queues = list(queues)
        self.floors.forget(queues)
        self._notifier.owe(queues)

    def open(self) -> None:
        """Open the pool, waiting up to ``OPEN_TIMEOUT`` for its first connection: a server
        that is down or starting up may come up meanwhile. A refusal that waiting cannot
        mend fails at once: one direct connect, made while the pool makes its first, tells
        (the pool would retry it until its timeout, and report only that it timed out)."""
        started = monotonic()
        with map_errors():
            server.wait_for_server(self._conninfo, OPEN_TIMEOUT)
            self._pool.open(wait=False)
            try:
                self._pool.wait(timeout=max(OPEN_TIMEOUT - (monotonic() - started), 1.0))
            except BaseException:
                self._pool.close()  # its workers would go on trying
                raise

    def get(self) -> Any:
        with map_errors():
            return self._pool.getconn()

    def put(self, connection: Any) -> None:
        self._pool.putconn(connection)

    def _run(
        self, sql: str, params: Any = None, fetch: bool = True, binary: bool = False
    ) -> list[tuple[Any, ...]]:
        connection = self.get()
        try:
            with map_errors():
                cursor = connection.execute(sql, params, binary=binary)
                return _rows(cursor) if fetch else []
        finally:
            self.put(connection)

    def query(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Rows of one statement run on a pooled connection, outside any transaction."""
        return self._run(sql, params)

    def initialize(self, dialect: Dialect | None) -> Dialect:
        connection = self.get()
        try:
            check_encoding(connection)
            with map_errors():
                with connection.transaction():
                    connection.execute("SELECT pg_advisory_xact_lock(%s)", [DDL_LOCK])
                    for statement in CATALOG:
                        connection.execute(statement)
                    connection.execute(FORGET_COMMITS)
                    connection.execute(ADD_TRACE_COLUMNS)
                    recorded = _recorded_dialect(connection)
        finally:
            self.put(connection)
        if recorded is not None:
            check_dialect(dialect, recorded)
        self.dialect = recorded or dialect or Dialect.POSTGRESQL  # recorded by the first DDL
        self.deliver_column = DELIVER_TIME[self.dialect]
        return self.dialect

    def load_catalog(self) -> Catalog:
        return self._with_connection(read_catalog)

    def apply_ddl(self, statements: Sequence[DdlStatement]) -> None:
        check_reserved_names(statements, RESERVED_PREFIX, DISPLAY_NAME)
        connection = self.get()
        try:
            with map_errors():
                with connection.transaction():
                    connection.execute("SELECT pg_advisory_xact_lock(%s)", [DDL_LOCK])
                    # Under the DDL lock, on the same connection.
                    recorded = _recorded_dialect(connection)
                    if recorded is None:
                        connection.execute(RECORD_DIALECT, [self.dialect.value])
                    else:
                        check_dialect(self.dialect, recorded)
                    tables, _ = read_catalog(connection)
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
            for forgotten in ("txqueue_dead_letters", "txqueue_paused"):
                connection.execute(
                    f"DELETE FROM {forgotten} WHERE queue = %s", [dropped.name.lower()]
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
        elif isinstance(statement, AddColumn):
            found = tables.get(statement.table.lower())
            if found is not None and not found.has_column(statement.column.name):
                connection.execute(add_column(found, statement.column))
                widened = tables[found.name.lower()] = found.with_column(statement.column)
                connection.execute(
                    "UPDATE txqueue_objects SET definition = %s WHERE name = %s",
                    [json.dumps(widened.to_json()), widened.name.lower()],
                )
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
        # BEGIN is sent lazily, in one pipeline with the first statement.
        return PostgresTransaction(self, self.get(), owned=True, read_only=read_only)

    def open_receiver(self, queue: Table) -> PostgresReceiver:
        connection = self.get()
        try:
            with map_errors():
                connection.execute(f"LISTEN {CHANNEL}")
        except BaseException:
            self.put(connection)
            raise
        return PostgresReceiver(self, connection, queue)

    def receive_now(self, params: ReceiveParams) -> list[Message]:
        return self.lease(self._fetch, params, look_again=True)

    def _fetch(self, sql: str, arguments: Any) -> Rows:
        return self._run(sql, arguments, binary=True)

    def lease(
        self,
        fetch: Callable[[str, Any], Rows],
        params: ReceiveParams,
        look_again: bool,
    ) -> list[Message]:
        """Lease up to ``max_batch_size`` ready messages, oldest first, through ``fetch``.

        The scan starts at the queue's floor when it has one (``floors``). A batch that comes
        back short from there drops the floor and, with ``look_again``, looks from the oldest
        for the rest at once: a message ready below the floor is not left behind while there
        is room for it. First, when earlier receives made it due, the queue's planner
        statistics are looked at, and mended if they were taken while it was empty
        (``statistics``).
        """
        queue, limit = params.queue, params.max_batch_size
        fewest = self.statistics.due(queue.name)
        if fewest is not None:
            self._refresh_statistics(fetch, queue, fewest)
        statements = queue_statements(queue, self.deliver_column)
        arguments: dict[str, Any] = {"now": params.now, "lease": params.lease, "limit": limit}
        floor = self.floors.floor(queue.name)
        if floor is None:
            messages = messages_from_rows(queue, fetch(statements.receive, arguments))
        else:
            rows = fetch(statements.receive_from, {**arguments, "floor": floor})
            messages = messages_from_rows(queue, rows)
            if look_again and len(messages) < limit:
                arguments["limit"] = limit - len(messages)
                try:
                    rows = fetch(statements.receive, arguments)
                except TxqueueError:  # the batch leased above stands; a retry meets the error
                    rows = []
                messages += messages_from_rows(queue, rows)
                messages.sort(key=lambda message: message.deliver_time)
                floor = None
        self.floors.received(queue.name, messages, limit, floor)
        self.statistics.received(queue.name, len(messages), limit)
        return messages

    def _refresh_statistics(
        self, fetch: Callable[[str, Any], Rows], queue: Table, fewest: float
    ) -> None:
        """ANALYZE ``queue`` when the planner takes it for holding fewer than ``fewest``
        rows, as receives just proved it does (``statistics``). Best effort: an error (a
        ``statement_timeout``, an engine without ``pg_class``) quiets the queue as an
        ANALYZE in vain does, and a lost connection is the receive's to meet."""

        def stale() -> bool:
            rows = fetch(STATISTICS_STALE, [fewest, ident(queue.name)])
            return bool(rows and rows[0][0])

        try:
            if stale():
                fetch(queue_statements(queue, self.deliver_column).analyze, None)
                if stale():
                    self.statistics.in_vain(queue.name)
        except TxqueueError:
            self.statistics.in_vain(queue.name)

    def renew(self, params: RenewParams) -> list[LeaseRenewal]:
        statements = queue_statements(params.queue, self.deliver_column)
        tokens = list(params.tokens)
        if not tokens:
            return []
        rows = self._run(
            statements.renew,
            {
                "now": params.now,
                "tokens": tokens,
                "stored": [stored_token(t) for t in tokens],
                "locations": [token_location(t) for t in tokens],
                "extension": params.extension,
            },
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
        if params.error is not None:  # a failed attempt: its message's history grows
            released = self._with_connection(
                dead_letters.release_failed, params, self.deliver_column
            )
            if released:
                self.notify([params.queue.name])
            return released
        statements = queue_statements(params.queue, self.deliver_column)
        connection = self.get()
        try:
            with map_errors():
                cursor = connection.execute(
                    statements.release,
                    {
                        "now": params.now,
                        "stored": [stored_token(t) for t in params.tokens],
                        "locations": [token_location(t) for t in params.tokens],
                        "delay": params.delay,
                        "error": params.error,
                    },
                )
                released = int(cursor.rowcount)
        finally:
            self.put(connection)
        if released:
            self.notify([params.queue.name])
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
        replayed = self._with_connection(dead_letters.replay, queue, keys, self.deliver_column)
        if replayed:
            self.notify([queue.name])
        return replayed

    def purge_dead_letters(self, queue: Table, keys: Sequence[tuple[Any, ...]] | None) -> int:
        return self._with_connection(dead_letters.purge, queue, keys)

    def delete_messages(self, params: DeleteMessagesParams) -> int:
        return self._with_connection(actions.delete_messages, params, self.deliver_column)

    def make_ready(self, params: MakeReadyParams) -> int:
        changed = self._with_connection(actions.make_ready, params, self.deliver_column)
        if changed:
            self.notify([params.queue.name])
        return changed

    def set_paused(self, params: PauseParams) -> None:
        self._run(PAUSE if params.paused else RESUME, [params.queue.name.lower()], False)
        if not params.paused:
            self.notify([params.queue.name])

    def is_paused(self, queue: Table) -> bool:
        return bool(self._run(PAUSED, [queue.name.lower()]))

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

    def estimate_counts(self, queue: Table) -> Mapping[str, Any]:
        return self._with_connection(
            browse.estimate_counts, queue, self.deliver_column, self.clock()
        )

    def list_messages(self, params: BrowseParams) -> list[StoredMessage]:
        return self._with_connection(browse.list_messages, params, self.deliver_column)

    def resolve_commit(self, slot: str, token: int) -> str:
        """Find out whether the commit that wrote ``token`` into ``slot`` happened:
        "committed", "aborted" or "unknown" (only when the server cannot be asked in time).

        The marker is read on a fresh connection (the URL's hosts, so on a new primary after
        a failover) once the old backend (pid and start time, the slot's name) is gone: until
        then its transaction may still be finishing COMMIT. Past a bound that backend is
        terminated, which settles its outcome. A server restart ends it too; the marker is as
        durable as the commit. The answer stands only once the resolver's own synchronous
        commit, made after the read, is acknowledged (``server.replicated``): the marker read is
        then on the standbys a failover may promote, and a primary that lost its place
        cannot acknowledge it. Never guesses.
        """
        pid, _, backend_start = slot.partition("@")
        started = monotonic()
        terminated = False
        while monotonic() - started < RESOLVE_TIMEOUT:
            try:
                with psycopg.Connection.connect(
                    self._conninfo, autocommit=True, connect_timeout=5
                ) as connection:
                    while monotonic() - started < RESOLVE_TIMEOUT:
                        cursor = connection.execute(
                            "SELECT count(*) FROM pg_stat_activity WHERE pid = %(pid)s"
                            " AND (%(start)s = '' OR"  # start unknown: the pid alone
                            " extract(epoch FROM backend_start)::text = %(start)s)",
                            {"pid": int(pid), "start": backend_start},
                        )
                        row = cursor.fetchone()
                        if row is None or row[0] == 0:
                            cursor = connection.execute(
                                "SELECT token FROM txqueue_commits WHERE slot = %s", [slot]
                            )
                            marker = cursor.fetchone()
                            committed = marker is not None and marker[0] == token
                            left = RESOLVE_TIMEOUT - (monotonic() - started)
                            if not server.replicated(connection, min(BARRIER_TIMEOUT, left)):
                                break  # ask again on a fresh connection, maybe elsewhere
                            return "committed" if committed else "aborted"
                        if not terminated and monotonic() - started > IN_PROGRESS_BOUND:
                            connection.execute("SELECT pg_terminate_backend(%s)", [int(pid)])
                            terminated = True
                        sleep(0.02)
            except (psycopg.OperationalError, psycopg.errors.ReadOnlySqlTransaction):
                sleep(0.2)  # a server restarting, or a standby: try again until the bound
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
        run_blocking(self._notifier.close)
        self._pool.close()


def _rows(cursor: Any) -> Rows:
    """The rows a statement returned; none for one that returns none (ANALYZE). By the
    result's field count, not cursor.description: that builds a Column per field on every
    access (~7 µs for receive's six), and only "any?" matters."""
    result = cursor.pgresult
    return list(cursor.fetchall()) if result is not None and result.nfields > 0 else []


def _own_connection(connection: Any) -> Any:
    """The psycopg connection behind the caller's connection (psycopg or SQLAlchemy)."""
    raw = connection
    if not isinstance(raw, psycopg.Connection):
        begin_sqlalchemy(connection)
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


def _recorded_dialect(connection: Any) -> Dialect | None:
    """The dialect the database records (see ``RECORDED_DIALECT``), or None."""
    cursor = connection.execute(RECORDED_DIALECT)
    row = cursor.fetchone()
    return None if row is None else Dialect(row[0])
