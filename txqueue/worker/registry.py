"""The registry: which workers and dispatchers are alive, and how much each queue got through.

Every worker (``txqueue worker``, ``Worker.run``) keeps a row in ``txqueue_workers`` — host,
pid, queues, concurrency, messages in flight, when it started and was last seen — written at
start and on every heartbeat (every few seconds), and deleted when it shuts down gracefully.
Every dispatcher (``txqueue dispatcher``, ``Dispatcher``) does the same in
``txqueue_dispatchers``, with the pipelines it delivers for instead of queues. One that dies
without shutting down (SIGKILL, power loss) stops beating: once it has missed three heartbeats
it is no longer listed, and the next heartbeat of any of its kind deletes its row.

Each worker heartbeat also adds what the worker did since the previous one (handled, failed,
dead-lettered) to its per-minute buckets of each queue in ``txqueue_worker_throughput``;
buckets older than ``KEEP_THROUGHPUT`` are pruned. A failed heartbeat is logged and never
stops the worker; its counts are written by the next one (the worker keeps the minute's
totals, and each write sets them).

The tables are made from the schema model (`ensure_internal_tables`), rows are written as
mutations and read and deleted with GoogleSQL through the faces (`execute_internal_sql`), so
the registry runs unchanged on every engine. The heartbeats write through the asyncio face;
``workers`` and ``throughput`` read through the synchronous one (the dashboard's).
"""

from __future__ import annotations

import abc
import asyncio
import json
import logging
import os
import secrets
import socket
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from txqueue.core.schema import Column, ColumnType, Table
from txqueue.core.text import printable
from txqueue.errors import InvalidArgument, NotFound
from txqueue.worker.outcomes import OutcomeKind

if TYPE_CHECKING:
    from txqueue._async.database import AsyncDatabase
    from txqueue._sync.database import Database
    from txqueue.worker.observe import Stats

__all__ = [
    "DISPATCHER",
    "HEARTBEAT",
    "KEEP_THROUGHPUT",
    "WORKER",
    "DispatcherRegistration",
    "Registration",
    "ThroughputSample",
    "WorkerInfo",
    "check_heartbeat",
    "throughput",
    "workers",
]

log = logging.getLogger("txqueue.worker")

#: How often a worker or dispatcher writes its row (and a worker its throughput) by default.
HEARTBEAT = timedelta(seconds=5)
#: A worker not seen for this many of its heartbeats is gone.
MISSED_HEARTBEATS = 3
#: The longest a graceful shutdown waits to delete the worker's row.
REMOVE_TIMEOUT = timedelta(seconds=5)
#: How long per-minute throughput buckets are kept.
KEEP_THROUGHPUT = timedelta(hours=2)
#: The kinds of registered process.
WORKER, DISPATCHER = "worker", "dispatcher"

WORKERS = "txqueue_workers"
DISPATCHERS = "txqueue_dispatchers"
THROUGHPUT = "txqueue_worker_throughput"

_S, _I, _T = ColumnType.STRING, ColumnType.INT64, ColumnType.TIMESTAMP


def _members(name: str, listed: str) -> Table:
    """A table of live processes; ``listed`` holds a JSON list of the queues or pipelines."""
    return Table(
        name,
        tuple(
            Column(column, kind, False)
            for column, kind in (
                ("id", _S),
                ("host", _S),
                ("pid", _I),
                (listed, _S),
                ("concurrency", _I),
                ("in_flight", _I),
                ("started", _T),
                ("last_seen", _T),
                ("expires", _T),  # last_seen + MISSED_HEARTBEATS of its own heartbeats
            )
        ),
        ("id",),
    )


