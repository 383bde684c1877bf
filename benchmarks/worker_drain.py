"""One worker process draining a backlog: messages/s and CPU per message, by prefetch.

    python benchmarks/worker_drain.py --database sqlite:///tmp/drain.db
    python benchmarks/worker_drain.py --database postgresql://user@host/db --prefetch 0,16

Fills the queue with ``--messages`` (batches of 500), then runs ``txqueue.worker.Worker`` in
this process with a no-op async handler until every message was handled, once per prefetch
value, the values alternating for ``--repeats`` rounds; prints each run and the medians. The
worker's start (pool, first receive) is inside the timed span. CPU is this process's (the
worker's threads included); on PostgreSQL the server's share is not in it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid

import txqueue
from txqueue.worker import Worker

DDL = "CREATE QUEUE DrainQ (Id STRING(64) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"


def fill(url: str, count: int) -> None:
    db = txqueue.connect(url, dialect="googlesql")
    if "drainq" not in {t.name.lower() for t in db.queues()}:
        db.update_ddl([DDL])
    db.run_in_transaction(lambda t: t.delete("DrainQ", None))
    for start in range(0, count, 500):
        with db.batch() as batch:
            for _ in range(start, min(count, start + 500)):
                batch.send("DrainQ", (uuid.uuid4().hex,), b"x" * 100)
    db.close()


async def drain(url: str, count: int, concurrency: int, prefetch: int) -> tuple[float, float]:
    """Seconds and CPU seconds until ``count`` messages were handled."""
    app = txqueue.App(url)
    handled = 0
    done = asyncio.Event()

    @app.handler("DrainQ")
    async def handle(message: txqueue.Message) -> None:
        nonlocal handled
        handled += 1
        if handled == count:
            done.set()

    worker = Worker(app, concurrency=concurrency, prefetch=prefetch)
    started, cpu = time.perf_counter(), os.times()
    task = asyncio.create_task(worker.run())
    await done.wait()
    seconds, after = time.perf_counter() - started, os.times()
    worker.stop()
    await task
    return seconds, (after.user - cpu.user) + (after.system - cpu.system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", required=True)
    parser.add_argument("--messages", type=int, default=30000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--prefetch", default="0,16", help="comma-separated values to compare")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    values = [int(v) for v in args.prefetch.split(",")]
    rates: dict[int, list[float]] = {v: [] for v in values}
    costs: dict[int, list[float]] = {v: [] for v in values}
    for round_ in range(args.repeats):
        for prefetch in values:
            fill(args.database, args.messages)
            seconds, cpu = asyncio.run(
                drain(args.database, args.messages, args.concurrency, prefetch)
            )
            rates[prefetch].append(args.messages / seconds)
            costs[prefetch].append(cpu / args.messages * 1e6)
            print(
                f"round {round_ + 1} prefetch {prefetch:3d}: {rates[prefetch][-1]:8,.0f}/s,"
                f" {costs[prefetch][-1]:5.1f} us CPU per message",
                flush=True,
            )
    for prefetch in values:
        print(
            f"median prefetch {prefetch:3d}: {statistics.median(rates[prefetch]):8,.0f}/s,"
            f" {statistics.median(costs[prefetch]):5.1f} us CPU per message"
        )


if __name__ == "__main__":
    main()
