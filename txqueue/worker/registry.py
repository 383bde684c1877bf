"""The worker registry: which workers are alive, and how much each queue got through.

Every worker (``txqueue worker``, ``Worker.run``) keeps a row in ``txqueue_workers`` — host,
pid, queues, concurrency, messages in flight, when it started and was last seen — written at
start and on every heartbeat (every few seconds), and deleted when it shuts down gracefully.
A worker that dies without shutting down (SIGKILL, power loss) stops beating: once it has
missed three heartbeats it is no longer listed, and the next heartbeat of any worker deletes
its row.

Each heartbeat also adds what the worker did since the previous one (handled, failed,
dead-lettered) to its per-minute buckets of each queue in ``txqueue_worker_throughput``;
buckets older than ``KEEP_THROUGHPUT`` are pruned. A failed heartbeat is logged and never
stops the worker; its counts are written by the next one (the worker keeps the minute's
totals, and each write sets them).

The runtime writes through the asyncio face; ``workers`` and ``throughput`` read through the
synchronous one (the dashboard's).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import socket
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from txqueue.core.schema import Column, ColumnType, Table
from txqueue.core.text import printable
from txqueue.drivers.engines import traits_named
from txqueue.drivers.traits import EngineTraits
from txqueue.errors import InvalidArgument, NotFound
from txqueue.worker.outcomes import OutcomeKind

if TYPE_CHECKING:
    from txqueue._async.database import AsyncDatabase
    from txqueue._sync.database import Database
    from txqueue.worker.observe import Stats

__all__ = [
    "HEARTBEAT",
    "KEEP_THROUGHPUT",
    "Registration",
    "ThroughputSample",
    "WorkerInfo",
    "check_heartbeat",
    "throughput",
    "workers",
]

log = logging.getLogger("txqueue.worker")

#: How often a worker writes its row and throughput by default.
HEARTBEAT = timedelta(seconds=5)
#: A worker not seen for this many of its heartbeats is gone.
MISSED_HEARTBEATS = 3
#: The longest a graceful shutdown waits to delete the worker's row.
REMOVE_TIMEOUT = timedelta(seconds=5)
#: How long per-minute throughput buckets are kept.
KEEP_THROUGHPUT = timedelta(hours=2)

WORKERS = "txqueue_workers"
THROUGHPUT = "txqueue_worker_throughput"

_S, _I, _T = ColumnType.STRING, ColumnType.INT64, ColumnType.TIMESTAMP
TABLES = (
    Table(
        WORKERS,
        tuple(
            Column(name, kind, False)
            for name, kind in (
                ("id", _S),
                ("host", _S),
                ("pid", _I),
                ("queues", _S),  # a JSON list of names
                ("concurrency", _I),
                ("in_flight", _I),
                ("started", _T),
                ("last_seen", _T),
                ("expires", _T),  # last_seen + MISSED_HEARTBEATS of its own heartbeats
            )
        ),
        ("id",),
    ),
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
_WORKER_COLUMNS = tuple(c.name for c in TABLES[0].columns)
_THROUGHPUT_COLUMNS = tuple(c.name for c in TABLES[1].columns)
#: Which outcomes count as handled, failed and dead-lettered.
_KINDS = (
    (OutcomeKind.ACKED, OutcomeKind.DISCARDED),
    (OutcomeKind.RETRIED, OutcomeKind.LEASE_LOST),
    (OutcomeKind.DEAD_LETTERED,),
)


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One live worker, as its last heartbeat described it."""

    id: str
    host: str
    pid: int
    queues: tuple[str, ...]
    concurrency: int
    in_flight: int
    started: datetime
    last_seen: datetime


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


