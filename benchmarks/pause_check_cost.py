"""What the paused-queue check costs a drain: the shipped receive against the same receive
without the check, batch by batch in one process.

    python benchmarks/pause_check_cost.py --database sqlite:///tmp/pause.db
    python benchmarks/pause_check_cost.py --database postgresql://user@host/db

A receive statement carries ``NOT EXISTS (SELECT 1 FROM txqueue_paused WHERE queue = …)``, so
that a paused queue leases nothing without a query of its own. This measures that term and
nothing else: two queues with the same messages, one receiving through the driver's
statement as shipped and one through the same statement with the term replaced by ``TRUE``
(the driver's ``not_paused`` is wrapped, for the second queue only, before any statement is
built). Batches of ``--batch`` are received with ``db.receive_now`` and acked in one
transaction, alternating between the queues batch by batch, so that the machine's noise
falls on both alike; the figures are medians over every batch of every round.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time
from collections.abc import Callable
from typing import Any

import txqueue
from txqueue.drivers.engines import parse_url

QUEUES = ("PauseCheckWith", "PauseCheckWithout")
PAYLOAD = b"x" * 100


def _without_check_for(queue: str, database_url: str) -> None:
    """Make the driver's statements of ``queue`` (only) leave the paused-queue check out."""
    engine = parse_url(database_url).engine
    module = importlib.import_module(f"txqueue.drivers.{engine}.statements")
    shipped: Callable[[Any], str] = module.not_paused

    def not_paused(table: Any) -> str:
        return "TRUE" if table.name.lower() == queue.lower() else shipped(table)

    module.not_paused = not_paused


def _fill(db: Any, count: int) -> None:
    for start in range(0, count, 1000):
        with db.batch() as batch:
            for number in range(start, min(start + 1000, count)):
                for queue in QUEUES:
                    batch.send(queue, key=(f"m{number:08d}",), payload=PAYLOAD)


def _drain_one(db: Any, queue: str, size: int) -> tuple[float, float, int]:
    """Seconds to receive one batch, seconds to ack it, and its size."""
    started = time.perf_counter()
    messages = db.receive_now(queue, max_batch_size=size)
    received = time.perf_counter()
    if messages:
        with db.batch() as batch:
            for message in messages:
                batch.ack(queue, message.key, lease_token=message.lease_token)
    return received - started, time.perf_counter() - received, len(messages)


def _check_variants(db: Any) -> None:
    """Paused, the shipped queue leases nothing and the other one still does: the two
    statements differ by the check and only by it."""
    _fill(db, 1)
    for queue in QUEUES:
        db.pause_queue(queue)
    try:
        leased = {queue: db.receive_now(queue, max_batch_size=1) for queue in QUEUES}
    finally:
        for queue in QUEUES:
            db.resume_queue(queue)
    assert not leased[QUEUES[0]] and leased[QUEUES[1]], "the variants are not as described"
    for queue in QUEUES:
        db.delete_messages(queue, [("m00000000",)], force=True)


def run(database_url: str, messages: int, rounds: int, size: int) -> None:
    _without_check_for(QUEUES[1], database_url)
    db = txqueue.connect(database_url, dialect="googlesql")
    existing = {table.name.lower() for table in db.queues()}
    ddl = [
        f"CREATE QUEUE {queue} (Id STRING(16) NOT NULL, Payload BYTES(MAX) NOT NULL)"
        " PRIMARY KEY (Id)"
        for queue in QUEUES
        if queue.lower() not in existing
    ]
    if ddl:
        db.update_ddl(ddl)
    _check_variants(db)
    receive: dict[str, list[float]] = {queue: [] for queue in QUEUES}
    total: dict[str, list[float]] = {queue: [] for queue in QUEUES}
    for round_number in range(rounds):
        _fill(db, messages)
        order = list(QUEUES) if round_number % 2 == 0 else list(reversed(QUEUES))
        while True:
            done = 0
            for queue in order:
                took, acked, count = _drain_one(db, queue, size)
                if count == size:  # full batches only: a short one is the queue's tail
                    receive[queue].append(took / count * 1e6)
                    total[queue].append((took + acked) / count * 1e6)
                done += count
            if done == 0:
                break
    db.close()
    print(f"database: {parse_url(database_url).engine}, {messages} messages x {rounds} rounds,")
    print(f"batches of {size}, alternating; µs per message, median over full batches")
    print("| variant | batches | receive | receive + ack |")
    print("|---|---:|---:|---:|")
    for queue, label in zip(QUEUES, ("with the check (shipped)", "without the check")):
        print(
            f"| {label} | {len(receive[queue])} | {statistics.median(receive[queue]):.2f}"
            f" | {statistics.median(total[queue]):.2f} |"
        )
    ratio_receive = statistics.median(receive[QUEUES[0]]) / statistics.median(receive[QUEUES[1]])
    ratio_total = statistics.median(total[QUEUES[0]]) / statistics.median(total[QUEUES[1]])
    print(f"with / without: receive {ratio_receive:.3f}, receive + ack {ratio_total:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", required=True)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=100)
    arguments = parser.parse_args()
    run(arguments.database, arguments.messages, arguments.rounds, arguments.batch)


if __name__ == "__main__":
    main()
