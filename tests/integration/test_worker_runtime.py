"""The worker runtime in-process, on both engines: transactional handlers, group commit of
acks, lost leases, concurrency limits, metrics. Waits poll against deadlines."""

from __future__ import annotations

import asyncio
import gc
import statistics
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

import txqueue
from txqueue.errors import FailedPrecondition, InvalidArgument
from txqueue.testing import FakeClock
from txqueue.worker import Metrics, OutcomeKind, Stats, Worker
from txqueue.worker.acks import AckBatcher

GOOGLESQL = [
    "CREATE TABLE Handled (Id INT64 NOT NULL, Note STRING(MAX)) PRIMARY KEY (Id)",
    "CREATE QUEUE Tasks (Id INT64 NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)",
    "CREATE QUEUE Other (Id INT64 NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)",
]
POSTGRESQL = [
    "CREATE TABLE handled (id bigint NOT NULL, note varchar, PRIMARY KEY (id))",
    "CREATE QUEUE tasks (id bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))",
    "CREATE QUEUE other (id bigint NOT NULL, payload bytea NOT NULL, PRIMARY KEY (id))",
]


async def _database(url: str, clock: FakeClock | None = None) -> txqueue.AsyncDatabase:
    db = await txqueue.connect_async(url, clock=clock)
    await db.update_ddl(POSTGRESQL if db.dialect == "postgresql" else GOOGLESQL)
    return db


async def _send(db: txqueue.AsyncDatabase, queue: str, keys: range) -> None:
    async with db.batch() as batch:
        for key in keys:
            batch.send(queue, (key,), b"{}")


async def _receive(db: txqueue.AsyncDatabase, count: int) -> list[txqueue.Message]:
    messages = []
    async for message in db.receive("Tasks", max_duration="5s", max_batch_size=count):
        messages.append(message)
        if message.last_in_batch:
            break
    return messages