class Registration:
    """A running worker's row and throughput: ``run`` beats until cancelled, ``remove``
    deletes the row at a graceful shutdown."""

    def __init__(
        self,
        database: AsyncDatabase,
        stats: Stats,
        queues: Sequence[str],
        concurrency: int,
        heartbeat: timedelta = HEARTBEAT,
    ) -> None:
        self.database = database
        self.stats = stats
        self.queues = list(queues)
        self.concurrency = concurrency
        self.heartbeat = check_heartbeat(heartbeat)
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.id = f"{self.host}:{self.pid}:{secrets.token_hex(4)}"
        self.started = _now(database.now())
        self._ready = False  # the tables exist
        self._written = False  # the row was written at least once
        self._counted: dict[str, tuple[int, ...]] = {q: (0, 0, 0) for q in self.queues}
        self._buckets: dict[tuple[str, datetime], list[int]] = {}  # unwritten or current

    async def run(self) -> None:
        """Beat now and every ``heartbeat`` until cancelled; a failure is logged, never raised."""
        while True:
            try:
                await self.beat()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the database down, a bug: the worker goes on
                log.warning(
                    "worker heartbeat failed: %s", printable(error), extra={"worker": self.id}
                )
            await asyncio.sleep(self.heartbeat.total_seconds())

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

    async def beat(self) -> None:
        """Write the worker's row and its buckets; delete gone workers and old buckets."""
        if not self._ready:
            await self.database.ensure_internal_tables(TABLES)
            self._ready = True
        now = _now(self.database.now())
        self._count(now)
        in_flight = sum(q.running for q in self.stats.queues.values())
        row = (
            self.id,
            self.host,
            self.pid,
            json.dumps(self.queues),
            self.concurrency,
            in_flight,
            self.started,
            now,
            now + self.heartbeat * MISSED_HEARTBEATS,
        )
        buckets = [
            (self.id, queue, minute, *counts) for (queue, minute), counts in self._buckets.items()
        ]
        engine = traits_named(self.database.engine)

        async def write(transaction: Any) -> None:
            await transaction.insert_or_update(WORKERS, _WORKER_COLUMNS, [row])
            if buckets:
                await transaction.insert_or_update(THROUGHPUT, _THROUGHPUT_COLUMNS, buckets)
            marker = engine.marker
            await transaction.execute_engine_update(
                f"DELETE FROM {WORKERS} WHERE expires < {marker}", [engine.engine_time(now)]
            )
            await transaction.execute_engine_update(
                f"DELETE FROM {THROUGHPUT} WHERE minute < {marker}",
                [engine.engine_time(now - KEEP_THROUGHPUT)],
            )

        await self.database.run_in_transaction(write)
        self._written = True
        current = _minute(now)  # written: only the current minute may still grow
        self._buckets = {k: v for k, v in self._buckets.items() if k[1] >= current}

    async def remove(self) -> None:
        """Delete the worker's row (a graceful shutdown); a failure is logged, not raised.
        Its throughput buckets stay: they are history."""
        if not self._written:
            return
        try:  # bounded: a database that is down must not hold the shutdown up
            await asyncio.wait_for(self._remove(), REMOVE_TIMEOUT.total_seconds())
        except Exception as error:
            log.warning(
                "could not remove the worker's registry row: %s",
                printable(error),
                extra={"worker": self.id},
            )

    async def _remove(self) -> None:
        await self.beat()  # the last counts first
        async with self.database.batch() as batch:
            batch.delete(WORKERS, [(self.id,)])


_read_time = EngineTraits.read_time


def _exists(db: Database) -> bool:
    try:
        db.table(WORKERS)
        db.table(THROUGHPUT)
    except (NotFound, InvalidArgument):  # missing (a reserved name is refused, not found)
        return False
    return True


def workers(db: Database) -> list[WorkerInfo]:
    """The live workers (seen within their last three heartbeats), oldest first."""
    if not _exists(db):
        return []
    engine = traits_named(db.engine)
    now = _now(db.now())
    with db.snapshot() as snapshot:
        rows = snapshot.execute_engine_sql(
            "SELECT id, host, pid, queues, concurrency, in_flight, started, last_seen"
            f" FROM {WORKERS} WHERE expires >= {engine.marker} ORDER BY started, id",
            [engine.engine_time(now)],
        )
    return [
        WorkerInfo(
            id=identifier,
            host=host,
            pid=int(pid),
            queues=tuple(json.loads(queues)),
            concurrency=int(concurrency),
            in_flight=int(in_flight),
            started=_read_time(started),
            last_seen=_read_time(last_seen),
        )
        for identifier, host, pid, queues, concurrency, in_flight, started, last_seen in rows
    ]


def throughput(
    db: Database, *, since: timedelta = timedelta(hours=1), queue: str | None = None
) -> list[ThroughputSample]:
    """Per-minute throughput of every queue (or of ``queue``) over the last ``since``, summed
    over the workers, by queue then minute; minutes without any outcome are absent."""
    if not isinstance(since, timedelta) or since <= timedelta(0):
        raise InvalidArgument(f"since must be a positive datetime.timedelta, got {since!r}")
    if queue is not None and not isinstance(queue, str):
        raise InvalidArgument(f"queue must be a string, got {type(queue).__name__}")
    if not _exists(db):
        return []
    engine = traits_named(db.engine)
    marker = engine.marker
    arguments: list[Any] = [engine.engine_time(_minute(_now(db.now()) - since))]
    sql = (
        "SELECT queue, minute, sum(handled), sum(failed), sum(dead_lettered)"
        f" FROM {THROUGHPUT} WHERE minute >= {marker}"
    )
    if queue is not None:
        sql += f" AND lower(queue) = lower({marker})"
        arguments.append(queue)
    sql += " GROUP BY queue, minute ORDER BY queue, minute"
    with db.snapshot() as snapshot:
        rows = snapshot.execute_engine_sql(sql, arguments)
    return [
        ThroughputSample(name, _read_time(minute), int(handled), int(failed), int(dead))
        for name, minute, handled, failed, dead in rows
    ]
