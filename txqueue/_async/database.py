"""The asyncio face: AsyncDatabase, AsyncTransaction, AsyncBatch, AsyncSnapshot.

The sync twin ``txqueue/_sync/database.py`` is generated from this file
by ``tools/async_to_sync.py``.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from txqueue import telemetry
from txqueue._async.drivers import open_driver
from txqueue._async.transaction import AsyncBatch, AsyncSnapshot, AsyncTransaction
from txqueue.core.durations import to_duration
from txqueue.core.leases import DEFAULT_LEASE, is_token
from txqueue.core.schema import Catalog, Dialect, Index, Table, validate_name
from txqueue.core.values import check_count, check_key, check_text
from txqueue.drivers._async_compat import CancelledError, Lock, finish, monotonic, sleep
from txqueue.drivers._async_protocol import AsyncDriver, AsyncDriverTransaction
from txqueue.drivers.base import (
    DeadLetterParams,
    PauseParams,
    ReceiveParams,
    ReleaseParams,
    RenewParams,
    message_missing,
)
from txqueue.drivers.browse import browse_params, lookup_params
from txqueue.drivers.engines import traits_named
from txqueue.drivers.traits import EngineTraits
from txqueue.errors import Aborted, InvalidArgument, NotFound
from txqueue.models import DeadLetter, LeaseRenewal, Message, QueueInfo, StoredMessage
from txqueue.mutations import (
    checked_exception,
    checked_keys,
    checked_tokens,
    mark_last,
    prepare_delete_messages,
    prepare_make_ready,
    receive_arguments,
)
from txqueue.sql.ddl import check_against_catalog, parse_ddl, simulate, split_statements

__all__ = ["AsyncBatch", "AsyncDatabase", "AsyncSnapshot", "AsyncTransaction", "connect_async"]

T = TypeVar("T")

#: run_in_transaction gives up retrying Aborted transactions after this many attempts.
MAX_ATTEMPTS = 20
#: Longest a receive stream sleeps before looking again when nothing wakes it.
FALLBACK_WAIT = 1.0
#: How long a receive stream waits before trying again when the database was busy.
CONTENDED_WAIT = 0.02
#: How long the columns read for one of the application's own tables are reused (seconds):
#: a table it creates is seen at once, a change to a table already read within this time.
APPLICATION_TABLE_TTL = 1.0


async def connect_async(
    url: str,
    dialect: str | Dialect | None = None,
    *,
    clock: Callable[[], datetime | None] | None = None,
) -> AsyncDatabase:
    """Open a database by URL; record its dialect on first use, check it afterwards.

    ``clock`` pins the time txqueue uses for leases and readiness (tests); by default
    PostgreSQL's clock is used, and the machine's clock for SQLite.
    """
    wanted = _dialect(dialect)
    driver = await open_driver(url, clock)
    try:
        recorded = await driver.initialize(wanted)
        tables, indexes = await driver.load_catalog()
    except BaseException:
        await driver.close()
        raise
    return AsyncDatabase(driver, recorded, tables, indexes, clock)


def _dialect(value: str | Dialect | None) -> Dialect | None:
    if value is None or isinstance(value, Dialect):
        return value
    try:
        return Dialect(str(value).lower())
    except ValueError:
        raise InvalidArgument(
            f"dialect must be 'googlesql' or 'postgresql', got {value!r}"
        ) from None


class AsyncDatabase:
    """A database holding queues; the entry point of the public API."""

    def __init__(
        self,
        driver: AsyncDriver,
        dialect: Dialect,
        tables: dict[str, Table],
        indexes: dict[str, Index],
        clock: Callable[[], datetime | None] | None,
    ) -> None:
        self._driver = driver
        self.dialect = dialect
        self._tables = tables
        self._indexes = indexes
        self._clock = clock or (lambda: None)
        self._ddl_lock = Lock()
        #: the application's own tables read so far: lower-cased name -> (when read, table)
        self._application: dict[str, tuple[float, Table]] = {}

    @property
    def engine(self) -> str:
        """The engine's name: sqlite or postgres."""
        return self._driver.engine

    @property
    def traits(self) -> EngineTraits:
        """What sets this database's engine apart (placeholders, timestamps, writers, ...)."""
        return traits_named(self._driver.engine)

    @property
    def _sql_engine(self) -> str:
        """What the SQL front end writes this database's SQL for (the driver's ``sql_engine``:
        the engine, or Spanner's PostgreSQL dialect on such a Spanner database)."""
        return self._driver.sql_engine

    def now(self) -> datetime | None:
        """The pinned time, or None for the database's own clock."""
        return self._clock()

    async def __aenter__(self) -> AsyncDatabase:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close every connection."""
        await self._driver.close()

    # ---- schema ---------------------------------------------------------------------------

    async def update_ddl(self, statements: Sequence[str] | str) -> None:
        """Apply Spanner DDL (in the database's dialect), all statements or none."""
        if isinstance(statements, str):
            statements = [statements]
        texts = [piece for text in statements for piece in split_statements(text)]
        if not texts:
            raise InvalidArgument("statements must contain at least one DDL statement")
        parsed = [parse_ddl(text, self.dialect) for text in texts]
        async with self._ddl_lock:
            tables, indexes = await self._driver.load_catalog()
            working_tables, working_indexes = dict(tables), dict(indexes)
            for statement in parsed:
                check_against_catalog(statement, working_tables, working_indexes)
                simulate(statement, working_tables, working_indexes)
            await self._driver.apply_ddl(parsed)
            self._tables, self._indexes = await self._driver.load_catalog()
            self._application.clear()

    async def ensure_internal_tables(self, tables: Sequence[Table]) -> None:
        """Create txqueue's own tables and queues (reserved ``txqueue_`` names) when missing,
        and add the (nullable) columns a table made by an older txqueue lacks.

        For txqueue's layers (the event layer's delivery queue, archives); the schema objects
        are built in code, so they skip the DDL parser and its reserved-name rule.
        """
        from txqueue.core.schema import AddColumn, CreateTable, DdlStatement

        async with self._ddl_lock:
            known, _ = await self._driver.load_catalog()
            missing: list[DdlStatement] = []
            for table in tables:
                found = known.get(table.name.lower())
                if found is None:
                    missing.append(CreateTable(table, if_not_exists=True))
                else:  # made by an older txqueue: the columns added since (nullable)
                    missing += [
                        AddColumn(found.name, column)
                        for column in table.columns
                        if not found.has_column(column.name)
                    ]
            if missing:  # if_not_exists: another process may create them at the same time
                await self._driver.apply_ddl(missing)
            self._tables, self._indexes = await self._driver.load_catalog()

    async def table(self, name: str) -> Table:
        """The schema of a table or queue (reloads the catalog once when unknown).

        A table txqueue did not create (the application's own, made by plain SQL, an ORM or
        migrations) comes back as an ``ApplicationTable`` read from the engine's catalog.
        """
        try:
            return await self._table(name, self._driver.load_catalog)
        except NotFound:
            found = await self._application_tables([name])
            if name.lower() not in found:
                raise
            return found[name.lower()]

    async def _application_tables(
        self, names: Sequence[str] | None, transaction: AsyncDriverTransaction | None = None
    ) -> dict[str, Table]:
        """The application's own tables among ``names`` (None: all) by lower-cased name,
        reused while fresh, else read from the engine's catalog in ``transaction`` (or in a
        read-only transaction of their own)."""
        now = monotonic()
        found: dict[str, Table] = {}
        missing: list[str] = []
        for name in names or ():
            entry = self._application.get(name.lower())
            if entry is not None and now - entry[0] < APPLICATION_TABLE_TTL:
                found[name.lower()] = entry[1]
            else:
                missing.append(name)
        if names is not None and not missing:
            return found
        wanted = None if names is None else missing
        if transaction is not None:
            read = await transaction.application_tables(wanted)
        else:
            own = await self._driver.begin(read_only=True)
            try:
                read = await own.application_tables(wanted)
            finally:
                await own.rollback()
        if names is None:
            self._application.clear()
        for key in [n.lower() for n in wanted or ()]:
            self._application.pop(key, None)
        for key, table in read.items():
            self._application[key] = (now, table)
        return {**found, **read}

    async def queue(self, name: str) -> Table:
        """The schema of a queue; NotFound when there is none, InvalidArgument for a table."""
        return await self._queue(name, self._driver.load_catalog)

    async def _table(self, name: str, load: Callable[[], Awaitable[Catalog]]) -> Table:
        """``table``, reloading with ``load``: a transaction's own, so that a lookup inside it
        never waits for a second pooled connection (every one may be held by such lookups)."""
        if not isinstance(name, str):
            raise InvalidArgument(f"table name must be a string, got {type(name).__name__}")
        found = self._tables.get(name.lower())
        if found is None:
            self._tables, self._indexes = await load()
            found = self._tables.get(name.lower())
        if found is None:
            validate_name(name, "table name")  # a malformed name is InvalidArgument, not NotFound
            raise NotFound(f"no table or queue named {name!r}")
        return found

    async def _queue(self, name: str, load: Callable[[], Awaitable[Catalog]]) -> Table:
        found = await self._table(name, load)
        if not found.is_queue:
            raise InvalidArgument(f"{name} is a table, not a queue")
        return found

    async def queues(self) -> list[Table]:
        """Every queue, by name."""
        self._tables, self._indexes = await self._driver.load_catalog()
        return sorted((t for t in self._tables.values() if t.is_queue), key=lambda t: t.name)

    # ---- transactions -------------------------------------------------------------------

    def batch(self, connection: Any = None) -> AsyncBatch:
        """Buffer mutations and commit them atomically when the ``async with`` block ends."""
        return AsyncBatch(self, connection)

    def snapshot(self) -> AsyncSnapshot:
        """A read-only transaction for queries."""
        return AsyncSnapshot(self)

    async def run_in_transaction(
        self,
        function: Callable[..., Awaitable[T]],
        *args: Any,
        connection: Any = None,
        **kwargs: Any,
    ) -> T:
        """Run ``function(transaction, *args, **kwargs)`` and commit; retry only on Aborted.

        A transaction is re-run only when the engine aborted it (a conflict), never when the
        outcome of COMMIT is unknown. With ``connection`` it joins the caller's open
        transaction inside a savepoint and neither commits nor retries.
        """
        attempt = 0
        while True:
            attempt += 1
            try:
                driver_transaction = await self._driver.begin(connection)
            except Aborted:  # e.g. SQLite's write lock busy past the timeout: try again
                if connection is not None or attempt >= MAX_ATTEMPTS:
                    raise
                await sleep(min(0.005 * 2**attempt, 1.0) * random.uniform(0.5, 1.5))
                continue
            transaction = AsyncTransaction(self, driver_transaction)
            try:
                result = await function(transaction, *args, **kwargs)
                await driver_transaction.commit()
                return result
            except Aborted:
                await driver_transaction.rollback()
                if connection is not None or attempt >= MAX_ATTEMPTS:
                    raise
            except BaseException:
                await driver_transaction.rollback()
                raise
            await sleep(min(0.005 * 2**attempt, 1.0) * random.uniform(0.5, 1.5))

    # ---- receiving ----------------------------------------------------------------------

    async def receive_now(
        self,
        queue: str,
        max_batch_size: int = 1,
        lease_duration: timedelta | str = DEFAULT_LEASE,
    ) -> list[Message]:
        """Lease the messages that are ready now, up to ``max_batch_size``, without waiting.

        One short transaction, no stream and no wake-up subscription: for a worker that is
        busy and only wants the next batch. An empty list means nothing is ready (or, on
        SQLite, that another writer holds the lock just now).
        """
        lease = receive_arguments(max_batch_size, lease_duration)
        table = await self.queue(queue)
        params = ReceiveParams(table, max_batch_size, lease, self.now())
        started = telemetry.receive_started()
        try:
            batch, cancelled = await finish(self._driver.receive_now(params))
        except Aborted:
            return []
        if cancelled:  # nobody will get these: give them back now
            await self._give_back(table, batch)
            raise CancelledError
        if started is not None and batch:
            telemetry.received(table.name, batch, self.traits.db_system, started)
        return mark_last(batch) if batch else []

    def receive(
        self,
        queue: str,
        max_duration: timedelta | str = timedelta(seconds=20),
        max_batch_size: int = 1,
        lease_duration: timedelta | str = DEFAULT_LEASE,
        priority: Any = None,
    ) -> AsyncIterator[Message]:
        """Stream ready messages under a lease until ``max_duration`` ends.

        Wakes promptly when a send commits, when a deliver time comes due and when an expired
        lease's backoff ends. Messages of a batch not yet handed out when the stream is closed
        early are released at once, so no one waits for their lease to expire. Arguments are
        checked here, before the stream starts.
        """
        duration = to_duration(max_duration, "max_duration")
        lease = receive_arguments(max_batch_size, lease_duration)
        if priority is not None:
            raise InvalidArgument("priority must be NULL: its meaning is undefined upstream")
        if not isinstance(queue, str):
            raise InvalidArgument(f"queue must be a string, got {type(queue).__name__}")
        cached = self._tables.get(queue.lower())
        if cached is not None and not cached.is_queue:
            raise InvalidArgument(f"{queue} is a table, not a queue")
        return self._stream(queue, duration, max_batch_size, lease)

    async def _stream(
        self, queue: str, duration: timedelta, max_batch_size: int, lease: timedelta
    ) -> AsyncIterator[Message]:
        table = await self.queue(queue)
        deadline = monotonic() + duration.total_seconds()
        receiver = await self._driver.open_receiver(table)
        pending: list[Message] = []
        try:
            while True:
                started = telemetry.receive_started()
                try:
                    batch, cancelled = await finish(
                        receiver.receive(ReceiveParams(table, max_batch_size, lease, self.now()))
                    )
                    contended = False
                except Aborted:  # e.g. SQLite's write lock held by a long transaction
                    batch, cancelled, contended = [], False, True
                if cancelled:  # closed while leasing: the finally below gives them back
                    pending = batch
                    raise CancelledError
                if batch:
                    if started is not None:
                        telemetry.received(table.name, batch, self.traits.db_system, started)
                    pending = mark_last(batch)
                    while pending:
                        message = pending.pop(0)
                        yield message
                if monotonic() >= deadline:
                    return
                if len(batch) >= max_batch_size:
                    continue  # a full batch: more may be ready
                # A batch short of full took what was ready: ask when the next one is due (a
                # read) rather than receive again (a write that would most often find nothing).
                remaining = deadline - monotonic()
                due = await receiver.seconds_until_ready(table)
                wait = min(remaining, FALLBACK_WAIT if due is None else max(due, 0.0))
                if contended:
                    wait = min(remaining, CONTENDED_WAIT)
                if wait > 0:
                    await receiver.wait(wait)
        finally:
            if pending:
                await self._give_back(table, pending)
            await receiver.close()

    async def _give_back(self, table: Table, messages: list[Message]) -> None:
        """Release leases nobody was handed, visible again at once."""
        if messages:
            tokens = [m.lease_token for m in messages]
            await self._driver.release(ReleaseParams(table, tokens, timedelta(0), self.now()))

    async def renew_lease(
        self, queue: str, tokens: Sequence[str], extension: timedelta | str = DEFAULT_LEASE
    ) -> list[LeaseRenewal]:
        """Extend leases by ``extension`` from now; each renewal returns a new token."""
        table = await self.queue(queue)
        return await self._driver.renew(
            RenewParams(
                table, checked_tokens(tokens), to_duration(extension, "extension"), self.now()
            )
        )

    async def release_lease(
        self,
        queue: str,
        tokens: Sequence[str],
        delay: timedelta = timedelta(0),
        error: str | None = None,
        *,
        exception: BaseException | None = None,
    ) -> int:
        """Give leases back: the messages are receivable again after ``delay``.

        With ``error`` the release records a failed attempt (first/last failure time and the
        error), which a later dead letter carries; ``exception``, what the attempt raised,
        adds its type, message and traceback to the message's failure history (``error``
        defaults to its ``repr``).
        """
        table = await self.queue(queue)
        wait = to_duration(delay, "delay", allow_zero=True)
        raised = checked_exception(exception)
        if error is None and exception is not None:
            error = repr(exception)
        if error is not None:
            check_text(error, "error")
        params = ReleaseParams(table, checked_tokens(tokens), wait, self.now(), error, raised)
        return await self._driver.release(params)

    async def dead_letter(
        self,
        queue: str,
        key: Any,
        lease_token: str,
        error: str,
        *,
        exception: BaseException | None = None,
    ) -> None:
        """Move a leased message to the dead letters now, with ``error`` as its last error
        (and ``exception``'s type, message and traceback as its last failure)."""
        table = await self.queue(queue)
        if not isinstance(lease_token, str):
            raise InvalidArgument("lease_token must be a string")
        if not is_token(lease_token):
            lease_token = ""  # not one of ours: it holds no lease (and "" matches none)
        check_text(error, "error")
        raised = checked_exception(exception)
        key = check_key(table, key)
        params = DeadLetterParams(table, key, lease_token, error, self.now(), raised)
        await self._driver.dead_letter(params)

    async def dead_letters(self, queue: str, limit: int = 1000) -> list[DeadLetter]:
        """The dead letters of ``queue``, oldest failure first."""
        table = await self.queue(queue)
        return await self._driver.dead_letters(table, check_count(limit, "limit"))

    async def replay_dead_letters(self, queue: str, keys: Sequence[Any] | None = None) -> int:
        """Send dead letters (all, or those with ``keys``) back to their queue as new messages."""
        table = await self.queue(queue)
        return await self._driver.replay_dead_letters(table, checked_keys(table, keys))

    async def purge_dead_letters(self, queue: str, keys: Sequence[Any] | None = None) -> int:
        """Delete dead letters (all, or those with ``keys``) for good."""
        table = await self.queue(queue)
        return await self._driver.purge_dead_letters(table, checked_keys(table, keys))

    async def delete_messages(self, queue: str, keys: Sequence[Any], *, force: bool = False) -> int:
        """Delete (cancel) the messages of ``queue`` with ``keys``, all or none; returns how many.

        A key with no message is NotFound, a message under a live lease FailedPrecondition
        (its worker is at it) unless ``force``: its worker's ack then gets NotFound. Each
        refusal names the keys and changes nothing; the check and the deletion are one step.
        """
        table = await self.queue(queue)
        return await self._driver.delete_messages(
            prepare_delete_messages(table, keys, force, self.now())
        )

    async def make_ready(
        self,
        queue: str,
        keys: Sequence[Any],
        *,
        deliver_time: datetime | None = None,
        force: bool = False,
    ) -> int:
        """Make the messages of ``queue`` with ``keys`` receivable at ``deliver_time``
        (None: now), all or none; returns how many.

        Their deliver time becomes that time, and a release's delay or a lost lease's
        backoff is dropped, so a scheduled or backed-off message is ready at once, or a
        message is put off. Refusals as ``delete_messages``; with ``force`` a live lease is
        ended (its worker's ack then gets FailedPrecondition).
        """
        table = await self.queue(queue)
        return await self._driver.make_ready(
            prepare_make_ready(table, keys, deliver_time, force, self.now())
        )

    async def expire_ledger(self, retention: timedelta) -> int:
        """Forget idempotency-ledger keys recorded longer ago than ``retention``."""
        return await self._driver.expire_ledger(to_duration(retention, "retention"))

    async def pause_queue(self, queue: str) -> None:
        """Pause ``queue``: it still accepts sends, but no receive leases from it (workers,
        ``receive``, SQL's ``RECEIVE_``) until ``resume_queue``. Leases already taken run
        their course (ack, renew and release work). The state is stored in the database, so
        it holds for every process and across restarts; pausing a paused queue is a no-op."""
        table = await self.queue(queue)
        await self._driver.set_paused(PauseParams(table, True))

    async def resume_queue(self, queue: str) -> None:
        """Let receives lease from ``queue`` again and wake its waiting receivers; resuming a
        queue that is not paused is a no-op."""
        table = await self.queue(queue)
        await self._driver.set_paused(PauseParams(table, False))

    async def queue_info(self, queue: str, *, estimate: bool = False) -> QueueInfo:
        """Ready, leased, scheduled and dead-letter counts of a queue, the age in seconds
        of its oldest ready message (None when none is ready), and whether it is paused.

        Exact by default: every message is looked at. With ``estimate`` a queue (or dead
        letter set) of more than 100,000 rows is not counted row by row: its counts come
        from a random sample (SQLite: rowid lookups; PostgreSQL: ``TABLESAMPLE SYSTEM``),
        scaled to its size, and ``estimated`` is True; the oldest ready age is then exact and
        read from the head of the ready index: how long ago the next message a receive would
        take became ready (its deliver time, or the end of a release's delay). Smaller
        queues get exact counts and ``estimated`` False. For dashboards and monitoring.
        """
        if not isinstance(estimate, bool):
            raise InvalidArgument(f"estimate must be a bool, got {type(estimate).__name__}")
        table = await self.queue(queue)
        if estimate:
            counts = await self._driver.estimate_counts(table)
        else:
            counts = await self._driver.queue_counts(table)
        return QueueInfo(
            name=table.name,
            ready=int(counts["ready"]),
            leased=int(counts["leased"]),
            scheduled=int(counts["scheduled"]),
            dead_letters=int(counts.get("dead_letters", 0)),
            oldest_ready_age_seconds=counts["oldest_ready_age_seconds"],
            estimated=bool(counts.get("estimated", False)),
            paused=await self._driver.is_paused(table),
        )

    async def list_messages(
        self,
        queue: str,
        *,
        state: str | None = None,
        key_prefix: Any = None,
        after: Any = None,
        limit: int = 50,
    ) -> list[StoredMessage]:
        """Messages of ``queue`` in primary-key order, read without leasing them.

        ``state`` keeps only "ready", "leased" or "scheduled" ones; ``key_prefix`` is a tuple
        of leading key values, each matched exactly except a final string, matched as a
        string prefix (``%`` and ``_`` are plain characters); ``after`` is the last key of
        the previous page (keyset paging); ``limit`` is 1 to 1000. Each page is an index
        range scan, so it costs the same on the first page as deep into a large queue.
        """
        table = await self.queue(queue)
        params = browse_params(table, state, key_prefix, after, limit, self.now())
        return await self._driver.list_messages(params)

    async def get_message(self, queue: str, key: Any) -> StoredMessage:
        """The message of ``queue`` with primary key ``key``, read without leasing it;
        NotFound when there is none."""
        table = await self.queue(queue)
        params = lookup_params(table, key, self.now())
        found = await self._driver.list_messages(params)
        if not found:
            raise message_missing(table, params.key_prefix)
        return found[0]
