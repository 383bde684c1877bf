"""Concurrent senders on PostgreSQL: does the wake-up serialise their commits?

    python benchmarks/concurrent_sends.py --database postgresql://user@host/db
    python benchmarks/concurrent_sends.py --database ... --flush-delay-us 2000

PostgreSQL takes one cluster-wide lock before a transaction that NOTIFYs commits and holds it
through the commit's WAL flush, so notifying transactions cannot share a flush (group commit)
(River found this with a NOTIFY per insert). ``--senders`` processes each commit one message
per transaction for ``--seconds``; these systems in one run, ``--repeats`` times:

- ``raw``: INSERT, autocommit (what the disk and the server allow),
- ``raw-pipelined``: BEGIN, INSERT, COMMIT in one pipeline (txqueue's shape before its
  lone sends became one statement, without NOTIFY),
- ``raw+notify``: the same with a NOTIFY inside the transaction (the serialised shape),
- ``raw+notify-after``: the NOTIFY after COMMIT as its own asynchronously committed
  statement, in the same pipeline (what txqueue did before its notifier thread),
- ``txqueue``: ``db.batch().send(...)``, one message per batch.

Prints the median rate of each, the ratios to the raw INSERT, and for txqueue how many
NOTIFYs a listener saw per committed send. On a machine whose client CPU is the limit the
lock hardly shows; ``--flush-delay-us`` makes each flush slower (as networked storage is),
and there it does.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time
import uuid
from typing import Any

import psycopg

import txqueue

DDL = "CREATE QUEUE SendQ (Id STRING(64) NOT NULL, Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"
RAW_DDL = "CREATE TABLE IF NOT EXISTS raw_sends (id bigserial PRIMARY KEY, payload bytea)"
PAYLOAD = b"x" * 100
SYSTEMS = ("raw", "raw-pipelined", "raw+notify", "raw+notify-after", "txqueue")
NOTIFY_AFTER = "SELECT set_config('synchronous_commit', 'off', true), pg_notify('raw_sends', 'x')"


def conninfo(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def sender(system: str, url: str, seconds: float, start: Any, out: Any) -> None:
    """One process: wait for the start, send one message per transaction until time is up."""
    db = txqueue.connect(url) if system == "txqueue" else None
    raw = None if db else psycopg.connect(conninfo(url), autocommit=True)
    start.wait()
    deadline = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < deadline:
        if db is not None:
            with db.batch() as batch:
                batch.send("SendQ", (uuid.uuid4().hex,), PAYLOAD)
        elif system == "raw":
            assert raw is not None
            raw.execute("INSERT INTO raw_sends (payload) VALUES (%s)", [PAYLOAD], prepare=True)
        elif system == "raw-pipelined":
            assert raw is not None
            with raw.pipeline():
                raw.execute("BEGIN")
                raw.execute("INSERT INTO raw_sends (payload) VALUES (%s)", [PAYLOAD], prepare=True)
                raw.execute("COMMIT")
        elif system == "raw+notify":
            assert raw is not None
            with raw.pipeline():
                raw.execute("BEGIN")
                raw.execute("INSERT INTO raw_sends (payload) VALUES (%s)", [PAYLOAD], prepare=True)
                raw.execute("SELECT pg_notify('raw_sends', 'x')", prepare=True)
                raw.execute("COMMIT")
        else:
            assert raw is not None
            with raw.pipeline():  # statements up to a Sync share an implicit transaction:
                raw.execute("BEGIN")  # an explicit one keeps the INSERT's commit synchronous
                raw.execute("INSERT INTO raw_sends (payload) VALUES (%s)", [PAYLOAD], prepare=True)
                raw.execute("COMMIT")
                raw.execute(NOTIFY_AFTER, prepare=True)
        sent += 1
    out.put(sent)
    if db is not None:
        db.close()
    if raw is not None:
        raw.close()


def run(system: str, url: str, senders: int, seconds: float) -> tuple[float, int]:
    """Messages per second over all senders, and the NOTIFYs a listener saw meanwhile."""
    context = multiprocessing.get_context("spawn")
    start, out = context.Event(), context.Queue()
    processes = [
        context.Process(target=sender, args=(system, url, seconds, start, out))
        for _ in range(senders)
    ]
    for process in processes:
        process.start()
    time.sleep(1.0)  # connections open, imports done
    with psycopg.connect(conninfo(url), autocommit=True) as listener:
        listener.execute("LISTEN txqueue")
        start.set()
        total = sum(out.get(timeout=seconds + 60) for _ in processes)
        deadline = time.monotonic() + 1.0  # NOTIFYs still in flight
        notifies = 0
        while time.monotonic() < deadline:
            notifies += sum(1 for _ in listener.notifies(timeout=0.1, stop_after=1000))
    for process in processes:
        process.join(30)
    return total / seconds, notifies if system == "txqueue" else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", required=True)
    parser.add_argument("--senders", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="a comma-separated subset")
    parser.add_argument(
        "--flush-delay-us",
        type=int,
        default=0,
        help="stand in for slower storage: the senders' sessions wait this long before each "
        "WAL flush (commit_delay, with commit_siblings = 0; needs a superuser)",
    )
    args = parser.parse_args()
    if args.flush_delay_us:  # libpq reads PGOPTIONS; the sender processes inherit it
        os.environ["PGOPTIONS"] = (
            f"{os.environ.get('PGOPTIONS', '')} -c commit_delay={args.flush_delay_us}"
            " -c commit_siblings=0"
        ).strip()
    db = txqueue.connect(args.database, dialect="googlesql")
    if "sendq" not in {t.name.lower() for t in db.queues()}:
        db.update_ddl([DDL])
    db.close()
    with psycopg.connect(conninfo(args.database), autocommit=True) as admin:
        admin.execute(RAW_DDL)
    rates: dict[str, list[float]] = {name: [] for name in args.systems.split(",")}
    per_send: list[float] = []
    for _ in range(args.repeats):
        for system in rates:
            rate, notifies = run(system, args.database, args.senders, args.seconds)
            rates[system].append(rate)
            if system == "txqueue":
                per_send.append(notifies / (rate * args.seconds))
        with psycopg.connect(conninfo(args.database), autocommit=True) as admin:
            admin.execute("TRUNCATE raw_sends")
            admin.execute("TRUNCATE sendq")
    raw = statistics.median(rates.get("raw") or [float("nan")])
    delay = f", WAL flush delayed {args.flush_delay_us} µs" if args.flush_delay_us else ""
    print(f"{args.senders} senders, one message per transaction{delay}, median of {args.repeats}:")
    for system, values in rates.items():
        median = statistics.median(values)
        runs = ", ".join(f"{v:,.0f}" for v in values)
        print(f"  {system:<17} {median:>9,.0f}/s  ({median / raw:.2f}× raw INSERT; runs {runs})")
    if per_send:
        print(f"  txqueue NOTIFYs seen per committed send: {statistics.median(per_send):.2f}")


if __name__ == "__main__":
    main()
