"""The worker registry with real worker processes on both engines: a worker registers and
beats, shows its work in flight and its throughput, is gone at once after SIGTERM (graceful)
and ages out after SIGKILL, its row deleted by another worker's heartbeat."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import txqueue
from txqueue.errors import InvalidArgument
from txqueue.worker.registry import THROUGHPUT, WORKERS, throughput, workers

SCRIPT = Path(__file__).with_name("registry_worker.py")
DDL = {
    "googlesql": "CREATE QUEUE Jobs (Id INT64 NOT NULL, Payload BYTES(MAX) NOT NULL)"
    " PRIMARY KEY (Id)",
    "postgresql": "CREATE QUEUE jobs (id bigint NOT NULL, payload bytea NOT NULL,"
    " PRIMARY KEY (id))",
}


def wait_until(predicate: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not true within {timeout} s: {what}")
        time.sleep(0.05)


@pytest.fixture
def db(database_url: str) -> Iterator[txqueue.Database]:
    with txqueue.connect(database_url) as db:
        db.update_ddl([DDL["postgresql" if db.dialect == "postgresql" else "googlesql"]])
        yield db


@pytest.fixture
def start(database_url: str, tmp_path: Path) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            [sys.executable, str(SCRIPT), database_url, str(tmp_path / "gate")],
            stderr=subprocess.PIPE,
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()
        if process.stderr:
            process.stderr.close()


def _mine(db: txqueue.Database, process: subprocess.Popen[bytes]) -> Any:
    return next((w for w in workers(db) if w.pid == process.pid), None)


def _rows(db: txqueue.Database) -> int:
    with db.snapshot() as snapshot:
        return int(snapshot.execute_engine_sql(f"SELECT count(*) FROM {WORKERS}").one()[0])


def test_a_worker_registers_beats_shows_work_and_leaves_gracefully(
    db: txqueue.Database, start: Callable[[], subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    assert workers(db) == [] and throughput(db) == []  # no worker ever ran: no tables yet
    process = start()
    first = wait_until(lambda: _mine(db, process), "the worker registered")
    assert (first.queues, first.concurrency, first.in_flight) == (("jobs",), 3, 0)
    assert first.id.startswith(f"{first.host}:{process.pid}:")
    wait_until(lambda: (_mine(db, process) or first).last_seen > first.last_seen, "a heartbeat")

    with db.batch() as batch:
        batch.send("jobs", 1, b"x")
        batch.send("jobs", 2, b"y")
    wait_until(lambda: (_mine(db, process) or first).in_flight == 2, "two messages in flight")
    (tmp_path / "gate").touch()
    wait_until(lambda: (_mine(db, process) or first).in_flight == 0, "nothing in flight")
    samples = wait_until(
        lambda: [s for s in throughput(db, queue="jobs") if s.handled], "throughput recorded"
    )
    assert sum(s.handled for s in samples) == 2
    assert {(s.queue, s.failed, s.dead_lettered) for s in samples} == {("jobs", 0, 0)}
    assert throughput(db, queue="other") == []

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    assert workers(db) == []
    assert _rows(db) == 0  # deleted at shutdown, not merely aged out
    with db.snapshot() as snapshot:
        kept = snapshot.execute_engine_sql(f"SELECT sum(handled) FROM {THROUGHPUT}").one()[0]
    assert int(kept) == 2  # the throughput stays after the worker left


def test_a_killed_worker_ages_out_and_a_later_heartbeat_deletes_it(
    db: txqueue.Database, start: Callable[[], subprocess.Popen[bytes]]
) -> None:
    killed = start()
    wait_until(lambda: _mine(db, killed), "the worker registered")
    killed.kill()
    killed.wait()
    assert _mine(db, killed) is not None or _rows(db) == 1  # its row is still there ...
    wait_until(lambda: _mine(db, killed) is None, "the killed worker aged out")  # ... unlisted
    assert _rows(db) == 1
    survivor = start()
    wait_until(lambda: _mine(db, survivor), "another worker registered")
    wait_until(lambda: _rows(db) == 1, "the killed worker's row deleted")
    assert [w.pid for w in workers(db)] == [survivor.pid]


def test_bad_arguments_are_refused(db: txqueue.Database) -> None:
    with pytest.raises(InvalidArgument, match="since must be a positive"):
        throughput(db, since=timedelta(0))
    with pytest.raises(InvalidArgument, match="queue must be a string"):
        throughput(db, queue=3)  # type: ignore[arg-type]
    from txqueue.worker import App, Worker

    app = App("sqlite:///unused.db")
    app.handler("jobs")(lambda message: None)
    with pytest.raises(InvalidArgument, match=r"heartbeat must be a datetime\.timedelta"):
        Worker(app, heartbeat=timedelta(0))


def test_old_buckets_and_gone_workers_are_deleted_by_a_later_heartbeat(
    database_url: str, db: txqueue.Database
) -> None:
    """On a pinned clock: a worker that stopped beating is deleted by another's heartbeat,
    and throughput buckets older than two hours go with it."""
    import asyncio

    from txqueue.testing import FakeClock
    from txqueue.worker.observe import Stats
    from txqueue.worker.registry import Registration

    clock = FakeClock()
    pinned = txqueue.connect(database_url, clock=clock)

    async def scenario() -> None:
        database = await txqueue.connect_async(database_url, clock=clock)
        try:
            stats = Stats()
            stats.started(["jobs"], 1)
            gone = Registration(database, stats, ["jobs"], 1, timedelta(seconds=1))
            stats.queues["jobs"].outcomes["acked"] += 3
            stats.queues["jobs"].outcomes["dead_lettered"] += 1
            await gone.beat()
            [sample] = throughput(pinned)
            assert (sample.handled, sample.failed, sample.dead_lettered) == (3, 0, 1)
            assert [w.id for w in workers(pinned)] == [gone.id]
            clock.advance(timedelta(seconds=2.5))  # missed two heartbeats: still listed
            assert [w.id for w in workers(pinned)] == [gone.id]
            clock.advance(timedelta(seconds=1))  # missed three: gone
            assert workers(pinned) == []
            assert _rows(pinned) == 1
            clock.advance(timedelta(hours=2))
            later = Registration(database, Stats(), ["jobs"], 1, timedelta(seconds=1))
            await later.beat()
            assert [w.id for w in workers(pinned)] == [later.id]
            assert _rows(pinned) == 1  # the gone worker's row was deleted
            assert throughput(pinned, since=timedelta(hours=3)) == []  # pruned
        finally:
            await database.close()

    try:
        asyncio.run(scenario())
    finally:
        pinned.close()


def test_a_failing_heartbeat_is_logged_and_the_beats_go_on(
    database_url: str, db: txqueue.Database, caplog: pytest.LogCaptureFixture
) -> None:
    import asyncio

    from txqueue.worker.observe import Stats
    from txqueue.worker.registry import Registration

    async def scenario() -> None:
        database = await txqueue.connect_async(database_url)
        try:
            registration = Registration(database, Stats(), ["jobs"], 1, timedelta(seconds=0.05))
            await registration.beat()
            await database.run_in_transaction(
                lambda t: t.execute_engine_update(f"DROP TABLE {WORKERS}")
            )
            beats = asyncio.create_task(registration.run())
            deadline = time.monotonic() + 10
            while len([r for r in caplog.records if "heartbeat failed" in r.message]) < 3:
                assert not beats.done(), "the heartbeat loop ended"
                assert time.monotonic() < deadline, "no failed heartbeat was logged"
                await asyncio.sleep(0.02)
            assert not beats.done()
            beats.cancel()
            await asyncio.gather(beats, return_exceptions=True)
            await registration.remove()  # logged too, not raised
        finally:
            await database.close()

    with caplog.at_level("WARNING", logger="txqueue.worker"):
        asyncio.run(scenario())
    assert any("registry row" in r.message for r in caplog.records)
