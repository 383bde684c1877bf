"""The Cloud Spanner driver for the asyncio face: the blocking client runs via ``run_blocking``.

The operations live in ``engine``, ``catalog``, ``leasing``, ``dead_letters`` and
``transaction``, shared by both faces.

The sync twin ``txqueue/drivers/spanner/_sync.py`` is generated from this file
by ``tools/async_to_sync.py``.
"""

from __future__ import annotations

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
    DeleteParams,
    ReceiveParams,
    ReleaseParams,
    RenewParams,
    SendParams,
    WriteParams,
)
from txqueue.drivers.buffered import FLUSH_AT
from txqueue.drivers.spanner import browse, catalog, dead_letters, leasing
from txqueue.drivers.spanner.engine import SpannerDatabase
from txqueue.drivers.spanner.names import DISPLAY_NAME, RESERVED_PREFIX
from txqueue.drivers.spanner.transaction import Work
from txqueue.errors import InvalidArgument
from txqueue.models import DeadLetter, LeaseRenewal, Message, ResultSet, StoredMessage

__all__ = ["AsyncSpannerDriver"]

#: How often a waiting receiver looks for messages sent by other processes (no wake-up yet).
POLL = 0.2
#: How often it looks at this process's own commits while waiting.
LOCAL_POLL = 0.005


class AsyncSpannerTransaction:
    """A transaction of the driver protocol over one blocking ``Work``."""

    def __init__(self, driver: AsyncSpannerDriver, work: Work) -> None:
        self._driver = driver
        self._work = work

    async def load_catalog(self) -> Catalog:
        return await run_blocking(self._work.load_catalog)

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
        await run_blocking(self._work.commit)
        self._driver.notify(self._work.sent)

    async def rollback(self) -> None:
        await run_blocking(self._work.rollback)


class AsyncSpannerReceiver:
    """A receive stream's hold: wake-ups are this process's commits, else polling."""

    def __init__(self, driver: AsyncSpannerDriver, queue: Table) -> None:
        self._driver = driver
        self._queue = queue
        self._seen = driver.sends(queue.name)

    async def receive(self, params: ReceiveParams) -> list[Message]:
        self._seen = self._driver.sends(self._queue.name)
        return await self._driver.receive_now(params)

    async def seconds_until_ready(self, queue: Table) -> float | None:
        seconds: float | None = await self._driver.read(
            leasing.next_ready, queue, self._driver.deliver_column, self._driver.clock()
        )
        return seconds

    async def wait(self, timeout: float) -> None:
        """Until this process commits a send to the queue, or (looked at every ``POLL``)
        a message of it is ready, e.g. sent by another process; at most ``timeout``."""
        deadline = monotonic() + timeout
        look = monotonic() + POLL
        while self._driver.sends(self._queue.name) == self._seen:
            now = monotonic()
            if now >= deadline:
                return
            if now >= look:
                due = await self.seconds_until_ready(self._queue)
                if due is not None and due <= 0:
                    return
                look = monotonic() + POLL
            await sleep(max(min(deadline - now, look - now, LOCAL_POLL), 0.0))

    async def close(self) -> None:
        """Nothing is held between receives."""


class AsyncSpannerDriver:
    """Cloud Spanner (or its emulator) behind the operation-level protocol."""

    engine = "spanner"

    def __init__(self, target: str, clock: Callable[[], Any] | None = None) -> None:
        self.database = SpannerDatabase(target)
        self.dialect = Dialect.GOOGLESQL  # until initialize
        self.deliver_column = DELIVER_TIME[self.dialect]
        self.clock: Callable[[], Any] = clock or (lambda: None)
        self._sends: dict[str, int] = {}

    # ---- wake-ups within this process ----------------------------------------------------

    def sends(self, queue: str) -> int:
        """How many commits of this process sent to ``queue`` so far."""
        return self._sends.get(queue.lower(), 0)

    def notify(self, queues: set[str]) -> None:
        for queue in queues:
            self._sends[queue.lower()] = self.sends(queue) + 1

    async def read(self, function: Callable[..., Any], *args: Any) -> Any:
        return await run_blocking(self.database.read, function, *args)

    # ---- the protocol --------------------------------------------------------------------

    async def initialize(self, dialect: Dialect | None) -> Dialect:
        self.dialect = await run_blocking(catalog.initialize, self.database, dialect)
        self.deliver_column = DELIVER_TIME[self.dialect]
        return self.dialect

    async def load_catalog(self) -> Catalog:
        loaded: Catalog = await self.read(catalog.load_catalog)
        return loaded

    async def apply_ddl(self, statements: Sequence[DdlStatement]) -> None:
        check_reserved_names(statements, RESERVED_PREFIX, DISPLAY_NAME)
        await run_blocking(catalog.apply_ddl, self.database, statements, self.deliver_column)

    async def begin(
        self, connection: Any = None, read_only: bool = False
    ) -> AsyncSpannerTransaction:
        if connection is not None:
            _check_transaction(connection)
        work = await run_blocking(Work, self.database, self.deliver_column, read_only, connection)
        return AsyncSpannerTransaction(self, work)

    async def open_receiver(self, queue: Table) -> AsyncSpannerReceiver:
        return AsyncSpannerReceiver(self, queue)

    async def receive_now(self, params: ReceiveParams) -> list[Message]:
        messages: list[Message] = await run_blocking(
            self.database.read_write, leasing.receive, params, self.deliver_column
        )
        return messages

    async def renew(self, params: RenewParams) -> list[LeaseRenewal]:
        renewals: list[LeaseRenewal] = await run_blocking(
            self.database.read_write, leasing.renew, params, self.deliver_column
        )
        return renewals

    async def release(self, params: ReleaseParams) -> int:
        released: int = await run_blocking(
            self.database.read_write, leasing.release, params, self.deliver_column
        )
        if released:
            self.notify({params.queue.name})
        return released

    async def dead_letter(self, params: DeadLetterParams) -> None:
        await run_blocking(
            self.database.read_write, dead_letters.dead_letter, params, self.deliver_column
        )

    async def dead_letters(self, queue: Table, limit: int) -> list[DeadLetter]:
        found: list[DeadLetter] = await self.read(dead_letters.dead_letters, queue, limit)
        return found

    async def replay_dead_letters(
        self, queue: Table, keys: Sequence[tuple[Any, ...]] | None
    ) -> int:
        replayed: int = await run_blocking(
            self.database.read_write, dead_letters.replay, queue, keys, self.deliver_column
        )
        if replayed:
            self.notify({queue.name})
        return replayed

    async def purge_dead_letters(self, queue: Table, keys: Sequence[tuple[Any, ...]] | None) -> int:
        purged: int = await run_blocking(self.database.read_write, dead_letters.purge, queue, keys)
        return purged

    async def queue_counts(self, queue: Table) -> Mapping[str, Any]:
        counts: dict[str, Any] = await self.read(
            leasing.counts, queue, self.deliver_column, self.clock()
        )
        counts["dead_letters"] = await self.read(dead_letters.count, queue)
        return counts

    async def estimate_counts(self, queue: Table) -> Mapping[str, Any]:
        counts = dict(await self.queue_counts(queue))
        counts["estimated"] = False
        return counts

    async def list_messages(self, params: BrowseParams) -> list[StoredMessage]:
        found: list[StoredMessage] = await self.read(
            browse.list_messages, params, self.deliver_column
        )
        return found

    async def expire_ledger(self, retention: timedelta) -> int:
        expired: int = await run_blocking(
            self.database.read_write, dead_letters.expire_ledger, retention
        )
        return expired

    async def close(self) -> None:
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