async def _until(condition: Callable[[], Any], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def _serve(app: txqueue.App, **options: Any) -> tuple[Worker, asyncio.Task[None]]:
    worker = Worker(app, **options)
    return worker, asyncio.create_task(worker.run())


async def test_sync_transactional_handlers_through_the_worker(database_url: str) -> None:
    db = await _database(database_url)
    app = txqueue.App(database_url)

    @app.handler("Tasks", transactional=True)
    def record(message: txqueue.Message, txn: txqueue.Transaction) -> None:
        assert isinstance(txn, txqueue.Transaction)
        txn.insert("Handled", ("Id", "Note"), [(message.key[0], threading.current_thread().name)])

    await _send(db, "Tasks", range(20))
    worker, running = await _serve(app, concurrency=4)
    await _until(lambda: worker.stats.total(OutcomeKind.ACKED) == 20, 30, "20 acks")
    worker.stop()
    await running
    async with db.snapshot() as snapshot:
        rows = list(await snapshot.execute_sql("SELECT id, note FROM handled ORDER BY id"))
    assert [r[0] for r in rows] == list(range(20))
    assert all(str(r[1]).startswith("txqueue-handler") for r in rows), (
        "sync handlers run on the pool"
    )
    info = await db.queue_info("Tasks")
    assert info.ready + info.leased + info.scheduled == 0
    await db.close()


async def test_concurrency_is_limited_per_queue_and_in_total(database_url: str) -> None:
    db = await _database(database_url)
    app = txqueue.App(database_url)
    running = {"Tasks": 0, "Other": 0, "total": 0}
    peaks = {"Tasks": 0, "Other": 0, "total": 0}
    release = asyncio.Event()

    def handler_for(queue: str) -> Callable[[txqueue.Message], Any]:
        async def handle(message: txqueue.Message) -> None:
            running[queue] += 1
            running["total"] += 1
            for name in running:
                peaks[name] = max(peaks[name], running[name])
            await release.wait()
            running[queue] -= 1
            running["total"] -= 1

        return handle

    app.handler("Tasks", concurrency=2)(handler_for("Tasks"))
    app.handler("Other")(handler_for("Other"))
    await _send(db, "Tasks", range(10))
    await _send(db, "Other", range(10))
    worker, task = await _serve(app, concurrency=5)
    await _until(lambda: running["total"] == 5, 20, "five running handlers")
    await asyncio.sleep(0.3)  # give a broken limit the chance to show
    assert peaks["total"] == 5 and peaks["Tasks"] <= 2
    release.set()
    await _until(lambda: worker.stats.total(OutcomeKind.ACKED) == 20, 30, "20 acks")
    worker.stop()
    await task
    # Which queue's messages took the five places first is a race (both receive ahead).
    assert peaks["total"] == 5 and 1 <= peaks["Tasks"] <= 2
    await db.close()


async def test_a_lost_lease_cancels_the_async_handler_and_is_not_acked(database_url: str) -> None:
    clock = FakeClock()
    db = await _database(database_url, clock)
    app = txqueue.App(database_url, clock=clock)
    started, cancelled = [], []

    @app.handler("Tasks", lease_duration=timedelta(seconds=1))
    async def stuck(message: txqueue.Message) -> None:
        started.append(message.delivery_count)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(message.delivery_count)
            raise

    await _send(db, "Tasks", range(1))
    worker, task = await _serve(app, grace=timedelta(0))
    await _until(lambda: started == [1], 20, "the handler to start")
    clock.advance(timedelta(hours=1))  # the lease runs out before the next renewal
    await _until(lambda: cancelled == [1], 20, "the handler to be cancelled")
    await _until(lambda: worker.stats.total(OutcomeKind.LEASE_LOST) == 1, 5, "the outcome")
    worker.stop()
    await task
    assert worker.stats.total(OutcomeKind.ACKED) == 0
    assert worker.stats.queues["Tasks"].lease_lost == 1
    info = await db.queue_info("Tasks")
    assert info.ready + info.leased + info.scheduled == 1, "the message was not acked"
    await db.close()


async def test_renewal_keeps_a_long_handler_alive_on_the_database_clock(database_url: str) -> None:
    db = await _database(database_url)
    app = txqueue.App(database_url)
    ends: list[int] = []

    @app.handler("Tasks", lease_duration=timedelta(seconds=1))
    def slow(message: txqueue.Message) -> None:
        time.sleep(2.5)  # two and a half leases
        ends.append(message.delivery_count)

    await _send(db, "Tasks", range(1))
    worker, task = await _serve(app)
    await _until(lambda: worker.stats.total(OutcomeKind.ACKED) == 1, 20, "the ack")
    worker.stop()
    await task
    assert ends == [1]
    await db.close()


async def test_group_commit_acks_many_in_one_transaction(database_url: str) -> None:
    db = await _database(database_url)
    await _send(db, "Tasks", range(20))
    messages = await _receive(db, 20)
    assert len(messages) == 20
    batcher = AckBatcher(db, window=0.05)
    batcher.start()
    await asyncio.gather(*(batcher.ack("Tasks", m.key, m.lease_token) for m in messages))
    await batcher.close()
    assert batcher.transactions == 1
    assert (await db.queue_info("Tasks")).leased == 0
    await db.close()


async def test_a_stale_ack_does_not_fail_the_others(database_url: str) -> None:
    db = await _database(database_url)
    await _send(db, "Tasks", range(10))
    messages = await _receive(db, 10)
    [renewal] = await db.renew_lease("Tasks", [messages[3].lease_token])  # token 3 goes stale
    batcher = AckBatcher(db, window=0.05)
    batcher.start()
    results = await asyncio.gather(
        *(batcher.ack("Tasks", m.key, m.lease_token) for m in messages), return_exceptions=True
    )
    await batcher.close()
    assert isinstance(results[3], FailedPrecondition)
    assert [r for i, r in enumerate(results) if i != 3] == [None] * 9
    assert batcher.transactions == 1 + 10, "the batch, then one by one"
    info = await db.queue_info("Tasks")
    assert (info.leased, info.ready) == (1, 0), "only the stale one is left, still leased"
    assert renewal.new_token is not None
    await db.close()


async def test_metrics_and_queue_counts(database_url: str) -> None:
    db = await _database(database_url)
    app = txqueue.App(database_url)

    @app.handler("Tasks", retry=txqueue.RetryPolicy(max_attempts=1))
    def maybe(message: txqueue.Message) -> None:
        if message.key[0] == 0:
            raise RuntimeError("no")

    await _send(db, "Tasks", range(3))
    stats = Stats(Metrics())
    worker, task = await _serve(app, stats=stats)
    await _until(lambda: stats.total(OutcomeKind.ACKED) == 2, 20, "two acks")
    await _until(lambda: stats.total(OutcomeKind.DEAD_LETTERED) == 1, 20, "a dead letter")
    worker.stop()
    await task
    assert stats.metrics is not None
    text = stats.metrics.text()
    queue = (await db.queue("Tasks")).name
    assert f'txqueue_message_ack_count_total{{queue="{queue}"}} 2.0' in text
    assert (
        f'txqueue_handler_outcome_count_total{{outcome="dead_lettered",queue="{queue}"}} 1.0'
        in text
    )
    assert stats.queues[queue].info is not None, "queue counts were polled at start"
    await db.close()


async def test_missing_queue_is_a_clear_error(sqlite_url: str) -> None:
    app = txqueue.App(sqlite_url)
    app.handler("Nowhere")(lambda message: None)
    with pytest.raises(txqueue.errors.InvalidArgument, match=r"Nowhere.*does not exist"):
        await Worker(app).run()


async def _blocked_worker(
    url: str, db: txqueue.AsyncDatabase, **options: Any
) -> tuple[Worker, asyncio.Task[None], dict[str, int], asyncio.Event]:
    """A worker whose Tasks handler waits for the returned event; 20 messages sent."""
    app = txqueue.App(url)
    counts = {"running": 0, "peak": 0}
    release = asyncio.Event()

    @app.handler("Tasks")
    async def handle(message: txqueue.Message) -> None:
        counts["running"] += 1
        counts["peak"] = max(counts["peak"], counts["running"])
        await release.wait()
        counts["running"] -= 1

    await _send(db, "Tasks", range(20))
    worker, task = await _serve(app, **options)
    return worker, task, counts, release


async def _leased(db: txqueue.AsyncDatabase) -> int:
    return (await db.queue_info("Tasks")).leased


async def test_prefetch_holds_the_limit_plus_prefetch_and_releases_the_waiting_at_stop(
    database_url: str,
) -> None:
    db = await _database(database_url)
    worker, task, counts, release = await _blocked_worker(
        database_url, db, concurrency=2, prefetch=3
    )
    leased = 0

    async def five_leased() -> bool:
        nonlocal leased
        leased = await _leased(db)
        return counts["running"] == 2 and leased == 5

    deadline = time.monotonic() + 20
    while not await five_leased():
        assert time.monotonic() < deadline, f"running {counts}, leased {leased}"
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)  # give a broken limit the chance to show
    assert counts["peak"] == 2 and await _leased(db) == 5, "2 running + 3 received ahead"
    worker.stop()
    deadline = time.monotonic() + 20
    while await _leased(db) != 2:  # the 3 waiting are given back at once, before the grace
        assert time.monotonic() < deadline, "the waiting messages were not released"
        await asyncio.sleep(0.02)
    assert counts["running"] == 2
    release.set()
    await task
    info = await db.queue_info("Tasks")
    assert worker.stats.total(OutcomeKind.ACKED) == 2 and counts["peak"] == 2
    assert (info.ready, info.leased) == (18, 0)
    await db.close()


