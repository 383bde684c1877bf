"""A PostgreSQL queue drained with statistics taken while it was empty, and with fresh ones.

    python benchmarks/empty_queue_statistics.py --database postgresql://user@host/db

Autovacuum's ANALYZE of an idle queue records an empty table; when a burst arrives after
it, the planner may choose plans for that empty table. Each round loads ``--messages``
messages into ``StatementStatsQ`` (random keys, as the shared harness's adapter makes)
either after an ``ANALYZE`` of the emptied table ("empty") or before one ("loaded"), then
one process drains them through the public API in batches of ``--batch`` (one ack
transaction per batch). Prints, per state, the median rate and the seconds spent in receives and in acks.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import timedelta

import psycopg

import txqueue

QUEUE = "StatementStatsQ"
DDL = f"CREATE QUEUE {QUEUE} (Id STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"


def load(url: str, messages: int, analyze_first: bool) -> None:
    """Empty the queue, then load it, with ANALYZE before the load or after it."""
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'DELETE FROM "{QUEUE.lower()}"')
        if analyze_first:
            connection.execute(f'ANALYZE "{QUEUE.lower()}"')
        connection.execute(
            f'INSERT INTO "{QUEUE.lower()}" ("id", "payload")'
            " SELECT md5(random()::text || g), %s FROM generate_series(1, %s) AS g",
            [os.urandom(100), messages],
        )
        if not analyze_first:
            connection.execute(f'ANALYZE "{QUEUE.lower()}"')


def drain(db: txqueue.Database, messages: int, batch: int) -> tuple[float, float, float]:
    """Drain ``messages``: (rate, seconds in receives, seconds in acks)."""
    received = receiving = acking = 0.0
    started = time.perf_counter()
    while received < messages:
        batch_started = time.perf_counter()
        held = db.receive_now(QUEUE, max_batch_size=batch, lease_duration=timedelta(minutes=1))
        acks_started = time.perf_counter()
        receiving += acks_started - batch_started

        def work(transaction: txqueue.Transaction, held: list[txqueue.Message] = held) -> None:
            for message in held:
                transaction.ack(QUEUE, message.key, lease_token=message.lease_token)

        db.run_in_transaction(work)
        acking += time.perf_counter() - acks_started
        received += len(held)
    return received / (time.perf_counter() - started), receiving, acking


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", required=True, help="postgresql://…")
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args()
    with txqueue.connect(arguments.database, dialect="googlesql") as db:
        db.update_ddl([DDL.replace("CREATE QUEUE", "CREATE QUEUE IF NOT EXISTS")])
        figures: dict[str, list[tuple[float, float, float]]] = {"empty": [], "loaded": []}
        for _ in range(arguments.repeats):
            for state in figures:  # alternating, so a slow spell weighs on both
                load(arguments.database, arguments.messages, analyze_first=state == "empty")
                figures[state].append(drain(db, arguments.messages, arguments.batch))
    for state, runs in figures.items():
        rate, receiving, acking = (statistics.median(run[i] for run in runs) for i in range(3))
        print(
            f"statistics {state:6}  {rate:8,.0f} msg/s   receives {receiving:5.2f} s"
            f"   acks {acking:5.2f} s   (rates {[round(run[0]) for run in runs]})"
        )


if __name__ == "__main__":
    main()
