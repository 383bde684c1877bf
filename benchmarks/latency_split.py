"""W3's latency split at the producer's commit, txqueue and raw SQL alternating (PostgreSQL).

    python benchmarks/latency_split.py --database postgresql://user@host/db [--rounds 4]

A producer sends one message per transaction at ``--rate`` per second; one consumer process
takes one message per transaction (txqueue: ``receive`` with ``max_batch_size=1`` and a
token-fenced ack; raw SQL: ``UPDATE … SKIP LOCKED … RETURNING`` and ``DELETE``, polling
every 2 ms). Each message's latency (before the send → the consumer holding it) is split at
the return of the producer's commit: ``commit`` (the producer's own statement) and
``after`` (waking, receiving). The consumer's ack time is reported too.
The systems alternate, each first in every other round, so a stall of the machine's disk
weighs on both. docs/performance.md ("Latency tails") quotes it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time
import uuid
from datetime import timedelta
from typing import Any

import psycopg

import txqueue
from txqueue.core.url import parse_url

DDL = "CREATE QUEUE SplitQ (Id STRING(36) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"
RAW_DDL = (
    "CREATE TABLE IF NOT EXISTS txqueue_split_raw (id bigserial PRIMARY KEY,"
    " payload bytea NOT NULL, ready_at timestamptz NOT NULL DEFAULT now());"
    " CREATE INDEX IF NOT EXISTS txqueue_split_raw_ready ON txqueue_split_raw (ready_at)"
)
RAW_RECEIVE = (
    "UPDATE txqueue_split_raw SET ready_at = now() + interval '10 s' WHERE id IN (SELECT id"
    " FROM txqueue_split_raw WHERE ready_at <= now() ORDER BY ready_at LIMIT 1"
    " FOR UPDATE SKIP LOCKED) RETURNING id, payload"
)


def _percentile(values: list[float], percent: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * percent / 100))]


def consume(system: str, url: str, ready: Any, stop: Any, out: Any) -> None:
    """The consumer process: (sequence, time held) per message, and its statement times."""
    held: list[tuple[int, float]] = []
    acks: list[float] = []
    if system == "raw":
        connection = psycopg.connect(parse_url(url).target, autocommit=True)
        ready.set()
        while not stop.is_set():
            rows = connection.execute(RAW_RECEIVE, prepare=True).fetchall()
            if not rows:
                time.sleep(0.002)
                continue
            received = time.perf_counter()
            held.append((json.loads(rows[0][1])["seq"], time.time()))
            connection.execute(
                "DELETE FROM txqueue_split_raw WHERE id = %s", (rows[0][0],), prepare=True
            )
            acks.append(time.perf_counter() - received)
        connection.close()
    else:
        db = txqueue.connect(url, dialect="googlesql")
        ready.set()
        while not stop.is_set():
            stream = db.receive("SplitQ", max_duration=timedelta(milliseconds=500))
            for message in stream:
                received = time.perf_counter()
                held.append((json.loads(message.payload)["seq"], time.time()))
                db.run_in_transaction(
                    lambda t, m=message: t.ack("SplitQ", m.key, lease_token=m.lease_token)
                )
                acks.append(time.perf_counter() - received)
                if stop.is_set():
                    break
        db.close()
    out.put((held, acks))


def one_run(
    system: str, url: str, db: txqueue.Database, raw: Any, count: int, rate: float
) -> dict[str, float]:
    context = multiprocessing.get_context("spawn")
    ready, stop, out = context.Event(), context.Event(), context.Queue()
    process = context.Process(target=consume, args=(system, url, ready, stop, out))
    process.start()
    ready.wait(60)
    time.sleep(0.5)
    sent: dict[int, tuple[float, float]] = {}
    started = time.perf_counter()
    for sequence in range(count):
        pause = started + sequence / rate - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        payload = json.dumps({"seq": sequence, "pad": "x" * 80}).encode()
        before = time.time()
        if system == "raw":
            raw.execute(
                "INSERT INTO txqueue_split_raw (payload) VALUES (%s)", (payload,), prepare=True
            )
        else:
            with db.batch() as batch:
                batch.send("SplitQ", (uuid.uuid4().hex,), payload)
        sent[sequence] = (before, time.time())
    time.sleep(1.0)
    stop.set()
    held, acks = out.get(timeout=60)
    process.join(30)
    total = [(at - sent[s][0]) * 1000 for s, at in held]
    commit = [(sent[s][1] - sent[s][0]) * 1000 for s, _ in held]
    after = [(at - sent[s][1]) * 1000 for s, at in held]
    return {
        "held": len(held),
        "p50": statistics.median(total),
        "p99": _percentile(total, 99),
        "commit_p99": _percentile(commit, 99),
        "after_p50": statistics.median(after),
        "after_p99": _percentile(after, 99),
        "after_max": max(after),
        "ack_p50": statistics.median(acks) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", required=True, help="a postgresql:// URL")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=200.0)
    args = parser.parse_args()
    if not args.database.startswith("postgres"):
        parser.error("PostgreSQL only: the raw consumer here is psycopg's")
    db = txqueue.connect(args.database, dialect="googlesql")
    if "splitq" not in {table.name.lower() for table in db.queues()}:
        db.update_ddl([DDL])
    raw = psycopg.connect(parse_url(args.database).target, autocommit=True)
    raw.execute(RAW_DDL)
    for round_number in range(args.rounds):
        order = ("raw", "txqueue") if round_number % 2 == 0 else ("txqueue", "raw")
        for system in order:
            raw.execute("TRUNCATE txqueue_split_raw, splitq")
            raw.execute("CHECKPOINT")
            result = one_run(system, args.database, db, raw, args.messages, args.rate)
            figures = ", ".join(
                f"{key} {value:.1f}" for key, value in result.items() if key != "held"
            )
            print(f"round {round_number} {system:7s} ms: {figures}", flush=True)
    raw.close()
    db.close()


if __name__ == "__main__":
    main()