TABLES = (
    _members(WORKERS, "queues"),
    Table(
        THROUGHPUT,
        tuple(
            Column(name, kind, False)
            for name, kind in (
                ("worker", _S),
                ("queue", _S),
                ("minute", _T),
                ("handled", _I),
                ("failed", _I),
                ("dead_lettered", _I),
            )
        ),
        ("worker", "queue", "minute"),
    ),
)
DISPATCHER_TABLES = (_members(DISPATCHERS, "pipelines"),)
_THROUGHPUT_COLUMNS = tuple(c.name for c in TABLES[1].columns)
#: Which outcomes count as handled, failed and dead-lettered.
_KINDS = (
    (OutcomeKind.ACKED, OutcomeKind.DISCARDED),
    (OutcomeKind.RETRIED, OutcomeKind.LEASE_LOST),
    (OutcomeKind.DEAD_LETTERED,),
)
#: The registry's SQL (GoogleSQL, run through the faces' ``execute_internal_*``).
_EXPIRED = "DELETE FROM {table} WHERE expires < @now"
_OLD_BUCKETS = f"DELETE FROM {THROUGHPUT} WHERE minute < @before"
_LIVE = (
    "SELECT id, host, pid, {listed}, concurrency, in_flight, started, last_seen"
    " FROM {table} WHERE expires >= @now ORDER BY started, id"
)
_THROUGHPUT = (
    "SELECT queue, minute, SUM(handled), SUM(failed), SUM(dead_lettered)"
    f" FROM {THROUGHPUT} WHERE minute >= @since{{only}}"
    " GROUP BY queue, minute ORDER BY queue, minute"
)


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One live worker or dispatcher (``kind``), as its last heartbeat described it: a worker
    lists its ``queues``, a dispatcher the ``pipelines`` it delivers for."""

    id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    concurrency: int
    in_flight: int
    started: datetime
    last_seen: datetime
    kind: str = WORKER
    pipelines: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ThroughputSample:
    """What the workers got through on one queue in one minute (starting at ``minute``):
    ``handled`` (acked, or discarded by ``resend_after``), ``failed`` (retried, or the lease
    lost) and ``dead_lettered``, summed over every worker."""

    queue: str
    minute: datetime
    handled: int
    failed: int
    dead_lettered: int


def check_heartbeat(value: object) -> timedelta:
    """A heartbeat interval: a positive timedelta of at most a minute."""
    if not isinstance(value, timedelta) or not timedelta(0) < value <= timedelta(minutes=1):
        raise InvalidArgument(
            f"heartbeat must be a datetime.timedelta above 0 and at most 1 minute, got {value!r}"
        )
    return value


def _now(clock_value: datetime | None) -> datetime:
    return clock_value if clock_value is not None else datetime.now(timezone.utc)


def _minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


class _Heartbeat(abc.ABC):
    """A live process's row: ``run`` beats until cancelled, ``remove`` deletes the row at a
    graceful shutdown. Subclasses say what the row lists (both hooks are abstract, so a kind
    missing one is refused when made) and what else a beat writes."""

    kind = WORKER
    tables: tuple[Table, ...] = TABLES
    logger = log

    def __init__(self, database: AsyncDatabase, concurrency: int, heartbeat: timedelta) -> None:
        self.database = database
        self.concurrency = concurrency
        self.heartbeat = check_heartbeat(heartbeat)
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.id = f"{self.host}:{self.pid}:{secrets.token_hex(4)}"
        self.started = _now(database.now())
        self._ready = False  # the tables exist
        self._written = False  # the row was written at least once
        members = self.tables[0]
        self._table = members.name
        self._columns = tuple(c.name for c in members.columns)

    async def run(self) -> None:
        """Beat now and every ``heartbeat`` until cancelled; a failure is logged, never raised."""
        while True:
            try:
                await self.beat()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the database down, a bug: the process goes on
                self.logger.warning(
                    "%s heartbeat failed: %s",
                    self.kind,
                    printable(error),
                    extra={self.kind: self.id},
                )
            await asyncio.sleep(self.heartbeat.total_seconds())

    @abc.abstractmethod
    async def listed(self) -> list[str]:
        """The queues or pipelines the row lists."""

    @abc.abstractmethod
    def in_flight(self) -> int:
        """The messages or deliveries being handled now."""

    def _prepare(self, now: datetime) -> Any:
        """What this beat writes beside the row (a worker's throughput), computed before it."""
        return None

    async def _write_more(  # noqa: B027 (optional: a kind that writes no more keeps it)
        self, transaction: Any, now: datetime, prepared: Any
    ) -> None:
        """Write what `_prepare` computed, in the beat's transaction."""

    def _written_more(self, now: datetime) -> None:  # noqa: B027 (optional, as _write_more)
        """The beat committed."""

    async def beat(self) -> None:
        """Write the row (and what else the kind keeps); delete rows of the gone."""
        if not self._ready:
            await self.database.ensure_internal_tables(self.tables)
            self._ready = True
        now = _now(self.database.now())
        prepared = self._prepare(now)
        row = (
            self.id,
            self.host,
            self.pid,
            json.dumps(await self.listed()),
            self.concurrency,
            self.in_flight(),
            self.started,
            now,
            now + self.heartbeat * MISSED_HEARTBEATS,
        )

        async def write(transaction: Any) -> None:
            await transaction.insert_or_update(self._table, self._columns, [row])
            await self._write_more(transaction, now, prepared)
            await transaction.execute_internal_update(
                _EXPIRED.format(table=self._table), {"now": now}
            )

        await self.database.run_in_transaction(write)
        self._written = True
        self._written_more(now)

    async def remove(self) -> None:
        """Delete the row (a graceful shutdown); a failure is logged, not raised."""
        if not self._written:
            return
        try:  # bounded: a database that is down must not hold the shutdown up
            await asyncio.wait_for(self._remove(), REMOVE_TIMEOUT.total_seconds())
        except Exception as error:
            self.logger.warning(
                "could not remove the %s's registry row: %s",
                self.kind,
                printable(error),
                extra={self.kind: self.id},
            )

    async def _remove(self) -> None:
        await self.beat()  # the last counts first
        async with self.database.batch() as batch:
            batch.delete(self._table, [(self.id,)])


class Registration(_Heartbeat):
    """A running worker's row and throughput. Its throughput buckets stay after it left:
    they are history."""

    def __init__(
        self,
        database: AsyncDatabase,
        stats: Stats,
        queues: Sequence[str],
        concurrency: int,
        heartbeat: timedelta = HEARTBEAT,
    ) -> None:
        super().__init__(database, concurrency, heartbeat)
        self.stats = stats
        self.queues = list(queues)
        self._counted: dict[str, tuple[int, ...]] = {q: (0, 0, 0) for q in self.queues}
        self._buckets: dict[tuple[str, datetime], list[int]] = {}  # unwritten or current

    async def listed(self) -> list[str]:
        return self.queues

    def in_flight(self) -> int:
        return sum(q.running for q in self.stats.queues.values())

    def _count(self, now: datetime) -> None:
        """Add what happened since the last beat to the current minute's buckets."""
        minute = _minute(now)
        outcomes: dict[str, Counter[str]] = {}  # outcomes name a queue as its table does
        for name, counted in list(self.stats.queues.items()):
            outcomes.setdefault(name.lower(), Counter()).update(counted.outcomes)
        for queue in self.queues:
            found = outcomes.get(queue.lower(), Counter())
            totals = tuple(sum(found[k.value] for k in kinds) for kinds in _KINDS)
            before = self._counted[queue]
            if totals != before:
                bucket = self._buckets.setdefault((queue, minute), [0, 0, 0])
                for i in range(3):
                    bucket[i] += totals[i] - before[i]
                self._counted[queue] = totals

    def _prepare(self, now: datetime) -> Any:
        self._count(now)
        return [
            (self.id, queue, minute, *counts) for (queue, minute), counts in self._buckets.items()
        ]

    async def _write_more(self, transaction: Any, now: datetime, prepared: Any) -> None:
        if prepared:
            await transaction.insert_or_update(THROUGHPUT, _THROUGHPUT_COLUMNS, prepared)
        await transaction.execute_internal_update(_OLD_BUCKETS, {"before": now - KEEP_THROUGHPUT})

    def _written_more(self, now: datetime) -> None:
        current = _minute(now)  # written: only the current minute may still grow
        self._buckets = {k: v for k, v in self._buckets.items() if k[1] >= current}


class DispatcherRegistration(_Heartbeat):
    """A running dispatcher's row: the pipelines it delivers for (``await pipelines()``, the
    names it read last) and the deliveries it has in flight (``in_flight()``)."""

    kind = DISPATCHER
    tables = DISPATCHER_TABLES
    logger = logging.getLogger("txqueue.events")

    def __init__(
        self,
        database: AsyncDatabase,
        concurrency: int,
        pipelines: Callable[[], Awaitable[Sequence[str]]],
        in_flight: Callable[[], int],
        heartbeat: timedelta = HEARTBEAT,
    ) -> None:
        super().__init__(database, concurrency, heartbeat)
        self._pipelines = pipelines
        self._in_flight = in_flight

    async def listed(self) -> list[str]:
        return sorted(await self._pipelines())

    def in_flight(self) -> int:
        return self._in_flight()


def _exists(db: Database, *names: str) -> bool:
    try:
        for name in names:
            db.table(name)
    except (NotFound, InvalidArgument):  # missing (a reserved name is refused, not found)
        return False
    return True


def _live(db: Database, table: str, listed: str, kind: str, now: datetime) -> list[WorkerInfo]:
    if not _exists(db, table):
        return []
    with db.snapshot() as snapshot:
        rows = snapshot.execute_internal_sql(_LIVE.format(table=table, listed=listed), {"now": now})
    found = []
    for identifier, host, pid, names, concurrency, in_flight, started, last_seen in rows:
        listing = tuple(json.loads(names))
        found.append(
            WorkerInfo(
                id=identifier,
                host=host,
                pid=int(pid),
                queues=listing if kind == WORKER else (),
                concurrency=int(concurrency),
                in_flight=int(in_flight),
                started=started,
                last_seen=last_seen,
                kind=kind,
                pipelines=listing if kind == DISPATCHER else (),
            )
        )
    return found


def workers(db: Database) -> list[WorkerInfo]:
    """The live workers and dispatchers (seen within their last three heartbeats), oldest
    first."""
    now = _now(db.now())
    found = _live(db, WORKERS, "queues", WORKER, now)
    found += _live(db, DISPATCHERS, "pipelines", DISPATCHER, now)
    return sorted(found, key=lambda info: (info.started, info.id))


def throughput(
    db: Database, *, since: timedelta = timedelta(hours=1), queue: str | None = None
) -> list[ThroughputSample]:
    """Per-minute throughput of every queue (or of ``queue``) over the last ``since``, summed
    over the workers, by queue then minute; minutes without any outcome are absent."""
    if not isinstance(since, timedelta) or since <= timedelta(0):
        raise InvalidArgument(f"since must be a positive datetime.timedelta, got {since!r}")
    if queue is not None and not isinstance(queue, str):
        raise InvalidArgument(f"queue must be a string, got {type(queue).__name__}")
    if not _exists(db, WORKERS, THROUGHPUT):
        return []
    params: dict[str, Any] = {"since": _minute(_now(db.now()) - since)}
    only = ""
    if queue is not None:
        only = " AND LOWER(queue) = LOWER(@queue)"
        params["queue"] = queue
    with db.snapshot() as snapshot:
        rows = snapshot.execute_internal_sql(_THROUGHPUT.format(only=only), params)
    return [
        ThroughputSample(name, minute, int(handled), int(failed), int(dead))
        for name, minute, handled, failed, dead in rows
    ]
