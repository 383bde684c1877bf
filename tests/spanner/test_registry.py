"""The registry of workers and dispatchers on the Cloud Spanner emulator: its tables made from
the schema model, its rows written as mutations and read and pruned with GoogleSQL through the
faces, as on SQLite and PostgreSQL (a pinned clock decides who is alive)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import txqueue
from txqueue.testing import FakeClock
from txqueue.worker.observe import Stats
from txqueue.worker.registry import (
    DispatcherRegistration,
    Registration,
    throughput,
    workers,
)


async def _notify() -> list[str]:
    return ["notify"]


def test_workers_and_dispatchers_register_beat_age_out_and_leave(spanner_url: str) -> None:
    clock = FakeClock()
    pinned = txqueue.connect(spanner_url, clock=clock)

    async def scenario() -> None:
        database = await txqueue.connect_async(spanner_url, clock=clock)
        try:
            stats = Stats()
            stats.started(["jobs"], 2)
            worker = Registration(database, stats, ["jobs"], 2, timedelta(seconds=1))
            stats.queues["jobs"].outcomes["acked"] += 3
            stats.queues["jobs"].outcomes["retried"] += 1
            await worker.beat()
            dispatcher = DispatcherRegistration(
                database, 4, _notify, lambda: 1, timedelta(seconds=1)
            )
            await dispatcher.beat()
            listed = sorted(workers(pinned), key=lambda w: w.kind, reverse=True)
            assert [(w.kind, w.id) for w in listed] == [
                ("worker", worker.id),
                ("dispatcher", dispatcher.id),
            ]
            assert (listed[0].queues, listed[1].pipelines, listed[1].in_flight) == (
                ("jobs",),
                ("notify",),
                1,
            )
            assert listed[0].started == worker.started
            [sample] = throughput(pinned, queue="JOBS")
            assert (sample.queue, sample.handled, sample.failed) == ("jobs", 3, 1)
            clock.advance(timedelta(seconds=3.5))  # both missed three heartbeats
            assert workers(pinned) == []
            later = DispatcherRegistration(database, 4, _notify, lambda: 0, timedelta(seconds=1))
            await later.beat()  # deletes the gone dispatcher's row
            await worker.remove()  # a graceful stop deletes its own row
            assert [w.id for w in workers(pinned)] == [later.id]
            with pinned.snapshot() as snapshot:
                rows = snapshot.execute_internal_sql("SELECT id FROM txqueue_dispatchers")
            assert [row[0] for row in rows] == [later.id]
        finally:
            await database.close()

    try:
        asyncio.run(scenario())
    finally:
        pinned.close()