async def test_prefetch_zero_receives_only_what_can_start(database_url: str) -> None:
    db = await _database(database_url)
    worker, task, counts, release = await _blocked_worker(
        database_url, db, concurrency=3, prefetch=0
    )
    await _until(lambda: counts["running"] == 3, 20, "three running handlers")
    await asyncio.sleep(0.3)  # a receive ahead would lease more by now
    assert await _leased(db) == 3
    release.set()
    await _until(lambda: worker.stats.total(OutcomeKind.ACKED) == 20, 30, "20 acks")
    worker.stop()
    await task
    assert counts["peak"] == 3
    await db.close()


@pytest.mark.parametrize("prefetch", [-1, True, 1.5])
def test_prefetch_must_be_a_non_negative_integer(sqlite_url: str, prefetch: Any) -> None:
    app = txqueue.App(sqlite_url)
    app.handler("Tasks")(lambda message: None)
    with pytest.raises(InvalidArgument, match="prefetch must be a non-negative integer"):
        Worker(app, prefetch=prefetch)


async def test_by_default_a_queue_receives_ahead_once_its_handlers_proved_quick(
    database_url: str,
) -> None:
    db = await _database(database_url)
    app = txqueue.App(database_url)
    counts = {"running": 0, "peak": 0}
    release = asyncio.Event()

    @app.handler("Tasks", max_batch_size=6)
    async def handle(message: txqueue.Message) -> None:
        if message.key[0] < 10:
            return  # quick
        counts["running"] += 1
        counts["peak"] = max(counts["peak"], counts["running"])
        await release.wait()
        counts["running"] -= 1

    await _send(db, "Tasks", range(10))
    worker, task = await _serve(app, concurrency=2)
    await _until(lambda: worker.stats.total(OutcomeKind.ACKED) == 10, 20, "10 quick acks")
    await _send(db, "Tasks", range(10, 30))
    deadline = time.monotonic() + 20
    # Quick handlers: a full receive of 6, 2 running and 4 ahead; then none more while the 2
    # run longer than QUICK.
    while await _leased(db) != 6:
        assert time.monotonic() < deadline, f"leased {await _leased(db)}, {counts}"
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)
    assert await _leased(db) == 6 and counts == {"running": 2, "peak": 2}
    release.set()
    await _until(lambda: worker.stats.total(OutcomeKind.ACKED) == 30, 30, "30 acks")
    worker.stop()
    await task
    await db.close()


