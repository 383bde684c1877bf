"""The Cloud Spanner driver for the asyncio face: the blocking client runs via ``run_blocking``.

The operations live in ``engine``, ``catalog``, ``leasing``, ``dead_letters`` and
``transaction``, shared by both faces.

The sync twin ``txqueue/drivers/spanner/_sync.py`` is generated from this file
by ``tools/async_to_sync.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from txqueue.core.schema import (
    DELIVER_TIME,
    Catalog,
    DdlStatement,
    Dialect,
    Table,
    check_reserved_names,
)
from txqueue.drivers._async_compat import monotonic, run_blocking, sleep
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
)
from txqueue.drivers.buffered import FLUSH_AT
from txqueue.drivers.spanner import actions, browse, catalog, dead_letters, leasing, native
from txqueue.drivers.spanner.engine import SpannerDatabase
from txqueue.drivers.spanner.names import DISPLAY_NAME, RESERVED_PREFIX
from txqueue.drivers.spanner.statements import wake_stream
from txqueue.drivers.spanner.transaction import Work
from txqueue.drivers.spanner.turns import AsyncTurn
from txqueue.drivers.spanner.wakeup import ChangeStreamWatcher
from txqueue.errors import InvalidArgument
from txqueue.models import DeadLetter, LeaseRenewal, Message, ResultSet, StoredMessage

__all__ = ["AsyncSpannerDriver"]

#: How often a waiting receiver looks for messages sent by other processes while the
#: queue's change stream cannot be read.
POLL = 0.2
#: How often it looks while the change stream wakes it (a fallback: a release by another
#: process is an update, which the insert-only stream does not record).
WATCHED_POLL = 1.0
#: How long a watcher that could not read its stream is left before another try.
WATCH_RETRY = 30.0
#: How often it looks at this process's own commits while waiting.
LOCAL_POLL = 0.005


class AsyncSpannerTransaction:
    """A transaction of the driver protocol over one blocking ``Work``."""

    def __init__(self, driver: AsyncSpannerDriver, work: Work, turn: AsyncTurn) -> None:
        self._driver = driver
        self._work = work
        self._turn = turn  # held until the commit or rollback (turns.py)

    async def load_catalog(self) -> Catalog:
        return await run_blocking(self._work.load_catalog)

    async def application_tables(self, names: Sequence[str] | None) -> dict[str, Table]:
        return await run_blocking(self._work.application_tables, names)

    async def write(self, params: WriteParams) -> None:
        await run_blocking(self._work.write, params)

    async def delete(self, params: DeleteParams) -> int:
        return await run_blocking(self._work.delete, params)

    async def send(self, params: SendParams) -> None:
        self._work.send(params)  # buffered: no round trip
        if len(self._work.pending) >= FLUSH_AT:
            await run_blocking(self._work.flush)

    async def store_trace_context(self, params: SendParams, context: str) -> None:
        await run_blocking(self._work.store_trace_context, params, context)

    async def ack(self, params: AckParams) -> None:
        self._work.ack(params)  # buffered: no round trip
        if len(self._work.pending) >= FLUSH_AT:
            await run_blocking(self._work.flush)

    async def execute_sql(self, sql: str, params: Any = None) -> ResultSet:
        return await run_blocking(self._work.execute_sql, sql, params)

    async def execute_update(
        self, sql: str, params: Any = None, expected_rows: int | None = None
    ) -> int:
        return await run_blocking(self._work.execute_update, sql, params, expected_rows)

    def note_sent(self, queue: str) -> None:
        self._work.sent.add(queue)

    async def flush(self) -> None:
        await run_blocking(self._work.flush)

    async def record_once(self, key: str) -> bool:
        return await run_blocking(self._work.record_once, key)

    async def commit(self) -> None:
        try:
            await run_blocking(self._work.commit)
        finally:
            self._turn.give_back()
        self._driver.notify(self._work.sent)

    async def rollback(self) -> None:
        try:
            await run_blocking(self._work.rollback)
        finally:
            self._turn.give_back()


class AsyncSpannerReceiver:
    """A receive stream's hold: wake-ups are this process's commits and the queue's change
    stream (``wakeup.py``), with polling as the fallback."""

    def __init__(self, driver: AsyncSpannerDriver, queue: Table) -> None:
        self._driver = driver
        self._queue = queue
        self._seen = driver.sends(queue.name)

    async def receive(self, params: ReceiveParams) -> list[Message]:
        self._seen = self._driver.sends(self._queue.name)
        return await self._driver.receive_now(params)

    async def seconds_until_ready(self, queue: Table) -> float | None:
        if self._driver.native_queues:
            return 0.0  # Spanner's queue keeps its ready times: ask RECEIVE_ again
        seconds: float | None = await self._driver.read(
            leasing.next_ready, queue, self._driver.deliver_column, self._driver.clock()
        )
        return seconds

    async def _due_or_paused(self) -> tuple[float | None, bool]:
        """``seconds_until_ready`` and whether the queue is paused, read together."""
        if self._driver.native_queues:
            return 0.0, False  # Spanner's queue keeps its ready times: ask RECEIVE_ again
        found: tuple[float | None, bool] = await self._driver.read(
            leasing.next_ready_or_paused,
            self._queue,
            self._driver.deliver_column,
            self._driver.clock(),
        )
        return found

    async def wait(self, timeout: float) -> None:
        """Until this process commits a send to the queue, the change stream records one,
        or (looked at every ``POLL``, or ``WATCHED_POLL`` while the stream is read) a message
        of it is ready, e.g. released by another process; at most ``timeout``. A paused
        queue is looked at every ``POLL``: its resume by another process deletes a row,
        which the insert-only stream does not record."""
        watcher = self._driver.watch(self._queue)
        deadline = monotonic() + timeout
        look = monotonic() + POLL
        while self._driver.sends(self._queue.name) == self._seen:
            now = monotonic()
            if now >= deadline:
                return
            if now >= look:
                due, paused = await self._due_or_paused()
                if due is not None and due <= 0:
                    return
                look = monotonic() + (WATCHED_POLL if watcher.live and not paused else POLL)
            await sleep(max(min(deadline - now, look - now, LOCAL_POLL), 0.0))

    async def close(self) -> None:
        """Nothing is held between receives."""


class AsyncSpannerDriver:
    """Cloud Spanner (or its emulator) behind the operation-level protocol."""

    engine = "spanner"
    sql_engine = "spanner"  # GoogleSQL; a PostgreSQL-dialect database's is spanner_postgresql

    def __init__(
        self, target: str, clock: Callable[[], Any] | None = None, queues: str = "auto"
    ) -> None:
        self.database = SpannerDatabase(target)
        self.queues_mode = queues  # the URL's ?queues= (native.py)
        self.native_queues = False  # until initialize decides
        self.dialect = Dialect.GOOGLESQL  # until initialize
        self.deliver_column = DELIVER_TIME[self.dialect]
        self.clock: Callable[[], Any] = clock or (lambda: None)
        self._sends: dict[str, int] = {}
        self._watchers: dict[str, tuple[ChangeStreamWatcher, float]] = {}

    # ---- wake-ups within this process ----------------------------------------------------

    def sends(self, queue: str) -> int:
        """How many commits of this process sent to ``queue`` so far."""
        return self._sends.get(queue.lower(), 0)

    def notify(self, queues: set[str]) -> None:
        for queue in queues:
            self._sends[queue.lower()] = self.sends(queue) + 1

    def watch(self, queue: Table) -> ChangeStreamWatcher:
        """The queue's change-stream watcher, started on first use (and again a while after
        it failed, e.g. on a queue made before change streams)."""
        name = queue.name.lower()
        found = self._watchers.get(name)
        if found is not None and not (found[0].failed and monotonic() - found[1] > WATCH_RETRY):
            return found[0]
        if found is not None:  # its remaining readers end off the caller's thread (or loop)
            threading.Thread(target=found[0].stop, daemon=True).start()
        watcher = ChangeStreamWatcher(
            self.database, wake_stream(queue), lambda: self.notify({queue.name})
        )
        self._watchers[name] = (watcher, monotonic())
        watcher.start()
        return watcher

    def stop_watching(self) -> None:
        watchers, self._watchers = list(self._watchers.values()), {}
        for watcher, _ in watchers:
            watcher.stop()

    async def read(self, function: Callable[..., Any], *args: Any) -> Any:
        return await run_blocking(self.database.read, function, *args)

    async def read_write(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function`` in a read-write transaction of txqueue's own, in its turn (turns.py)."""
        turn = AsyncTurn(self.database.turns)
        await turn.take()
        try:
            return await run_blocking(self.database.read_write, function, *args)
        finally:
            turn.give_back()

    # ---- the protocol --------------------------------------------------------------------

    async def initialize(self, dialect: Dialect | None) -> Dialect:
        turn = AsyncTurn(self.database.turns)  # its schema changes wait for no transaction
        await turn.take()
        try:
            self.dialect = await run_blocking(catalog.initialize, self.database, dialect)
            self.deliver_column = DELIVER_TIME[self.dialect]
            postgresql = self.dialect is Dialect.POSTGRESQL
            self.sql_engine = "spanner_postgresql" if postgresql else "spanner"
            self.native_queues = await run_blocking(
                native.decide, self.database, self.queues_mode, self.dialect
            )
        finally:
            turn.give_back()
        return self.dialect

    async def load_catalog(self) -> Catalog:
        loaded: Catalog = await self.read(catalog.load_catalog)
        return loaded

    async def apply_ddl(self, statements: Sequence[DdlStatement]) -> None:
        check_reserved_names(statements, RESERVED_PREFIX, DISPLAY_NAME)
        turn = AsyncTurn(self.database.turns)  # the emulator refuses a schema change while a
        await turn.take()  # read-write transaction is open
        try:
            await run_blocking(
                catalog.apply_ddl,
                self.database,
                statements,
                self.deliver_column,
                self.native_queues,
            )
        finally:
            turn.give_back()

    async def begin(
        self, connection: Any = None, read_only: bool = False
    ) -> AsyncSpannerTransaction:
        if connection is not None:
            _check_transaction(connection)
        turn = AsyncTurn(None if read_only or connection is not None else self.database.turns)
        await turn.take()
        try:
            work = await run_blocking(
                Work, self.database, self.deliver_column, read_only, connection
            )
        except BaseException:
            turn.give_back()
            raise
        work.native_queues = self.native_queues
        return AsyncSpannerTransaction(self, work, turn)

    async def open_receiver(self, queue: Table) -> AsyncSpannerReceiver:
        return AsyncSpannerReceiver(self, queue)

    async def receive_now(self, params: ReceiveParams) -> list[Message]:
        if self.native_queues:
            received: list[Message] = await self.read_write(native.receive, params)
            return received
        messages: list[Message] = await self.read_write(
            leasing.receive,
            params,
            self.deliver_column,
            leasing.ShardWalk(),
        )
        return messages

    async def renew(self, params: RenewParams) -> list[LeaseRenewal]:
        if self.native_queues:
            renewed: list[LeaseRenewal] = await self.read_write(native.renew, params)
            return renewed
        renewals: list[LeaseRenewal] = await self.read_write(
            leasing.renew, params, self.deliver_column
        )
        return renewals

    async def release(self, params: ReleaseParams) -> int:
        if self.native_queues:
            return native.release(params)
        released: int = await self.read_write(leasing.release, params, self.deliver_column)
        if released:
            self.notify({params.queue.name})
        return released

    async def dead_letter(self, params: DeadLetterParams) -> None:
        self._emulated("moving a message to the dead letters")
        await self.read_write(dead_letters.dead_letter, params, self.deliver_column)

    async def dead_letters(self, queue: Table, limit: int) -> list[DeadLetter]:
        found: list[DeadLetter] = await self.read(dead_letters.dead_letters, queue, limit)
        return found

    async def replay_dead_letters(
        self, queue: Table, keys: Sequence[tuple[Any, ...]] | None
    ) -> int:
        self._emulated("replaying dead letters")
        replayed: int = await self.read_write(dead_letters.replay, queue, keys, self.deliver_column)
        if replayed:
            self.notify({queue.name})
        return replayed

    async def purge_dead_letters(self, queue: Table, keys: Sequence[tuple[Any, ...]] | None) -> int:
        purged: int = await self.read_write(dead_letters.purge, queue, keys)
        return purged

    async def delete_messages(self, params: DeleteMessagesParams) -> int:
        self._emulated("deleting chosen messages")
        deleted: int = await self.read_write(actions.delete_messages, params, self.deliver_column)
        return deleted

    async def make_ready(self, params: MakeReadyParams) -> int:
        self._emulated("making messages ready")
        changed: int = await self.read_write(actions.make_ready, params, self.deliver_column)
        if changed:
            self.notify({params.queue.name})
        return changed

    async def set_paused(self, params: PauseParams) -> None:
        await self.read_write(catalog.set_paused, params)
        if not params.paused:
            self.notify({params.queue.name})

    async def is_paused(self, queue: Table) -> bool:
        paused: bool = await self.read(catalog.is_paused, queue)
        return paused

    async def queue_counts(self, queue: Table) -> Mapping[str, Any]:
        self._emulated("counting messages")
        counts: dict[str, Any] = await self.read(
            leasing.counts, queue, self.deliver_column, self.clock()
        )
        counts["dead_letters"] = await self.read(dead_letters.count, queue)
        return counts

    async def estimate_counts(self, queue: Table) -> Mapping[str, Any]:
        self._emulated("counting messages")
        counts: dict[str, Any] = await self.read(
            browse.estimate_counts, queue, self.deliver_column, self.clock()
        )
        counts["dead_letters"] = await self.read(dead_letters.count, queue)
        return counts

    async def list_messages(self, params: BrowseParams) -> list[StoredMessage]:
        self._emulated("browsing messages")
        found: list[StoredMessage] = await self.read(
            browse.list_messages, params, self.deliver_column
        )
        return found

    async def expire_ledger(self, retention: timedelta) -> int:
        expired: int = await self.read_write(dead_letters.expire_ledger, retention)
        return expired

    def _emulated(self, operation: str) -> None:
        """Refuse ``operation`` on native queues: it reads txqueue's lease state."""
        if self.native_queues:
            raise native.refuse(operation)

    async def close(self) -> None:
        await run_blocking(self.stop_watching)
        await run_blocking(self.database.close)


def _check_transaction(connection: Any) -> None:
    """The application's own open read-write transaction of the Spanner client."""
    from google.cloud.spanner_v1.transaction import Transaction

    if not isinstance(connection, Transaction):
        raise InvalidArgument(
            "connection must be an open google.cloud.spanner Transaction (from "
            f"database.run_in_transaction or session.transaction()), got {type(connection).__name__}"
        )
    if connection.committed is not None or connection.rolled_back:
        raise InvalidArgument("connection is a finished Spanner transaction")