async def test_by_default_slow_handlers_get_no_prefetch(database_url: str) -> None:
    db = await _database(database_url)
    app = txqueue.App(database_url)

    @app.handler("Tasks")
    async def handle(message: txqueue.Message) -> None:
        await asyncio.sleep(0.08)  # slower than QUICK

    await _send(db, "Tasks", range(24))
    worker, task = await _serve(app, concurrency=2)
    samples = []
    while worker.stats.total(OutcomeKind.ACKED) < 24:
        samples.append(await _leased(db))
        await asyncio.sleep(0.01)
    worker.stop()
    await task
    # Held beyond the 2 running only while a finished handler's ack commits (a few ms); with
    # a prefetch of 2 most samples would show 4.
    assert statistics.median(samples) <= 2, samples
    await db.close()


async def test_a_delivery_leaves_no_reference_cycle_and_the_heap_is_frozen_while_serving(
    database_url: str,
) -> None:
    """Per-message objects are freed by reference counting, not left for the cyclic GC (whose
    full collections the worker keeps off its startup heap with gc.freeze while it serves)."""
    from txqueue.worker.leases import Lease
    from txqueue.worker.process import Handling

    db = await _database(database_url)
    app = txqueue.App(database_url)
    frozen_while_handling: list[int] = []

    @app.handler("Tasks")
    async def handle(message: txqueue.Message) -> None:
        frozen_while_handling.append(gc.get_freeze_count())

    await _send(db, "Tasks", range(50))
    assert gc.get_freeze_count() == 0
    gc.collect()
    gc.disable()
    try:
        worker, task = await _serve(app, concurrency=4)
        await _until(lambda: worker.stats.total(OutcomeKind.ACKED) == 50, 30, "50 acks")
        worker.stop()
        await task
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        kinds = {type(found) for found in gc.garbage}
        found = _garbage_summary(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert len(frozen_while_handling) == 50 and min(frozen_while_handling) > 0
    assert gc.get_freeze_count() == 0  # unfrozen when the worker stopped
    assert not kinds & {Handling, Lease, txqueue.Message}, found
    await db.close()


def _garbage_summary(garbage: list[object]) -> str:
    """What a failed cycle check found: object types by count, and where each exception in
    the garbage was raised (its traceback's frames), which names the code that made a cycle."""
    import collections
    import traceback

    counts = collections.Counter(type(item).__qualname__ for item in garbage)
    lines = [", ".join(f"{name} x{count}" for name, count in counts.most_common(25))]
    for item in garbage:
        if isinstance(item, BaseException):
            lines.append(f"{item!r}:")
            lines += traceback.format_tb(item.__traceback__)
    return "\n".join(lines)
